// How the weight-streaming GEMM (kernels/gemm_core/weight_stream.cuh) cuts a product among the
// blocks of its grid, in plain C++ so that a CPU test can check what the kernels' correctness
// rests on (tests/unit/stream_partition_test.cpp): every unit once, tiles that never cross a
// key, and for every key cut between blocks, exactly the blocks first..last taking part (the
// last of them to arrive finishes the key) with partial-sum slots (key + block) of their own.
//
// A unit is kUnitN columns x kUnitK rows of B. Units are numbered key-major: key = chunk x
// column tile (a chunk: chunk_rows rows of A), then the blocks of K. The first W = min(G, U)
// blocks take units [U b / W, U (b + 1) / W), at least one each (so every block between a key's
// first and last has units of it); the rest take none. The counts are made on the host (plan):
// the device divides only when a block starts a product and once per cut key, in 32 bits.
#pragma once

#if defined(__CUDACC__)
#define FL_STREAM_HD __host__ __device__
#else
#define FL_STREAM_HD
#endif

namespace fl::stream {

struct Partition {
  int col_tiles = 0, kblocks = 0, keys = 0, units = 0, workers = 0, chunk_rows = 0;

  // m x k times k x n in chunks of chunk_rows rows and units of unit_n x unit_k, over `blocks`.
  static Partition plan(int m, int n, int k, int chunk_rows, int unit_n, int unit_k, int blocks) {
    Partition p;
    p.chunk_rows = chunk_rows;
    p.col_tiles = (n + unit_n - 1) / unit_n;
    p.kblocks = (k + unit_k - 1) / unit_k;
    p.keys = (m + chunk_rows - 1) / chunk_rows * p.col_tiles;
    p.units = p.keys * p.kblocks;
    p.workers = p.units < blocks ? p.units : blocks;
    return p;
  }
  FL_STREAM_HD int first_unit(int block) const {
    return block >= workers ? units : int((long long)units * block / workers);
  }
  // The block whose run holds unit u.
  FL_STREAM_HD int block_of(int u) const { return int((((long long)u + 1) * workers - 1) / units); }
};

// A run of up to tile_units units of one key: the ring's tile.
struct Tile {
  int key = -1, kb = 0;  // key < 0: no tile
  int row0 = 0, n0 = 0;  // its chunk's first row of A, its first column of B
  int count = 0;
  bool ends_segment = false;
  FL_STREAM_HD bool valid() const { return key >= 0; }
};

// Walks a block's units tile by tile, without dividing after begin().
struct TileWalk {
  int u = 0, end = 0, key = 0, key_end = 0, ct = 0, row0 = 0;
  FL_STREAM_HD void begin(const Partition& p, int block) {
    u = p.first_unit(block);
    end = p.first_unit(block + 1);
    if (u >= end) return;
    key = u / p.kblocks;
    key_end = (key + 1) * p.kblocks;
    ct = key % p.col_tiles;
    row0 = key / p.col_tiles * p.chunk_rows;
  }
  FL_STREAM_HD Tile next(const Partition& p, int unit_n, int tile_units) {
    Tile t;
    if (u >= end) return t;
    const int seg_end = end < key_end ? end : key_end;
    t.key = key;
    t.kb = u - key * p.kblocks;
    t.row0 = row0;
    t.n0 = ct * unit_n;
    t.count = seg_end - u < tile_units ? seg_end - u : tile_units;
    u += t.count;
    t.ends_segment = u == seg_end;
    if (u == key_end) {  // on to the next key
      ++key;
      key_end += p.kblocks;
      if (++ct == p.col_tiles) ct = 0, row0 += p.chunk_rows;
    }
    return t;
  }
};

}  // namespace fl::stream
