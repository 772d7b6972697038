// Every cache and history the long-running app keeps, with its cap ("Bounded memory";
// the list with the reasons is in docs/RELIABILITY.md). A window may stay open for days while a
// learner drags sliders: every size dragged through is a new key, so nothing keyed by size may
// grow without a bound. Plain C++ (no CUDA), so the replay-only build and CPU tests use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "model/results.h"

namespace fl {

// Cap: copy-bandwidth references the live backend keeps (one per byte count and cache mode,
// "% of copy"). A drag measures about two new byte counts per result, so without a cap this list
// (and its copy in every EngineStatus) grew ~270 bytes per result (`fusionlab latency` on an
// H100, 2026-11-22). A `bench` grid needs a few hundred; past the cap the oldest reference is
// forgotten (measured again if asked for).
constexpr size_t kMaxCopyReferences = 2048;

// Cap: results the engine holds for poll() (Engine::done_). The window and `latency` poll every
// frame, so this is only reached by a caller that stops polling; then the oldest are dropped.
constexpr size_t kMaxUnpolledResults = 1024;

// Cap: measurements the window keeps (Lab::history_: the speedup and bandwidth curves, Save
// session, Export CSV). One per (lesson, size, row length, level, precision, cache); a drag adds
// one per level per size. Past the cap the oldest measured are dropped first (a sweep of every
// lesson in both precisions and cache modes is ~1000).
constexpr size_t kMaxHistoryMeasurements = 4096;

// Cap: frame times the window keeps for --frame-stats (8 bytes each; about 18 minutes at 60
// frames per second). Past it the older half is dropped.
constexpr size_t kMaxFrameSamples = size_t(1) << 16;

// Cap: CUPTI kernel records waiting in the tracer to be taken (a measurement takes its own
// after every batch; records of kernels nobody takes, such as the profiler's replays, would
// otherwise wait for the next timing phase). Past it the older half is dropped.
constexpr size_t kMaxHeldKernelRecords = size_t(1) << 16;

// Cap: the crash journal's records waiting to be written (model/journal.h): written at most this
// many seconds after they arrive, so a killed window loses at most the last second or so.
constexpr double kJournalFlushSeconds = 1.0;

// Cap: crash journals left behind by windows that crashed or were killed (model/journal.h): the
// newest kMaxOrphanedJournals are kept, none older than kJournalMaxAgeDays; the rest are removed
// when a window starts.
constexpr size_t kMaxOrphanedJournals = 8;
constexpr int kJournalMaxAgeDays = 14;

// Cap: processes the GPU watch lists at once (app/measure/gpu_watch.cpp); a GPU with more is
// counted as far as this.
constexpr unsigned kMaxWatchedProcesses = 4096;

// The live backend's copy-bandwidth references: a map from (bytes per side, cache mode) to GB/s
// for lookups, the sorted list DeviceFacts::copy_bandwidth that sessions record, and the order
// they were measured in, so the oldest is forgotten first once `cap` are held.
class CopyReferenceCache {
 public:
  explicit CopyReferenceCache(size_t cap = kMaxCopyReferences) : cap_(cap < 1 ? 1 : cap) {}

  // The cached GB/s for `half` bytes per side in `cache`, or false.
  bool find(int64_t half, CacheMode cache, double* gbps) const;
  // Remembers a measurement and inserts it, sorted, into `list` (the device facts' list of
  // references, bytes = read + written = 2 * half); forgets the oldest past the cap.
  void add(int64_t half, CacheMode cache, double gbps, std::vector<CopyBandwidth>* list);
  size_t size() const { return gbps_.size(); }
  size_t cap() const { return cap_; }

 private:
  using Key = std::pair<int64_t, int>;
  size_t cap_;
  std::map<Key, double> gbps_;
  std::deque<Key> order_;  // oldest first
};

// Drops the oldest entries of `history` (oldest first, as merge_measurements appends) until at
// most `cap` remain. Returns how many were dropped.
size_t trim_oldest(std::vector<Measurement>* history, size_t cap);

// Drops the older half of `samples` once it holds `cap` (a running window of recent samples).
template <typename T>
void keep_recent_half(std::vector<T>* samples, size_t cap) {
  if (samples->size() < cap) return;
  samples->erase(samples->begin(), samples->begin() + static_cast<std::ptrdiff_t>(cap / 2));
}

}  // namespace fl
