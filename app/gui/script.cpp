#include "app/gui/script.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <system_error>

#include "app/gui/backend_choice.h"
#include "app/gui/settings.h"
#include "app/gui/shortcuts.h"
#include "app/measure/choices.h"
#include "model/file_io.h"
#include "app/measure/replay_backend.h"
#include "model/sizes.h"
#include "kernels/catalog.h"

namespace fl::gui {
namespace {

namespace fs = std::filesystem;

// verb -> (fewest, most) words after it.
const std::map<std::string, std::pair<int, int>>& arity() {
  static const std::map<std::string, std::pair<int, int>> table = {
      {"lesson", {1, 1}},       {"size", {1, 1}},         {"level", {1, 1}},
      {"precision", {1, 1}},    {"cache", {1, 1}},        {"view", {1, 1}},
      {"sweep", {0, 0}},        {"cancel-sweep", {0, 0}}, {"wait", {0, 1}},
      {"caption", {1, 1}},      {"screenshot", {1, 3}},   {"open", {1, 1}},
      {"compare", {1, 1}},      {"export-trace", {1, 1}}, {"export-csv", {1, 1}},
      {"save-session", {1, 1}}, {"quit", {0, 0}},         {"window-size", {1, 2}},
      {"key", {1, 1}},          {"svg", {1, 1}},  // the front plot as SVG (viz/svg.h)
      {"phases", {1, 1}},  // the Timeline view's phase lanes (kernels' phase timelines)
  };
  return table;
}

std::string verbs_list() {
  return "lesson, size, level, precision, cache, view, sweep, cancel-sweep, wait, caption, "
         "screenshot, window-size, key, open, compare, export-trace, export-csv, save-session, "
         "svg, phases, quit";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// screenshot NAME.png | screenshot view NAME.png | screenshot view VIEW NAME.png: the words
// before the name; fills view_only and view.
Status check_screenshot_view(ScriptCommand* c) {
  if (c->args.size() < 2) return Status::Ok();
  if (c->args[0] != "view") {
    return Status::Error("screenshot takes NAME.png, view NAME.png or view VIEW NAME.png");
  }
  c->view_only = true;
  if (c->args.size() == 3) {
    c->view = c->args[1];
    if (!is_view_name(c->view)) return Status::Error(not_a_choice("view", kViewChoices));
  }
  return Status::Ok();
}

// The largest size any lesson takes: a `size` before the script's first `lesson` is checked
// against it here, and against the lesson on screen when it runs.
int64_t largest_lesson_size() {
  int64_t largest = 1;
  for (const Lesson* lesson : lessons()) largest = std::max(largest, lesson->info().size_axis.max);
  return largest;
}

// size N: a size as bench --sizes takes it, within the lesson the script chose last (`lesson`);
// before any `lesson`, within the largest lesson's maximum.
Status check_size(const std::string& a, const Lesson* lesson) {
  int64_t n = 0;
  FL_TRY(parse_size(a, &n));
  if (lesson != nullptr) return check_lesson_size(lesson->info(), n);
  if (n > largest_lesson_size()) {
    return Status::Error("size " + format_size(n) + " is larger than any lesson takes (at most " +
                         format_size(largest_lesson_size()) + ")");
  }
  return Status::Ok();
}

// level N|top: within the lesson the script chose last; before any `lesson`, 0..kMaxLevelNumber
// (the lesson on screen checks it again when it runs).
Status check_level(const std::string& a, const Lesson* lesson) {
  if (a == "top") return Status::Ok();
  const int top = lesson != nullptr ? lesson->level_count() - 1 : kMaxLevelNumber;
  char* end = nullptr;
  errno = 0;
  const long level = std::strtol(a.c_str(), &end, 10);
  if (end == a.c_str() || *end != '\0' || errno == ERANGE || level < 0 || level > top) {
    return Status::Error(
        (lesson != nullptr ? lesson->info().id + " has levels 0.." : "level is 0..") +
        std::to_string(top) + " or top, got '" + shorten_for_message(a) + "'");
  }
  return Status::Ok();
}

// Checks one command's arguments; fills the derived fields. `lesson` is the lesson the script
// chose last (nullptr before its first `lesson`); a `lesson` command updates it. Returns an error
// without the "file:line: " prefix.
Status check_command(ScriptCommand* c, const Lesson** lesson) {
  const std::string& a = c->arg;
  const auto output = [&](const std::vector<std::string>& exts, const char* what) -> Status {
    if (plain_output_name(a, exts)) return Status::Ok();
    std::string list;
    for (const auto& e : exts) list += (list.empty() ? "" : " or ") + e;
    return Status::Error(std::string(what) + " is a " + list +
                         " name inside --out-dir (a plain name: letters, digits, '.', '_', '-'; "
                         "no folders, no '..'), got '" +
                         shorten_for_message(a) + "'");
  };
  if (c->verb == "lesson") {
    *lesson = find_lesson(a);
    if (*lesson == nullptr) {
      return Status::Error("no lesson '" + shorten_for_message(a) +
                           "' (fusionlab lessons lists them)");
    }
  } else if (c->verb == "size") {
    return check_size(a, *lesson);
  } else if (c->verb == "level") {
    return check_level(a, *lesson);
  } else if (c->verb == "precision") {
    Precision p;
    if (!parse_precision(a, &p)) return Status::Error(not_a_choice("precision", kPrecisionChoices));
  } else if (c->verb == "cache") {
    CacheMode m;
    if (!parse_cache_mode(a, &m)) return Status::Error(not_a_choice("cache", kCacheChoices));
  } else if (c->verb == "view") {
    if (!is_view_name(a)) return Status::Error(not_a_choice("view", kViewChoices));
  } else if (c->verb == "wait") {
    if (!c->args.empty()) {
      char* end = nullptr;
      const double s = std::strtod(a.c_str(), &end);
      if (end == a.c_str() || *end != '\0' || !(s >= 1 && s <= 3600)) {
        return Status::Error("wait takes seconds from 1 to 3600 (default 180), got '" +
                             shorten_for_message(a) + "'");
      }
    }
  } else if (c->verb == "key") {
    const Shortcut* key = find_shortcut(a);
    if (!key || !key->scriptable) {
      std::string names;
      for (const Shortcut& s : shortcuts()) {
        if (s.scriptable) names += (names.empty() ? "" : ", ") + std::string(s.name);
      }
      return Status::Error("key is one of " + names +
                           " (file dialogs, full screen and quit are "
                           "not for scripts), got '" +
                           shorten_for_message(a) + "'");
    }
  } else if (c->verb == "window-size") {
    // window-size 1920 1080, or window-size 1920x1080
    const std::string text = c->args.size() == 2 ? c->args[0] + "x" + c->args[1] : a;
    std::string why;
    if (!parse_window_size(text, &c->width, &c->height, &why)) {
      return Status::Error("window-size takes W H in pixels (e.g. 1920 1080): " + why);
    }
  } else if (c->verb == "caption") {
    if (a != "on" && a != "off") return Status::Error("caption is on or off");
  } else if (c->verb == "phases") {
    if (a != "on" && a != "off") return Status::Error("phases is on or off");
  } else if (c->verb == "screenshot") {
    FL_TRY(check_screenshot_view(c));
    return output({".png"}, "a screenshot");
  } else if (c->verb == "export-trace") {
    return output({".json", ".json.gz"}, "a trace");
  } else if (c->verb == "export-csv") {
    return output({".csv"}, "a CSV");
  } else if (c->verb == "svg") {
    return output({".svg"}, "an SVG");
  } else if (c->verb == "save-session") {
    return output({".json"}, "a session");
  } else if (c->verb == "open" || (c->verb == "compare" && a != "off")) {
    c->paths = resolve_recording_paths(a);
    std::unique_ptr<ReplayBackend> recording;  // loaded once here to check it; again when run
    if (Status st = load_recording(c->paths, &recording); !st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace

bool plain_output_name(const std::string& name, const std::vector<std::string>& extensions) {
  if (name.empty() || name[0] == '.' || name.find("..") != std::string::npos) return false;
  for (char ch : name) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (!std::isalnum(u) && ch != '.' && ch != '_' && ch != '-') return false;
  }
  for (const std::string& e : extensions) {
    if (ends_with(name, e)) return true;
  }
  return false;
}

std::vector<std::string> resolve_recording_paths(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    if (part.empty()) continue;
    std::error_code ec;
    const fs::path p(part);
    if (p.is_relative() && !fs::exists(p, ec)) {
      const std::string assets = find_assets_folder();
      if (!assets.empty()) {
        const fs::path beside = fs::path(assets).parent_path() / p;
        if (fs::exists(beside, ec)) {
          out.push_back(beside.lexically_normal().string());
          continue;
        }
      }
    }
    out.push_back(part);
  }
  return out;
}

Status load_script(const std::string& path, const std::string& out_dir, Script* out) {
  // A regular file under 16 MiB, checked before it is read (a FIFO must not hang the window,
  // a folder is named as one); model/file_io.h.
  std::string contents;
  FL_TRY(read_file_checked(path, kMaxScriptFileBytes, "script", &contents));
  return script_from_text(contents, path, out_dir, out);
}

Status script_from_text(const std::string& contents, const std::string& path,
                        const std::string& out_dir, Script* out) {
  std::istringstream in(contents);
  Script script;
  script.path = path;
  script.out_dir = out_dir.empty() ? "." : out_dir;
  const Lesson* lesson = nullptr;  // the last `lesson` command's
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    const size_t hash = text.find('#');
    if (hash != std::string::npos) text.resize(hash);
    std::istringstream words(text);
    ScriptCommand c;
    c.line = line;
    if (!(words >> c.verb)) continue;  // blank or comment
    for (std::string w; words >> w;) c.args.push_back(w);
    if (!c.args.empty()) c.arg = c.args.back();
    const std::string where = path + ":" + std::to_string(line) + ": ";
    const auto it = arity().find(c.verb);
    if (it == arity().end()) {
      return Status::Error(where + "unknown command '" + shorten_for_message(c.verb) + "' (" +
                           verbs_list() + ")");
    }
    const int n = static_cast<int>(c.args.size());
    if (n < it->second.first) return Status::Error(where + "'" + c.verb + "' needs an argument");
    if (n > it->second.second) {
      return Status::Error(where + (it->second.second == 0
                                        ? "'" + c.verb + "' takes no argument"
                                        : "too many words after '" + c.verb + "'"));
    }
    if (Status st = check_command(&c, &lesson); !st.ok())
      return Status::Error(where + st.message());
    script.commands.push_back(std::move(c));
  }
  // The outputs' folder: made if missing, so a bad --out-dir is named before the window opens.
  std::error_code ec;
  fs::create_directories(script.out_dir, ec);
  if (!fs::is_directory(script.out_dir, ec)) {
    return Status::Error("--out-dir " + script.out_dir + " is not a folder that can be made" +
                         (ec ? ": " + ec.message() : std::string()));
  }
  *out = std::move(script);
  return Status::Ok();
}

}  // namespace fl::gui
