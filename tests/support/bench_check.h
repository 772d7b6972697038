// The GPU benchmarks' (tests/gpu/*_bench.cu) way out of a failed step: one line on stderr that
// names the tool and the failure, then exit status 1.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "kernels/cuda_check.h"

#define FL_BENCH_CHECK(tool, expr)                                  \
  do {                                                              \
    const fl::Status s_ = (expr);                                   \
    if (!s_.ok()) {                                                 \
      std::fprintf(stderr, "%s: %s\n", tool, s_.message().c_str()); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)
