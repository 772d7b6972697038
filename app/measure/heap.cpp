#include "app/measure/heap.h"

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace fl {

HeapStats heap_stats() {
  HeapStats s;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 m = mallinfo2();
  s.in_use_bytes = static_cast<int64_t>(m.uordblks + m.hblkhd);
  s.free_bytes = static_cast<int64_t>(m.fordblks);
#endif
  return s;
}

bool release_free_heap_if_due(double min_interval_s) {
#if defined(__GLIBC__)
  static const bool off = [] {
    const char* env = std::getenv("FL_MALLOC_TRIM");
    return env != nullptr && std::strcmp(env, "off") == 0;
  }();
  if (off) return false;
  using Clock = std::chrono::steady_clock;
  static std::atomic<int64_t> last_ns{0};
  const int64_t now = Clock::now().time_since_epoch().count();
  int64_t last = last_ns.load();
  const int64_t interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(min_interval_s))
          .count();
  if (last != 0 && now - last < interval) return false;
  if (!last_ns.compare_exchange_strong(last, now)) return false;
  malloc_trim(0);
  return true;
#else
  (void)min_interval_s;
  return false;
#endif
}

ResidentParts resident_parts() {
  ResidentParts p;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    long long kib = -1;
    if (line.rfind("RssAnon:", 0) == 0 && std::sscanf(line.c_str() + 8, "%lld", &kib) == 1)
      p.anon_kib = kib;
    if (line.rfind("RssFile:", 0) == 0 && std::sscanf(line.c_str() + 8, "%lld", &kib) == 1)
      p.file_kib = kib;
  }
  return p;
}

}  // namespace fl
