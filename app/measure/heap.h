// The process's heap as malloc sees it, and giving its free pages back (docs/RELIABILITY.md,
// "Bounded memory"). Plain C++ (glibc's mallinfo2 and malloc_trim where the C library has them).
#pragma once

#include <cstdint>

namespace fl {

struct HeapStats {
  int64_t in_use_bytes = -1;  // allocated and not freed (mallinfo2: uordblks + hblkhd)
  int64_t free_bytes = -1;    // held by malloc but free (fordblks): what a trim can give back
};
// -1s where the C library cannot say.
HeapStats heap_stats();

// malloc_trim(0) at most every `min_interval_s` seconds: glibc keeps freed memory of the worker
// threads' arenas mapped, so a long run's resident memory climbs over memory the heap no longer
// uses. The engine calls it when a request is answered. FL_MALLOC_TRIM=off turns it off (to
// measure what it changes). Returns whether it trimmed.
bool release_free_heap_if_due(double min_interval_s = 5);

// What /proc/self/status says: resident anonymous memory and resident file-backed memory (the
// mapped libraries' pages: cuBLASLt's kernels are read from its file), KiB; -1 when unknown.
struct ResidentParts {
  int64_t anon_kib = -1, file_kib = -1;
};
ResidentParts resident_parts();

}  // namespace fl
