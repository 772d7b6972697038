// The FFN wgmma kernel's tile list (kernels/ffn/ffn_wgmma.cu), in plain C++ so that a CPU test can
// check what the kernel's correctness rests on: every tile once, and every tile's dependencies
// earlier in the list (tests/unit/ffn_schedule_test.cpp).
//
// Row block rb (128 tokens) has `up` tiles (h = GELU(x W1 + b1), 256 hidden units each) and
// `down` tiles (y = h W2 + b2, 256 columns each). The list is a sequence of steps: step s holds
// the up tiles of row block s (s < rows), then the down tiles of row block s - lag (when that is
// a row block). A down tile of rb needs all up tiles of rb; an up tile of rb needs, when
// rb >= ring, all down tiles of rb - ring (the last readers of its ring slot): lag < ring keeps
// both earlier in the list.
#pragma once

#if defined(__CUDACC__)
#define FL_HOST_DEVICE __host__ __device__
#else
#define FL_HOST_DEVICE
#endif

namespace fl::ffn_schedule {

struct Tile {
  bool down;
  int rb, nt;  // row block, column tile
};

FL_HOST_DEVICE inline int min_int(int a, int b) {
  return a < b ? a : b;
}
FL_HOST_DEVICE inline int max_int(int a, int b) {
  return a > b ? a : b;
}

// Tile p of the list; rows * (up + down) tiles in all.
FL_HOST_DEVICE inline Tile tile_at(int p, int rows, int up, int down, int lag) {
  const int only_up = min_int(lag, rows);  // steps with up tiles only
  if (p < only_up * up) return {false, p / up, p % up};
  p -= only_up * up;
  const int both = max_int(rows - lag, 0);  // steps with up and down tiles
  if (p < both * (up + down)) {
    const int s = lag + p / (up + down), q = p % (up + down);
    return q < up ? Tile{false, s, q} : Tile{true, s - lag, q - up};
  }
  p -= both * (up + down);
  return {true, both + p / down, p % down};  // steps with down tiles only
}

}  // namespace fl::ffn_schedule
