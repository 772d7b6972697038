// libFuzzer target: the level lists people type, fl::parse_level_list (model/sizes.h):
// bench --levels.
// Properties: never crashes; a refusal is one line; "all" and only "all" gives no levels;
// every accepted level is in 0..kMaxLevelNumber (no number wraps around into range).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/sizes.h"
#include "tests/fuzz/libfuzzer/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<int> levels;
  const fl::Status st = fl::parse_level_list(text, &levels);
  fl::fuzz::expect_one_line(st, 400);
  if (!st.ok()) return 0;
  fl::fuzz::expect(levels.empty() == (text == "all"), "only 'all' means every level", text);
  for (int level : levels) {
    fl::fuzz::expect(level >= 0 && level <= fl::kMaxLevelNumber, "a level is in range",
                     std::to_string(level));
  }
  return 0;
}
