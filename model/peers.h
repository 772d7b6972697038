// PyTorch peers: what PyTorch (eager, torch.compile, the eager ops in a CUDA graph, SDPA) takes
// for a lesson's formula on a GPU, measured by scripts/peers.py and shown beside our levels as
// reference series. The file format is documented in docs/SESSION_FORMAT.md ("Peer files");
// the loader refuses, with one line naming the file and the problem, anything it cannot use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/results.h"
#include "kernels/status.h"

namespace fl {

struct PeerPoint {
  int64_t size = 0;   // along the lesson's size axis, as in session files
  int64_t inner = 0;  // row length, 0 for elementwise lessons
  double median_us = 0, p20_us = 0, p80_us = 0;
  int count = 0;
  double rel_l2_error = 0;
  bool passed = false;  // the peer's output matched an fp64 evaluation of the formula
};

struct PeerSeries {
  std::string lesson;
  Precision precision = Precision::fp32;
  std::string peer;   // "eager", "compile", "cuda_graph", "sdpa", "sdpa_flash", "sdpa_efficient"
  std::string label;  // "torch.compile"
  std::vector<PeerPoint> points;  // sorted by size
};

struct PeerFile {
  static constexpr int kSchemaVersion = 1;
  std::string created_utc;
  std::string device_name;
  std::string compute_capability;
  std::string driver;
  double copy_gbps = 0;
  std::string torch_version, triton_version, cuda_version;
  std::string timing;  // "cupti_activity"
  std::vector<PeerSeries> series;

  // "NVIDIA H100 80GB HBM3, 2026-11-23": where and when the peers were measured.
  std::string recorded_on() const;
  // The series of (lesson, precision), in file order.
  std::vector<const PeerSeries*> find(const std::string& lesson, Precision precision) const;
};

// Files larger than this are refused before they are read.
constexpr int64_t kMaxPeerFileBytes = int64_t(64) << 20;

Status peers_from_json(const std::string& text, PeerFile* out);
Status load_peer_file(const std::string& path, PeerFile* out);

// `series` with torch.compile first (the peer to beat, drawn lightest), the rest in file order.
std::vector<const PeerSeries*> compile_first(std::vector<const PeerSeries*> series);

// A peer's median at `size`, or 0 when the series has no point there (or it failed its check).
double peer_median_at(const PeerSeries& series, int64_t size);

// The peer file shipped beside the recordings under `assets`/recordings/: the one whose GPU is
// `gpu_name` when there is one, else the newest (folders sort by date). Empty when none.
std::string find_shipped_peer_file(const std::string& assets, const std::string& gpu_name);

}  // namespace fl
