// The lesson catalog. Adding a lesson: write kernels/<id>.cu exposing <id>_lesson(), then add
// one declaration and one line below.
#include "kernels/catalog.h"

namespace fl {

const Lesson& gelu_scale_lesson();

const std::vector<const Lesson*>& lessons() {
  static const std::vector<const Lesson*> all = {
      &gelu_scale_lesson(),
  };
  return all;
}

const Lesson* find_lesson(const std::string& id) {
  for (const Lesson* lesson : lessons()) {
    if (lesson->info().id == id) return lesson;
  }
  return nullptr;
}

}  // namespace fl
