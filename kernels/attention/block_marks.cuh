// A block's phase marks (PhaseMarks, kernels/phases.cuh) kept in shared memory instead of
// registers, for the flash kernels: their threads need every register for S, P and O, and
// PhaseMarks' dozen registers a thread (the sink, the start stamps, one word a phase) made ptxas
// spill inside the tile loop. Only thread 0 keeps time, so only thread 0 touches the marks: it
// builds them, marks each phase's end, and writes the records at the end; for every other thread a
// mark is a branch.
//
//   __shared__ BlockMarks<kPhases> marks;
//   marks.begin(a.phases);   ...   marks.mark(kTiles);   ...   marks.end();
#pragma once

#include <new>

#include "kernels/phases.cuh"

namespace fl::attention {

template <int kPhases>
class BlockMarks {
 public:
  using Marks = PhaseMarks<kPhases>;
  __device__ void begin(const PhaseSink& sink) {
    if (threadIdx.x == 0) new (raw_) Marks(sink);
  }
  __device__ void mark(unsigned phase) {
    if (threadIdx.x == 0) marks()->mark(phase);
  }
  __device__ void end() {
    if (threadIdx.x == 0) marks()->~Marks();
  }

 private:
  __device__ Marks* marks() { return reinterpret_cast<Marks*>(raw_); }
  alignas(Marks) unsigned char raw_[sizeof(Marks)];
};

}  // namespace fl::attention
