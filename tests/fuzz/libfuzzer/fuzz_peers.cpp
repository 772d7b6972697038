// libFuzzer target: the peer file loader, fl::peers_from_json (model/peers.h), which reads
// scripts/peers.py's output for --peers and the shipped peers.json.
// Properties: never crashes; a refusal is one line; an accepted file's series have their points
// sorted by size with sane numbers, and the lookups the plots make on them answer.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/peers.h"
#include "tests/fuzz/libfuzzer/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fl::PeerFile peers;
  const fl::Status st = fl::peers_from_json(text, &peers);
  fl::fuzz::expect_one_line(st);
  if (!st.ok()) return 0;
  (void)peers.recorded_on();
  for (const fl::PeerSeries& s : peers.series) {
    int64_t previous = 0;
    for (const fl::PeerPoint& p : s.points) {
      fl::fuzz::expect(p.size > 0 && p.size >= previous, "points sorted by positive size");
      fl::fuzz::expect(std::isfinite(p.median_us) && p.median_us >= 0, "a finite median");
      previous = p.size;
      (void)fl::peer_median_at(s, p.size);
    }
    (void)fl::compile_first(peers.find(s.lesson, s.precision));
  }
  return 0;
}
