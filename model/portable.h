// The portable kernels: what a GPU older than the one measuring would run. The level table
// chooses a launch's kernel variant by GPU (kernels/level_table.h), so an H100 never runs the
// kernels that an RTX 30/40-series card, an A100 or a V100 runs. `bench --choose-as 8.6` makes
// the table choose as such a GPU would (its compute capability, no sm_90a kernels) while the
// kernels still run here; its measurements carry `chosen_as_cc`. A recording keeps them in its
// folder's portable/ subfolder, and the speedup plot draws them as a labelled series ("portable
// kernels, measured on an H100"), so a learner without Hopper sees what their GPU will run.
#pragma once

#include <string>
#include <vector>

#include "kernels/status.h"
#include "model/results.h"

namespace fl {

// The oldest compute capability the kernels are built for (x 10): Volta.
constexpr int kOldestChooseAsCc = 70;

// Reads a compute capability as `bench --choose-as` takes it: "8.6", "86" or "sm_86" give 86.
// Refuses anything else, or one older than Volta, with one line.
Status parse_choose_as(const std::string& text, int* cc);

// "" when kernels may be chosen as on compute capability `cc` (x 10) on a GPU of `device_cc`:
// only as on the same or an older GPU (the kernels still run on this one). Else one line.
std::string choose_as_refusal(int cc, int device_cc);

// "8.6" for 86.
std::string cc_words(int cc);

// A recording's portable series: its measurements (every one with chosen_as_cc > 0), the
// GPU that measured them and the compute capability they were chosen as.
struct PortableSeries {
  std::string gpu;   // the measuring GPU ("NVIDIA H100 80GB HBM3")
  std::string date;  // the first file's created_utc date
  int chosen_as_cc = 0;
  std::vector<Measurement> measurements;

  bool empty() const { return measurements.empty(); }
  // "portable kernels (as on compute capability 8.6), measured on an NVIDIA H100 80GB HBM3"
  std::string label() const;
  // Whether it holds `lesson` in `precision` and `cache`.
  bool has(const std::string& lesson, Precision precision, CacheMode cache) const;
};

// Loads the portable/ subfolder of the recording folder `recording` (every *.json session file
// in it, name order). A recording without one gives an empty series and Ok. A file that does not
// load, one whose measurements were not chosen as an older GPU, or files of several GPUs or
// compute capabilities, are refused with one line naming the file.
Status load_portable_series(const std::string& recording, PortableSeries* out);

// The newest shipped recording folder under `assets`/recordings that has a portable/ subfolder;
// "" when none has.
std::string find_shipped_portable_recording(const std::string& assets);

}  // namespace fl
