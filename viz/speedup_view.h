// The live speedup-vs-size plot: fused over unfused chain time per tensor size, beside the
// speedup that the byte counts allow (the byte-ratio limit) and, where a lesson has one, a
// published reference series. Builds plot data from the results model; draws with viz/plot.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/peers.h"
#include "model/results.h"
#include "kernels/lesson.h"
#include "viz/palette.h"
#include "viz/plot.h"

namespace fl::viz {

struct SpeedupPoint {
  int64_t size = 0;
  double speedup = 0;
  // The spread from the repetitions: level 0's p20 over the level's p80 .. p80 over p20.
  double lo = 0, hi = 0;
  bool disturbed = false;  // either level was measured on a shared or throttled GPU
};

// One point per size of `lesson` in `precision` and `cache` mode: the speedup (fl::speedup, on
// median chain times) of fusion level `level` over level 0 (level < 0: the highest level
// measured). A size without both levels, or whose check failed at either, gives no point: no
// speedup for a wrong kernel. Sorted by size.
std::vector<SpeedupPoint> speedup_series(const std::vector<Measurement>& measurements,
                                         const std::string& lesson, Precision precision,
                                         CacheMode cache, int level = -1);

// Adds the levels of one finished request to `history`, replacing every measurement of the
// same (lesson, size, precision, cache): a new run at a size replaces the old point there.
void merge_measurements(std::vector<Measurement>* history, const std::vector<Measurement>& fresh);

// The speedup the textbook byte counts allow: bytes of level 0 / bytes of `level` (level < 0:
// the top level). 0 when the lesson has a single level or moves no bytes.
double byte_ratio_limit(const Lesson& lesson, int64_t size, Precision precision, int level = -1);

// Where the curve crosses 1x, as the learner reads it: "crosses 1x between 16 and 64 tokens"
// for the first pair of neighbouring points on either side of 1 (the fused level stops, or
// starts, paying off there); empty when every point is on one side.
std::string crossover_text(const std::vector<SpeedupPoint>& points, const std::string& unit);

// A second recording's curve drawn over this one's (File > Compare with..., a script's `compare`):
// another GPU, another day, another precision or cache mode. Labelled with its GPU and date.
struct SpeedupOverlay {
  std::string label;  // e.g. "compared: NVIDIA H200, 2026-11-22 (fp32, warm L2)"
  std::vector<SpeedupPoint> points;
};

// PyTorch's times for the same formula (a peer file, scripts/peers.py) as speedups over OUR
// level 0 at the sizes both have (our level 0 correct there, the peer's check passed): one
// series per peer, torch.compile first, labelled "<peer label><suffix>". Peers are measured with
// a cold L2 only: in warm mode, none.
std::vector<SpeedupOverlay> peer_speedup_series(const std::vector<Measurement>& measurements,
                                                const PeerFile& peers, const std::string& lesson,
                                                Precision precision, CacheMode cache,
                                                const std::string& label_suffix = "");

// The compared recording's colour (palette.h's role), drawn dashed.
constexpr ImU32 kCompareColor = palette::compared;

struct SpeedupView {
  std::string size_unit = "elements";  // the lesson's size axis unit
  int64_t size_min = 1 << 10, size_max = int64_t(1) << 28;
  std::string measured_label = "measured";
  std::string measured_legend;   // the legend's shorter text (empty: measured_label); the hover
                                 // read-out keeps measured_label
  int level = 1, top_level = 1;  // the level the measured series shows: its colour
  std::vector<SpeedupPoint> measured;
  std::string reference_label;  // e.g. "tutorial, V100 (published)"; empty: no such series
  std::vector<SpeedupPoint> reference;
  double byte_ratio_limit = 0;           // 0: no reference line
  int64_t current_size = 0;              // 0: no marker
  std::string note;                      // e.g. why nothing is measured; drawn in the plot
  std::vector<SpeedupOverlay> overlays;  // compared recordings: dashed, under the measured curve
  std::vector<SpeedupOverlay> peers;     // PyTorch peers: grey reference series (palette::peers)
  // The portable kernels (model/portable.h): the same level as run by an older GPU's choice of
  // kernels, measured on the recording's GPU; drawn in the level's colour, dashed, hollow
  // markers. Empty points: none. `legend` is the legend's shorter text.
  SpeedupOverlay portable;
  std::string portable_legend;
};

// The plot spec for `view` (testable without a window).
PlotSpec speedup_plot_spec(const SpeedupView& view);

// Draws the view at the cursor; `size` components <= 0 fill the available space.
PlotHover draw_speedup_view(const char* id, const SpeedupView& view, ImVec2 size);

}  // namespace fl::viz
