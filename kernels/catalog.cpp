// The lesson catalog. Adding a lesson: write kernels/<id>.cu exposing <id>_lesson(), then add
// one declaration and one line below.
#include "kernels/catalog.h"

namespace fl {

const Lesson& relu_scale_lesson();
const Lesson& gelu_scale_lesson();
const Lesson& bias_gelu_lesson();
const Lesson& residual_layernorm_lesson();
const Lesson& scale_mask_softmax_lesson();
const Lesson& layernorm_linear_lesson();
const Lesson& linear_gelu_lesson();
const Lesson& ffn_lesson();

const std::vector<const Lesson*>& lessons() {
  static const std::vector<const Lesson*> all = {
      &relu_scale_lesson(),
      &gelu_scale_lesson(),
      &bias_gelu_lesson(),
      &residual_layernorm_lesson(),
      &scale_mask_softmax_lesson(),
      &layernorm_linear_lesson(),
      &linear_gelu_lesson(),
      &ffn_lesson(),
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
