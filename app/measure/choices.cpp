#include "app/measure/choices.h"

#include <algorithm>

#include "model/file_io.h"

namespace fl {

const char* to_string(Timer timer) {
  return timer == Timer::cupti ? "cupti" : "events";
}

bool parse_timer(const std::string& text, Timer* out) {
  if (text == "cupti")
    *out = Timer::cupti;
  else if (text == "events")
    *out = Timer::events;
  else
    return false;
  return true;
}

const std::vector<std::string>& view_names() {
  static const std::vector<std::string> names = {"flow",     "speedup", "bandwidth",
                                                 "timeline", "memory",  "roofline"};
  return names;
}

bool is_view_name(const std::string& text) {
  const std::vector<std::string>& names = view_names();
  return std::find(names.begin(), names.end(), text) != names.end();
}

std::string not_a_choice(const std::string& what, const char* choices, const std::string* got) {
  std::string line = what + " is " + choices;
  if (got != nullptr) line += ", got '" + shorten_for_message(*got) + "'";
  return line;
}

}  // namespace fl
