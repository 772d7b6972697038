// `fusionlab lessons [--json]`: the catalog, for people and for scripts.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli.h"
#include "kernels/catalog.h"

namespace fl {

int run_lessons(bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Lesson* lesson : lessons()) {
      const LessonInfo& info = lesson->info();
      nlohmann::json levels = nlohmann::json::array();
      for (size_t i = 0; i < info.levels.size(); ++i) {
        levels.push_back({{"level", i},
                          {"name", info.levels[i].name},
                          {"summary", info.levels[i].summary},
                          {"launches", info.levels[i].launches}});
      }
      nlohmann::json precisions = nlohmann::json::array();
      for (Precision p : info.precisions) precisions.push_back(to_string(p));
      out.push_back({{"id", info.id},
                     {"title", info.title},
                     {"formula", info.formula},
                     {"size_axis",
                      {{"unit", info.size_axis.unit},
                       {"min", info.size_axis.min},
                       {"max", info.size_axis.max},
                       {"default", info.size_axis.default_size},
                       {"inner_name", info.size_axis.inner_name},
                       {"inner_default", info.size_axis.inner_default},
                       {"inner_max", info.size_axis.inner_max}}},
                     {"levels", levels},
                     {"precisions", precisions},
                     {"teaching_text", info.teaching_text}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  for (const Lesson* lesson : lessons()) {
    const LessonInfo& info = lesson->info();
    std::printf("%-20s %s   (%s)\n", info.id.c_str(), info.title.c_str(), info.formula.c_str());
    for (size_t i = 0; i < info.levels.size(); ++i) {
      std::string launches;
      for (const auto& k : info.levels[i].launches) launches += (launches.empty() ? "" : ", ") + k;
      std::printf("    level %zu  %-10s %zu launch%s: %s\n", i, info.levels[i].name.c_str(),
                  info.levels[i].launches.size(), info.levels[i].launches.size() == 1 ? "" : "es",
                  launches.c_str());
    }
  }
  return 0;
}

}  // namespace fl
