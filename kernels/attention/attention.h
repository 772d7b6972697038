// Lesson 9, attention (kernels/attention/attention.cu): what the tests need beyond the Lesson
// interface, which fixes H = 12 and B = 16384 / T: a workspace of any batch, head count, length
// and head size, whose launch(level, k) is the lesson's ladder.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/lesson.h"

namespace fl::attention {

constexpr int64_t kTokens = 16384;  // B T of a lesson run (B = 16384 / T sequences)

// Q, K, V, O of batch x heads x length x dim; dim from 1 to 128.
Status make_workspace(int64_t batch, int heads, int length, int dim, Precision p,
                      std::unique_ptr<Workspace>* out);

}  // namespace fl::attention
