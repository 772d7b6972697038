// The lesson catalog: every lesson, in curriculum order (DESIGN.md §2).
#pragma once

#include <string>
#include <vector>

#include "kernels/lesson.h"

namespace fl {

const std::vector<const Lesson*>& lessons();
const Lesson* find_lesson(const std::string& id);  // nullptr when unknown

}  // namespace fl
