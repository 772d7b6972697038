// Exports of measurements for use outside Fusion Lab (issue 7, docs/EXPORT.md):
//   - a Chrome Trace Event JSON trace of the stored raw CUPTI records, which opens in
//     ui.perfetto.dev and chrome://tracing, optionally gzip-compressed;
//   - a CSV with one row per (lesson, size, level, launch), units in the column names.
// No UI here: the window's export buttons, the `export-trace` / `export-csv` subcommands and
// `bench --csv` all call these. Every write is atomic (temporary file, fsync, rename), so an
// interrupted export never leaves half a file under the final name.
#pragma once

#include <string>
#include <vector>

#include "app/measure/results.h"
#include "kernels/status.h"

namespace fl {

struct TraceOptions {
  bool gzip = false;  // gzip the JSON; a path ending in ".gz" gzips too
};

// Chrome Trace Event JSON (compact, one line) built from the stored raw CUPTI records
// (Measurement::records) of every measurement in `session`, in session order. Each measurement
// is rebased so they read left to right with a gap between them; kernels are complete events
// ("X") on a track per device/stream; counter tracks ("C") carry DRAM bytes and the speedup over
// level 0. A measurement without records (schema v1) gets slices from its median launch times,
// marked "synthesized": true. The layout is described in docs/EXPORT.md.
std::string chrome_trace_json(const Session& session);
Status export_trace(const Session& session, const std::string& path, TraceOptions options = {});

// Whether this build can write .gz traces (zlib found at configure time).
bool trace_gzip_available();

// The CSV header line (no newline) and the whole CSV: one row per (lesson, size, level, launch),
// in the order given. Columns and units are documented in docs/EXPORT.md and stay stable.
std::string measurements_csv_header();
std::string measurements_csv(const std::vector<Measurement>& measurements);
Status export_csv(const std::vector<Measurement>& measurements, const std::string& path);

// Gzip helpers, exposed for tests (and for callers that want the bytes rather than a file).
// Fail with one sentence when this build has no zlib.
Status gzip_compress(const std::string& data, std::string* out);
Status gzip_decompress(const std::string& data, std::string* out);

}  // namespace fl
