// Checks every output a script wrote, by content: reads the script with the window's own parser
// (gui::load_script) and, for each output command, opens the file it names under the out dir.
//
// usage: fusionlab_output_check SCRIPT OUT_DIR WINDOW_W WINDOW_H [--colour NAME.png R G B]...
//   screenshot NAME.png          a PNG; the whole window is WINDOW_W wide and taller than
//                                WINDOW_H by its caption strip (with `caption on`); a view is
//                                narrower; a real frame (many colours), and the caption strip
//                                (its last rows) holds text on the strip's own background
//   export-trace NAME.json[.gz]  Chrome Trace Event JSON: traceEvents with complete ("X")
//                                events that carry name, ts, dur, pid and tid, and metadata
//   export-csv NAME.csv          a header with units and at least one row, every row as many
//                                fields as the header (quoted fields honoured)
//   save-session NAME.json       a session that load_session reads, with measurements
//   --colour NAME.png R G B      that picture holds at least 20 pixels of this colour (+-6)
#include <stb_image.h>  // implementation in Debian's libstb

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/gui/script.h"
#include "app/measure/export.h"
#include "model/session_json.h"

namespace {

int failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  ++failures;
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

struct Colour {
  int r, g, b;
};

void check_png(const std::string& path, bool view_only, bool caption, int window_w, int window_h,
               const std::vector<Colour>& colours) {
  int w = 0, h = 0, channels = 0;
  unsigned char* rgb = stbi_load(path.c_str(), &w, &h, &channels, 3);
  if (!rgb) return fail(path + ": not a readable PNG (" + stbi_failure_reason() + ")");
  std::set<int> distinct;
  for (int i = 0; i < w * h; ++i)
    distinct.insert(rgb[3 * i] << 16 | rgb[3 * i + 1] << 8 | rgb[3 * i + 2]);
  std::printf("%s: %dx%d, %zu colours\n", path.c_str(), w, h, distinct.size());
  if (distinct.size() < 200) fail(path + ": only " + std::to_string(distinct.size()) + " colours");
  if (!view_only) {
    if (w != window_w)
      fail(path + ": the whole window is " + std::to_string(window_w) + " wide, got " +
           std::to_string(w));
    if (caption ? h <= window_h : h != window_h) {
      fail(path + ": height " + std::to_string(h) + " does not fit the window's " +
           std::to_string(window_h) + (caption ? " plus a caption strip" : ""));
    }
  } else if (w >= window_w || h >= window_h || w < 200 || h < 100) {
    fail(path + ": a view's picture should be smaller than the window, got " + std::to_string(w) +
         "x" + std::to_string(h));
  }
  if (caption) {
    // The strip: rows from the bottom whose left margin is the strip's plain background (the
    // caption's text starts half a font size in), up to its accent line.
    const unsigned char* bg = rgb + (static_cast<size_t>(h - 1) * w) * 3;
    const auto plain_at = [&](int x, int y) {
      const unsigned char* p = rgb + (static_cast<size_t>(y) * w + x) * 3;
      return p[0] == bg[0] && p[1] == bg[1] && p[2] == bg[2];
    };
    int top = h - 1;
    while (top > 0 && plain_at(0, top - 1) && plain_at(3, top - 1)) --top;
    const int rows = h - top;
    int bright = 0, plain = 0;
    for (int y = top; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        const unsigned char* p = rgb + (static_cast<size_t>(y) * w + x) * 3;
        if (p[0] + p[1] + p[2] > bg[0] + bg[1] + bg[2] + 300) ++bright;
        if (plain_at(x, y)) ++plain;
      }
    }
    std::printf("  caption strip: %d rows, %d bright pixels\n", rows, bright);
    if (rows < 12) fail(path + ": no caption strip at the bottom");
    if (!view_only && rows > h - window_h) fail(path + ": the caption strip runs into the window");
    if (bright < 150) fail(path + ": the caption strip shows no text");
    if (static_cast<double>(plain) / (static_cast<double>(rows) * w) < 0.5) {
      fail(path + ": the caption strip is not plain behind its text");
    }
  }
  for (const Colour& c : colours) {
    int n = 0;
    for (int i = 0; i < w * h; ++i) {
      if (std::abs(rgb[3 * i] - c.r) <= 6 && std::abs(rgb[3 * i + 1] - c.g) <= 6 &&
          std::abs(rgb[3 * i + 2] - c.b) <= 6) {
        ++n;
      }
    }
    std::printf("  %d pixels of colour %d,%d,%d\n", n, c.r, c.g, c.b);
    if (n < 20) fail(path + ": too few pixels of the expected colour");
  }
  stbi_image_free(rgb);
}

