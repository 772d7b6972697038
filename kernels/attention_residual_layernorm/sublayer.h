// Lesson 10, attention_residual_layernorm (kernels/attention_residual_layernorm/sublayer.cu):
// what the tests need beyond the Lesson interface, which fixes B = 16384 / T sequences: a
// workspace of any batch, length and hidden size (H = 12 heads of d = C / 12), whose
// launch(level, k) is the lesson's ladder.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/lesson.h"

namespace fl::sublayer {

constexpr int kHeads = 12;

// x, h, y of (batch x length) tokens x C; C a multiple of 12 from 12 to 1536 (d <= 128).
Status make_workspace(int64_t batch, int length, int64_t c, Precision p,
                      std::unique_ptr<Workspace>* out);

}  // namespace fl::sublayer
