// Achieved bandwidth vs size: per fusion level, the GB/s each level reached on its textbook
// bytes (median chain time), against the copy bandwidth measured for the same bytes in the same
// run. Memory-bound kernels should sit near the copy curve once tensors leave L2.
#pragma once

#include <string>
#include <vector>

#include "model/results.h"
#include "model/peers.h"
#include "viz/plot.h"

namespace fl::viz {

// One series per level present (label "level N name"), then the copy reference ("copy, same
// bytes"), from the measurements of `lesson` in `precision` / `cache`. Wrong kernels give no point.
std::vector<PlotSeries> bandwidth_series(const std::vector<Measurement>& history,
                                         const std::string& lesson, Precision precision,
                                         CacheMode cache);

// A compared recording's levels for the same plot: each level's series as bandwidth_series()
// makes it, without the copy reference, in a lighter shade of its level's colour, dashed, the
// label followed by ", " + `source` (e.g. "NVIDIA H200, 2026-11-22 (fp32, warm L2)") for the
// hover read-out. The legend gets one row for them all, the first's: "dashed: " + `source`
// (each level's lighter shade matches its own solid series).
std::vector<PlotSeries> bandwidth_overlay_series(const std::vector<Measurement>& history,
                                                 const std::string& lesson, Precision precision,
                                                 CacheMode cache, const std::string& source);

// PyTorch peers (a peer file, scripts/peers.py) for the same plot: per peer, the top level's
// textbook bytes at each size divided by the peer's median there ("what PyTorch achieves on the
// bytes the fused kernel must move"), grey with hollow markers (palette::peers), torch.compile
// first, labelled "<peer label><suffix>". Cold L2 only (warm: none); sizes we measured only.
std::vector<PlotSeries> bandwidth_peer_series(const std::vector<Measurement>& history,
                                              const PeerFile& peers, const std::string& lesson,
                                              Precision precision, CacheMode cache,
                                              const std::string& suffix = "");

PlotSpec bandwidth_plot_spec(const std::vector<PlotSeries>& series, const std::string& size_unit,
                             int64_t size_min, int64_t size_max);

}  // namespace fl::viz