void check_trace(const std::string& path) {
  std::string text;
  if (!read_file(path, &text)) return fail(path + ": cannot read");
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    std::string plain;
    if (fl::Status st = fl::gzip_decompress(text, &plain); !st.ok())
      return fail(path + ": " + st.message());
    text = plain;
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return fail(path + ": not valid JSON");
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) {
    return fail(path + ": no traceEvents array");
  }
  std::map<std::string, int> phases;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    ++phases[ph];
    if (ph == "X") {
      for (const char* key : {"name", "ts", "dur", "pid", "tid"}) {
        if (!e.contains(key)) return fail(path + ": an X event lacks '" + key + "'");
      }
    }
  }
  std::printf("%s: %zu events, %d complete, %d metadata, %d counter\n", path.c_str(),
              j["traceEvents"].size(), phases["X"], phases["M"], phases["C"]);
  if (phases["X"] < 1) fail(path + ": no complete (X) events");
  if (phases["M"] < 1) fail(path + ": no metadata (M) events naming the tracks");
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

void check_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(path + ": cannot read");
  std::string line;
  if (!std::getline(in, line)) return fail(path + ": empty");
  const size_t columns = csv_fields(line).size();
  if (columns < 5 || line.find("_us") == std::string::npos) {
    fail(path + ": the header has no units (expected columns such as ..._us)");
  }
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++rows;
    if (csv_fields(line).size() != columns) {
      return fail(path + ": row " + std::to_string(rows) + " has " +
                  std::to_string(csv_fields(line).size()) + " fields, the header " +
                  std::to_string(columns));
    }
  }
  std::printf("%s: %zu columns, %d rows\n", path.c_str(), columns, rows);
  if (rows < 1) fail(path + ": no rows");
}

void check_session(const std::string& path) {
  fl::Session s;
  if (fl::Status st = fl::load_session(path, &s); !st.ok()) return fail(st.message());
  std::printf("%s: %zu measurements on %s\n", path.c_str(), s.measurements.size(),
              s.device.name.c_str());
  if (s.measurements.empty()) fail(path + ": no measurements");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: %s SCRIPT OUT_DIR WINDOW_W WINDOW_H [--colour NAME.png R G B]...\n",
                 argv[0]);
    return 2;
  }
  const std::string out_dir = argv[2];
  const int window_w = std::atoi(argv[3]), window_h = std::atoi(argv[4]);
  std::map<std::string, std::vector<Colour>> colours;
  for (int i = 5; i + 4 < argc && std::string(argv[i]) == "--colour"; i += 5) {
    colours[argv[i + 1]].push_back(
        {std::atoi(argv[i + 2]), std::atoi(argv[i + 3]), std::atoi(argv[i + 4])});
  }
  fl::gui::Script script;
  if (fl::Status st = fl::gui::load_script(argv[1], out_dir, &script); !st.ok()) {
    std::fprintf(stderr, "FAIL: %s\n", st.message().c_str());
    return 1;
  }
  bool caption = true;
  int outputs = 0;
  for (const auto& c : script.commands) {
    const std::string path = out_dir + "/" + c.arg;
    if (c.verb == "caption") caption = c.arg == "on";
    if (c.verb == "screenshot") {
      check_png(path, c.view_only, caption, window_w, window_h, colours[c.arg]);
    } else if (c.verb == "export-trace") {
      check_trace(path);
    } else if (c.verb == "export-csv") {
      check_csv(path);
    } else if (c.verb == "save-session") {
      check_session(path);
    } else {
      continue;
    }
    ++outputs;
  }
  if (outputs == 0) fail(std::string(argv[1]) + " writes nothing");
  std::printf("%d outputs checked\n", outputs);
  if (failures == 0) std::printf("OK\n");
  return failures == 0 ? 0 : 1;
}
