// libFuzzer target: the size lists people type, fl::parse_size_list (app/measure/sizes.h):
// bench --sizes, latency --max-size, export --size and a script's `size`.
// Properties: never crashes; a refusal is one line; every accepted size is positive and at most
// 2^62 (no suffix wraps around), and format_size writes it so that it parses back to itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "app/measure/sizes.h"
#include "tests/fuzz/libfuzzer/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<int64_t> sizes;
  const fl::Status st = fl::parse_size_list(text, &sizes);
  fl::fuzz::expect_one_line(st, 400);
  if (!st.ok()) return 0;
  fl::fuzz::expect(!sizes.empty(), "an accepted list has sizes");
  for (int64_t n : sizes) {
    fl::fuzz::expect(n > 0 && n <= (int64_t(1) << 62), "a size is in 1..2^62", std::to_string(n));
    int64_t back = 0;
    const fl::Status again = fl::parse_size(fl::format_size(n), &back);
    fl::fuzz::expect(again.ok() && back == n, "format_size parses back", fl::format_size(n));
  }
  return 0;
}
