// Exports of measurements for use outside Fusion Lab (docs/EXPORT.md):
//   - a Chrome Trace Event JSON trace of the stored raw CUPTI records, which opens in
//     ui.perfetto.dev and chrome://tracing, optionally gzip-compressed;
//   - a CSV with one row per (lesson, size, level, launch), units in the column names.
// No UI here: the window's export buttons, the `export-trace` / `export-csv` subcommands and
// `bench --csv` all call these. Every write goes through the one atomic writer (file_io.h), so an
// interrupted export never leaves half a file under the final name.
#pragma once

#include <string>
#include <vector>

#include "model/file_io.h"
#include "model/peers.h"
#include "model/results.h"
#include "kernels/status.h"

namespace fl {

struct TraceOptions {
  bool gzip = false;                // gzip the JSON; a path ending in ".gz" gzips too
  WriteOptions write;               // replace an existing file or not (the CLI's --force)
  const PeerFile* peers = nullptr;  // PyTorch peers for otherData (see chrome_trace_json)
};

// Chrome Trace Event JSON (compact, one line) built from the stored raw CUPTI records
// (Measurement::records) of every measurement in `session`. One process per measured run (lesson,
// size, row length, precision, cache), one thread per fusion level; a measurement is a slice on
// its level's thread with its kernels nested in it, named by the operation ("gelu", "scale",
// "fused gelu·scale") with the kernel's full name, launch configuration and bytes in args; each
// level's DRAM bytes are a counter track ("C") of its run. Every level of a run starts at 0, so the
// levels line up. A measurement without records (schema v1) gets slices from its median launch
// times, marked "synthesized": true. The layout is described in docs/EXPORT.md.
// With `peers`, otherData gains "pytorch_peers": the peer file's GPU and date and, for each
// lesson and precision the session holds, every peer's median per size (they have no kernel
// records of ours, so no slices).
std::string chrome_trace_json(const Session& session, const PeerFile* peers = nullptr);
// The trace's slice name for a launch's operation (LaunchTraffic::kernel): "gelu" stays "gelu",
// "gelu_scale_fused" becomes "fused gelu·scale".
std::string trace_op_name(const std::string& textbook_kernel);
// The trace as bytes (gzipped when asked), for a file or standard output.
Status trace_bytes(const Session& session, bool gzip, std::string* out,
                   const PeerFile* peers = nullptr);
Status export_trace(const Session& session, const std::string& path, TraceOptions options = {});

// Whether this build can write .gz traces (zlib found at configure time).
bool trace_gzip_available();

// The CSV header line (no newline) and the whole CSV: one row per (lesson, size, level, launch)
// of `session`, in its order, with the session's GPU, CUDA driver and date on every row. Numbers
// are rounded to what was measured; text cells a spreadsheet would run as a formula start with
// an apostrophe. Columns and units are documented in docs/EXPORT.md; new ones go at the end.
// With `peers` (a PyTorch peer file, model/peers.h), rows for the peers follow, one per
// (series, size) of each lesson and precision the session has: level "peer", level_name the
// peer's label, the chain columns its median/p20/p80, speedup_vs_level0 ours at that size over
// it, and the peer file's GPU, driver and date (docs/EXPORT.md).
std::string measurements_csv_header();
std::string measurements_csv(const Session& session, const PeerFile* peers = nullptr);
Status export_csv(const Session& session, const std::string& path, const WriteOptions& options = {},
                  const PeerFile* peers = nullptr);

// Gzip helpers, exposed for tests (and for callers that want the bytes rather than a file).
// Fail with one sentence when this build has no zlib.
Status gzip_compress(const std::string& data, std::string* out);
Status gzip_decompress(const std::string& data, std::string* out);

}  // namespace fl
