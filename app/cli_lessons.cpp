// `fusionlab lessons [--json]`: the catalog, for people and for scripts.
#include <cstdio>
#include <string>

#include "app/cli.h"
#include "kernels/catalog.h"
#include "kernels/catalog_data.h"
#include "kernels/level_table.h"
#include "kernels/gpt2_decode/model.h"

namespace fl {

int run_lessons(bool json) {
  if (json) {
    // The catalog as data: what assets/lessons/catalog.json holds (kernels/catalog_data.h).
    std::string text;
    const Status st = catalog_to_json(lessons(), &text);
    if (!st.ok()) {
      std::fprintf(stderr, "fusionlab lessons: %s\n", st.message().c_str());
      return 1;
    }
    std::printf("%s\n", text.c_str());
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
      // A launch with several kernels: each, with where it runs and what it changes.
      for (const VariantInfo& v : info.levels[i].variants) {
        std::printf("        %s variant %-12s %s\n", v.launch.c_str(), v.name.c_str(),
                    variant_where(v, info.size_axis.unit, info.size_axis.inner_name).c_str());
        std::printf("            %s\n", v.what.c_str());
      }
    }
  }
  return 0;
}

int run_task_list(const TaskListOptions& options) {
  if (options.lesson != "gpt2_decode") {
    std::fprintf(stderr, "fusionlab lessons: only gpt2_decode has a task list (asked for '%s')\n",
                 options.lesson.c_str());
    return 2;
  }
  gpt2::TaskListShape shape;
  shape.blocks = options.blocks;
  shape.tokens = options.tokens;
  shape.cache = options.cache;
  std::printf("%s", gpt2::format_task_list(gpt2::build_decode_tasks(shape), shape).c_str());
  return 0;
}

}  // namespace fl
