#include "app/gui/script.h"

#include <fstream>
#include <set>
#include <sstream>

namespace fl::gui {

Status load_script(const std::string& path, const std::string& out_dir, Script* out) {
  std::ifstream in(path);
  if (!in) return Status::Error(path + ": cannot open the script");
  Script script;
  script.path = path;
  script.out_dir = out_dir.empty() ? "." : out_dir;
  static const std::set<std::string> kNoArg = {"sweep", "wait", "quit"};
  static const std::set<std::string> kWithArg = {"lesson", "size", "level", "precision",
                                                 "cache", "view", "screenshot"};
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
    words >> c.arg;
    std::string extra;
    const std::string where = path + ":" + std::to_string(line) + ": ";
    if (words >> extra) return Status::Error(where + "too many words after '" + c.verb + "'");
    if (kNoArg.count(c.verb)) {
      if (!c.arg.empty()) return Status::Error(where + "'" + c.verb + "' takes no argument");
    } else if (kWithArg.count(c.verb)) {
      if (c.arg.empty()) return Status::Error(where + "'" + c.verb + "' needs an argument");
    } else {
      return Status::Error(where + "unknown command '" + c.verb +
                           "' (lesson, size, level, precision, cache, view, sweep, wait, "
                           "screenshot, quit)");
    }
    if (c.verb == "screenshot") {
      if (c.arg.front() == '/' || c.arg.find("..") != std::string::npos ||
          c.arg.size() < 5 || c.arg.substr(c.arg.size() - 4) != ".png") {
        return Status::Error(where + "a screenshot is a .png name inside --out-dir, got '" +
                             c.arg + "'");
      }
    }
    script.commands.push_back(c);
  }
  *out = std::move(script);
  return Status::Ok();
}

}  // namespace fl::gui
