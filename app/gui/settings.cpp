#include "app/gui/settings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <system_error>

#include "app/measure/choices.h"
#include "model/file_io.h"

namespace fl::gui {
namespace {

namespace fs = std::filesystem;

bool parse_int(const std::string& s, long lo, long hi, int* out) {
  // Digits with an optional minus: strtol alone would also take spaces and a plus sign.
  const size_t first = !s.empty() && s[0] == '-' ? 1 : 0;
  if (s.size() <= first || !std::isdigit(static_cast<unsigned char>(s[first]))) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_fraction(const std::string& s, float lo, float hi, float* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = static_cast<float>(v);
  return true;
}

bool parse_bool(const std::string& s, bool* out) {
  if (s == "true" || s == "1") return *out = true, true;
  if (s == "false" || s == "0") return *out = false, true;
  return false;
}

// A word of letters, digits, '_' and '-' (lesson ids, views, precisions): nothing else is ours.
bool plain_word(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

std::string window_size_problem(int width, int height) {
  if (width < kMinWindowWidth || height < kMinWindowHeight || width > kMaxWindowSide ||
      height > kMaxWindowSide) {
    return "the window size must be from " + std::to_string(kMinWindowWidth) + "x" +
           std::to_string(kMinWindowHeight) + " to " + std::to_string(kMaxWindowSide) + "x" +
           std::to_string(kMaxWindowSide) + " pixels, got " + std::to_string(width) + "x" +
           std::to_string(height);
  }
  return "";
}

bool parse_window_size(const std::string& text, int* width, int* height, std::string* why) {
  const size_t x = text.find_first_of("xX");
  int w = 0, h = 0;
  if (x == std::string::npos || !parse_int(text.substr(0, x), 0, kMaxWindowSide * 16L, &w) ||
      !parse_int(text.substr(x + 1), 0, kMaxWindowSide * 16L, &h)) {
    if (why)
      *why = "the size is WIDTHxHEIGHT in pixels, e.g. 1920x1080, got '" +
             shorten_for_message(text) + "'";
    return false;
  }
  if (const std::string problem = window_size_problem(w, h); !problem.empty()) {
    if (why) *why = problem;
    return false;
  }
  *width = w;
  *height = h;
  return true;
}

std::string settings_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  fs::path base;
  if (xdg && xdg[0] == '/') {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home && home[0] == '/') {
    base = fs::path(home) / ".config";
  } else {
    return "";
  }
  return (base / "fusionlab" / "settings.ini").string();
}

float zoomed(float zoom, int steps) {
  const float z = std::round((zoom + kZoomStep * static_cast<float>(steps)) / kZoomStep) * kZoomStep;
  return std::clamp(z, kMinZoom, kMaxZoom);
}

std::string settings_text(const Settings& s) {
  std::ostringstream out;
  out << "# Fusion Lab settings, written when the window closes. Delete this file (or start\n"
         "# fusionlab with --reset-settings) to start from the defaults.\n";
  out << "version = 1\n";
  if (s.width > 0 && s.height > 0) {
    out << "width = " << s.width << "\nheight = " << s.height << "\n";
  }
  if (s.has_position) out << "x = " << s.x << "\ny = " << s.y << "\n";
  out << "maximized = " << (s.maximized ? "true" : "false") << "\n";
  if (!s.lesson.empty()) out << "lesson = " << s.lesson << "\n";
  if (!s.view.empty()) out << "view = " << s.view << "\n";
  if (!s.precision.empty()) out << "precision = " << s.precision << "\n";
  if (!s.cache.empty()) out << "cache = " << s.cache << "\n";
  out << "peers = " << (s.show_peers ? "true" : "false") << "\n";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4f", s.panels.left_width);
  out << "left_width = " << buf << "\n";
  std::snprintf(buf, sizeof(buf), "%.4f", s.panels.measurement_height);
  out << "measurement_height = " << buf << "\n";
  out << "split = " << (s.panels.split ? "true" : "false") << "\n";
  out << "side_by_side = " << (s.panels.side_by_side ? "true" : "false") << "\n";
  std::snprintf(buf, sizeof(buf), "%.4f", s.panels.split_fraction);
  out << "split_fraction = " << buf << "\n";
  out << "second_view = " << s.panels.second_view << "\n";
  std::snprintf(buf, sizeof(buf), "%.2f", s.zoom);
  out << "zoom = " << buf << "\n";
  return out.str();
}

namespace {

// key -> (its reader into *s: false on a bad value, what a good value looks like)
using Reader = std::function<bool(const std::string&)>;
using Readers = std::map<std::string, std::pair<Reader, const char*>>;

// The panels' sizes and the split (the [panels] part of the file).
Readers panel_readers(Settings* s) {
  return {
      {"left_width",
       {[s](const std::string& v) {
          return parse_fraction(v, 0.05f, 0.95f, &s->panels.left_width);
        },
        "a fraction from 0.05 to 0.95"}},
      {"measurement_height",
       {[s](const std::string& v) {
          return parse_fraction(v, 0.05f, 0.95f, &s->panels.measurement_height);
        },
        "a fraction from 0.05 to 0.95"}},
      {"split",
       {[s](const std::string& v) { return parse_bool(v, &s->panels.split); }, "true or false"}},
      {"side_by_side",
       {[s](const std::string& v) { return parse_bool(v, &s->panels.side_by_side); },
        "true or false"}},
      {"split_fraction",
       {[s](const std::string& v) {
          return parse_fraction(v, 0.1f, 0.9f, &s->panels.split_fraction);
        },
        "a fraction from 0.1 to 0.9"}},
      {"second_view",
       {[s](const std::string& v) {
          s->panels.second_view = v;
          return plain_word(v);
        },
        "a view name"}},
  };
}

Readers settings_readers(Settings* s) {
  Precision precision = Precision::fp32;
  CacheMode cache = CacheMode::cold;
  Readers readers = {
      {"version",
       {[](const std::string& v) {
          int n;
          return parse_int(v, 1, 1, &n);
        },
        "1"}},
      {"width",
       {[s](const std::string& v) {
          return parse_int(v, kMinWindowWidth, kMaxWindowSide, &s->width);
        },
        "a whole number of pixels"}},
      {"height",
       {[s](const std::string& v) {
          return parse_int(v, kMinWindowHeight, kMaxWindowSide, &s->height);
        },
        "a whole number of pixels"}},
      {"x",
       {[s](const std::string& v) {
          return s->has_position = parse_int(v, -100000, 100000, &s->x);
        },
        "a whole number of pixels"}},
      {"y",
       {[s](const std::string& v) {
          return s->has_position = parse_int(v, -100000, 100000, &s->y);
        },
        "a whole number of pixels"}},
      {"maximized",
       {[s](const std::string& v) { return parse_bool(v, &s->maximized); }, "true or false"}},
      {"peers",
       {[s](const std::string& v) { return parse_bool(v, &s->show_peers); }, "true or false"}},
      {"zoom",
       {[s](const std::string& v) { return parse_fraction(v, kMinZoom, kMaxZoom, &s->zoom); },
        "a factor from 0.5 to 3"}},
      {"lesson",
       {[s](const std::string& v) {
          s->lesson = v;
          return plain_word(v);
        },
        "a lesson id"}},
      // Any plain word: a view this version does not have is ignored when the window starts.
      {"view",
       {[s](const std::string& v) {
          s->view = v;
          return plain_word(v);
        },
        "a view name"}},
      {"precision",
       {[s, precision](const std::string& v) mutable {
          s->precision = v;
          return parse_precision(v, &precision);
        },
        kPrecisionChoices}},
      {"cache",
       {[s, cache](const std::string& v) mutable {
          s->cache = v;
          return parse_cache_mode(v, &cache);
        },
        kCacheChoices}},
  };
  readers.merge(panel_readers(s));
  return readers;
}

// A settings file that may be read: a regular file of at most kMaxSettingsBytes. *exists is
// false (and the status Ok) when there is none.
Status check_settings_file(const std::string& path, bool* exists) {
  std::error_code ec;
  *exists = fs::exists(path, ec);
  if (!*exists) return Status::Ok();
  if (!fs::is_regular_file(path, ec)) {
    return Status::Error(path + " is not a regular file");
  }
  const auto bytes = fs::file_size(path, ec);
  if (ec) return Status::Error(path + ": " + ec.message());
  if (bytes > static_cast<uintmax_t>(kMaxSettingsBytes)) {
    return Status::Error(path + " is " + std::to_string(bytes) + " bytes, over the " +
                         std::to_string(kMaxSettingsBytes / 1024) + " KiB a settings file can be");
  }
  return Status::Ok();
}

}  // namespace

Status settings_from_text(const std::string& contents, const std::string& name, Settings* out) {
  Settings s;
  const auto bad = [&](int line, const std::string& what) {
    return Status::Error(name + ": line " + std::to_string(line) + ": " + what);
  };
  const auto readers = settings_readers(&s);
  std::istringstream in(contents);
  std::string text;
  int line = 0;
  bool any = false;
  while (std::getline(in, text)) {
    ++line;
    for (char c : text) {
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\r') {
        return bad(line, "holds control characters (not a settings file?)");
      }
    }
    const std::string t = trim(text);
    if (t.empty() || t[0] == '#') continue;
    const size_t eq = t.find('=');
    if (eq == std::string::npos) return bad(line, "is not `key = value`");
    const std::string key = trim(t.substr(0, eq)), value = trim(t.substr(eq + 1));
    const auto it = readers.find(key);
    if (it == readers.end()) continue;  // a newer fusionlab's key
    if (!it->second.first(value)) {
      return bad(line, key + " is " + it->second.second + ", got '" +
                           shorten_for_message(value, 40) + "'");
    }
    any = true;
  }
  if (!any) return Status::Error(name + " holds no settings (empty or not a settings file)");
  if ((s.width > 0) != (s.height > 0)) {
    return Status::Error(name + ": width and height come together");
  }
  *out = std::move(s);
  return Status::Ok();
}

Status load_settings(const std::string& path, Settings* out, bool* found) {
  if (found) *found = false;
  bool exists = false;
  FL_TRY(check_settings_file(path, &exists));
  if (!exists) return Status::Ok();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot read it: " + errno_text());
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return Status::Error(path + ": cannot read it");
  FL_TRY(settings_from_text(contents.str(), path, out));
  if (found) *found = true;
  return Status::Ok();
}

Status write_file_atomic(const std::string& path, const std::string& text) {
  // The folder first (~/.config/fusionlab may not exist yet), then the shared atomic writer
  // (model/file_io.h: exclusive temporary file in the same folder, fsync, rename).
  const fs::path dir =
      fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) {
    return Status::Error("cannot make the folder " + dir.string() +
                         (ec ? ": " + ec.message() : std::string()));
  }
  return write_file_atomically(path, text);
}

Status save_settings(const std::string& path, const Settings& settings) {
  return write_file_atomic(path, settings_text(settings));
}

}  // namespace fl::gui
