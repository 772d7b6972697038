// `bench` and `latency` in the replay-only build (FUSIONLAB_CUDA=OFF, docs/DEVELOPING.md), in
// place of cli_bench.cpp and cli_latency.cpp: both measure on a GPU, which a build without the
// CUDA toolkit cannot do. They say so in one line and exit 1.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/cli.h"

namespace fl {
namespace {

int no_cuda(const char* command) {
  std::fprintf(stderr,
               "fusionlab %s: this build has no CUDA (configured with FUSIONLAB_CUDA=OFF, it "
               "replays recordings only); `%s` measures on a GPU and needs a build with the CUDA "
               "toolkit\n",
               command, command);
  return 1;
}

}  // namespace

// The full build's hidden diagnostics are accepted and ignored, so a command line written for it
// gets the sentence above rather than a usage error.
void add_bench_measure_options(CLI::App* bench, BenchOptions*) {
  bench->allow_extras();
}

int run_bench(const BenchOptions&) {
  return no_cuda("bench");
}
int run_latency(const LatencyOptions& o) {
  if (!o.plot_csv.empty()) return plot_soak_csv(o);  // drawing a soak's CSV needs no GPU
  return no_cuda("latency");
}

}  // namespace fl
