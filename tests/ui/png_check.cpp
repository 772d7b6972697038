// Checks a screenshot by content, not by eye: it exists, has the expected size, and shows a real
// frame (many colours; the text regions are not uniform).
//
// usage: fusionlab_png_check FILE.png WIDTH HEIGHT [--measured]
//   --measured: the measurement panel (bottom right) must show a measurement too.
#include <stb_image.h>  // implementation in Debian's libstb

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

namespace {

struct Region {
  const char* name;
  double x0, y0, x1, y1;  // fractions of the image
};

// Pixels of a region that stand out from its most common colour (text, lines), and how many
// distinct colours it holds.
void measure(const unsigned char* rgb, int w, int h, const Region& r, int* distinct, double* ink) {
  const int x0 = static_cast<int>(r.x0 * w), x1 = static_cast<int>(r.x1 * w);
  const int y0 = static_cast<int>(r.y0 * h), y1 = static_cast<int>(r.y1 * h);
  std::set<int> colours;
  int bright = 0, total = 0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) {
      const unsigned char* p = rgb + (static_cast<size_t>(y) * w + x) * 3;
      colours.insert(p[0] << 16 | p[1] << 8 | p[2]);
      if (p[0] + p[1] + p[2] > 3 * 140) ++bright;  // text is light on the dark theme
      ++total;
    }
  }
  *distinct = static_cast<int>(colours.size());
  *ink = total ? static_cast<double>(bright) / total : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool measured = argc == 5 && std::string(argv[4]) == "--measured";
  if (argc != 4 && !measured) {
    std::fprintf(stderr, "usage: %s FILE.png WIDTH HEIGHT [--measured]\n", argv[0]);
    return 2;
  }
  const int want_w = std::atoi(argv[2]), want_h = std::atoi(argv[3]);
  int w = 0, h = 0, channels = 0;
  unsigned char* rgb = stbi_load(argv[1], &w, &h, &channels, 3);
  if (!rgb) {
    std::fprintf(stderr, "FAIL: cannot read %s: %s\n", argv[1], stbi_failure_reason());
    return 1;
  }
  int failures = 0;
  if (w != want_w || h != want_h) {
    std::fprintf(stderr, "FAIL: %s is %dx%d, expected %dx%d\n", argv[1], w, h, want_w, want_h);
    ++failures;
  }
  const Region whole{"whole image", 0, 0, 1, 1};
  std::vector<Region> regions = {
      {"left column (title, GPU panel, lesson text)", 0.0, 0.0, 0.33, 1.0},
      {"controls", 0.36, 0.0, 1.0, 0.22},
      {"plot", 0.36, 0.25, 1.0, 0.65},
  };
  if (measured) regions.push_back({"measurement table", 0.36, 0.72, 1.0, 0.95});
  int distinct = 0;
  double ink = 0;
  measure(rgb, w, h, whole, &distinct, &ink);
  std::printf("%s: %dx%d, %d distinct colours, %.1f%% bright pixels\n", argv[1], w, h, distinct,
              100 * ink);
  if (distinct < 200) {
    std::fprintf(stderr, "FAIL: only %d distinct colours: the frame looks empty\n", distinct);
    ++failures;
  }
  for (const Region& r : regions) {
    measure(rgb, w, h, r, &distinct, &ink);
    std::printf("  %s: %d distinct colours, %.2f%% bright pixels\n", r.name, distinct, 100 * ink);
    // Antialiased text gives dozens of shades and a few percent of bright pixels.
    if (distinct < 40 || ink < 0.005 || ink > 0.6) {
      std::fprintf(stderr, "FAIL: the %s region looks uniform (no text drawn?)\n", r.name);
      ++failures;
    }
  }
  stbi_image_free(rgb);
  if (failures == 0) std::printf("OK\n");
  return failures == 0 ? 0 : 1;
}
