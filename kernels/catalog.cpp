// The lesson catalog: the curriculum, in order. Adding a lesson is one line in FL_CURRICULUM
// below (docs/ARCHITECTURE.md, "Adding a lesson"): kernels/<id>.cu defines <id>_lesson() with
// FL_DEFINE_LESSON (catalog.h), and the line both declares it and puts the lesson in its place.
#include "kernels/catalog.h"

// X(id) for every lesson, in curriculum order (DESIGN.md §2).
#define FL_CURRICULUM(X)          \
  X(relu_scale)                   \
  X(gelu_scale)                   \
  X(bias_gelu)                    \
  X(residual_layernorm)           \
  X(scale_mask_softmax)           \
  X(layernorm_linear)             \
  X(linear_gelu)                  \
  X(ffn)                          \
  X(attention)                    \
  X(attention_residual_layernorm) \
  X(gpt2_decode)

namespace fl {

#define FL_DECLARE_LESSON(id) const Lesson& id##_lesson();
FL_CURRICULUM(FL_DECLARE_LESSON)
#undef FL_DECLARE_LESSON

const std::vector<const Lesson*>& lessons() {
#define FL_LIST_LESSON(id) &id##_lesson(),
  static const std::vector<const Lesson*> all = {FL_CURRICULUM(FL_LIST_LESSON)};
#undef FL_LIST_LESSON
  return all;
}

}  // namespace fl
