// The soak's outputs (app/measure/soak.h): the samples' CSV and plot, for `latency --minutes`
// (cli_latency.cpp) and `latency --plot-csv` in both builds (the replay-only one too: plotting a
// window soak's CSV needs no GPU).
#include <cstdio>
#include <string>
#include <vector>

#include "app/cli.h"
#include "model/file_io.h"
#include "app/measure/soak.h"

namespace fl {
namespace {

int soak_usage(const std::string& message) {
  std::fprintf(stderr, "fusionlab latency: %s\n", message.c_str());
  return kExitUsage;
}
int soak_fail(const std::string& message) {
  std::fprintf(stderr, "fusionlab latency: %s\n", message.c_str());
  return kExitFailure;
}

}  // namespace

int write_soak_outputs(const LatencyOptions& o, const std::vector<SoakSample>& samples,
                       const std::string& title) {
  if (!o.soak_csv.empty()) {
    if (Status st = write_file_atomically(o.soak_csv, soak_csv(samples)); !st.ok())
      return soak_fail(st.message());
  }
  if (!o.soak_svg.empty()) {
    if (Status st = write_file_atomically(o.soak_svg, soak_svg(samples, title)); !st.ok())
      return soak_fail(st.message());
  }
  return 0;
}

// --plot-csv: a soak CSV (the window soak's, or an earlier run's) drawn into --soak-svg.
int plot_soak_csv(const LatencyOptions& o) {
  if (o.soak_svg.empty()) return soak_usage("--plot-csv needs --soak-svg FILE.svg");
  if (Status st = check_output_file(o.soak_svg, true); !st.ok()) return soak_fail(st.message());
  std::string text;
  if (Status st = read_file_checked(o.plot_csv, kMaxScriptFileBytes, "soak CSV", &text); !st.ok())
    return soak_fail(st.message());
  std::vector<SoakSample> samples;
  if (Status st = parse_soak_csv(text, &samples); !st.ok())
    return soak_fail(shorten_for_message(o.plot_csv, kShownPathChars) + ": " + st.message());
  std::printf("%s", soak_report(summarize_soak(samples)).c_str());
  LatencyOptions svg_only = o;
  svg_only.soak_csv.clear();
  return write_soak_outputs(svg_only, samples, "Soak: " + shorten_for_message(o.plot_csv, 60));
}

}  // namespace fl
