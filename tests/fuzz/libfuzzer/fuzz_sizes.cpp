// libFuzzer target: the sizes people type. fl::parse_size_list (model/sizes.h): bench
// --sizes, latency --max-size, export --size and a script's `size`; and the window's size,
// fl::gui::parse_window_size (app/gui/settings.h): --size WxH and a script's `window-size`.
// Properties: never crashes; a refusal is one line; every accepted size is positive and at most
// 2^62 (no suffix wraps around), and format_size writes it so that it parses back to itself; an
// accepted window size is within kMinWindowWidth/Height..kMaxWindowSide.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "app/gui/settings.h"
#include "model/sizes.h"
#include "tests/fuzz/libfuzzer/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  int width = 0, height = 0;
  std::string why;
  if (fl::gui::parse_window_size(text, &width, &height, &why)) {
    fl::fuzz::expect(width >= fl::gui::kMinWindowWidth && width <= fl::gui::kMaxWindowSide &&
                         height >= fl::gui::kMinWindowHeight && height <= fl::gui::kMaxWindowSide,
                     "a window size in range", text);
  } else {
    fl::fuzz::expect_one_line(fl::Status::Error(why), 400);
  }
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
