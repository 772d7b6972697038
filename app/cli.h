// The headless subcommands of `fusionlab` (DESIGN.md §3, command line). Each returns the process
// exit code and prints a one-line reason on stderr when it fails.
#pragma once

#include <string>

namespace fl {

struct BenchOptions {
  std::string lessons = "gelu_scale";  // comma-separated ids
  std::string sizes = "1K,1M,16M";
  std::string levels = "all";          // "all" or comma-separated level numbers
  std::string precision = "fp32";
  std::string cache = "cold";
  int min_repetitions = 50;
  double seconds_per_level = 0.2;
  std::string out_session;  // --out
  std::string out_csv;      // --csv
};

int run_lessons(bool json);
int run_bench(const BenchOptions& options);

std::string app_version();

}  // namespace fl
