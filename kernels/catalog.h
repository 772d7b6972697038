// The lesson catalog: every lesson, in curriculum order (DESIGN.md §2).
#pragma once

#include <string>
#include <vector>

#include "kernels/lesson.h"

namespace fl {

const std::vector<const Lesson*>& lessons();
const Lesson* find_lesson(const std::string& id);  // nullptr when unknown

}  // namespace fl

// Defines `const Lesson& <id>_lesson()`, the accessor that the lesson's line in catalog.cpp
// (FL_CURRICULUM) declares and lists: it returns the one instance of the lesson class. The last
// line of every lesson file, in namespace fl:
//   FL_DEFINE_LESSON(residual_layernorm, ResidualLayerNorm);
// (The class may be a template-id with commas: everything after the id is the class.)
#define FL_DEFINE_LESSON(id, ...)    \
  const Lesson& id##_lesson() {      \
    static const __VA_ARGS__ lesson; \
    return lesson;                   \
  }                                  \
  static_assert(true, "FL_DEFINE_LESSON takes a semicolon")
