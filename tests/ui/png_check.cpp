// Checks a screenshot by content, not by eye: it exists, has the expected size, and shows a real
// frame (many colours; the text regions are not uniform).
//
// usage: fusionlab_png_check FILE.png WIDTH HEIGHT [--measured] [--plotted]
//   --measured: the measurement panel (bottom right) must show a measurement too.
//   --plotted: the speedup plot must show at least one measured point: a blob of the measured
//     series' colour besides the legend's swatch (viz/speedup_view.cpp draws both).
#include <stb_image.h>  // implementation in Debian's libstb

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
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

// The measured series' colour in the speedup plot at the top level (the default): the top level's
// Okabe-Ito bluish green (viz/palette.h: level_top).
constexpr int kMeasuredRgb[3] = {0, 158, 115};

bool is_measured_colour(const unsigned char* p) {
  for (int c = 0; c < 3; ++c) {
    if (std::abs(p[c] - kMeasuredRgb[c]) > 6) return false;
  }
  return true;
}

// Blobs of the measured colour in a region that hold a solid 3x3 core (a point's filled marker,
// or the legend's swatch marker; thin anti-aliased lines have none). Lines joining points join
// their markers into one blob, so a curve counts once and a lone point once.
int measured_blobs(const unsigned char* rgb, int w, int h, const Region& r) {
  const int x0 = static_cast<int>(r.x0 * w), x1 = static_cast<int>(r.x1 * w);
  const int y0 = static_cast<int>(r.y0 * h), y1 = static_cast<int>(r.y1 * h);
  const int rw = x1 - x0, rh = y1 - y0;
  std::vector<char> in(static_cast<size_t>(rw) * rh, 0);
  for (int y = 0; y < rh; ++y) {
    for (int x = 0; x < rw; ++x) {
      in[static_cast<size_t>(y) * rw + x] =
          is_measured_colour(rgb + (static_cast<size_t>(y + y0) * w + x + x0) * 3);
    }
  }
  const auto at = [&](int x, int y) {
    return x >= 0 && y >= 0 && x < rw && y < rh && in[static_cast<size_t>(y) * rw + x];
  };
  std::vector<int> label(in.size(), 0);
  int blobs = 0, next = 0;
  for (int y = 0; y < rh; ++y) {
    for (int x = 0; x < rw; ++x) {
      if (!at(x, y) || label[static_cast<size_t>(y) * rw + x]) continue;
      // Flood fill (8-connected), noting whether any pixel has a solid 3x3 neighbourhood.
      ++next;
      bool solid = false;
      std::vector<std::pair<int, int>> stack = {{x, y}};
      label[static_cast<size_t>(y) * rw + x] = next;
      while (!stack.empty()) {
        const auto [cx, cy] = stack.back();
        stack.pop_back();
        bool core = true;
        for (int dy = -1; dy <= 1; ++dy) {
          for (int dx = -1; dx <= 1; ++dx) {
            const int nx = cx + dx, ny = cy + dy;
            if (!at(nx, ny)) {
              core = false;
              continue;
            }
            int& l = label[static_cast<size_t>(ny) * rw + nx];
            if (!l) {
              l = next;
              stack.push_back({nx, ny});
            }
          }
        }
        solid = solid || core;
      }
      if (solid) ++blobs;
    }
  }
  return blobs;
}

}  // namespace

int main(int argc, char** argv) {
  bool measured = false, plotted = false, usage = argc < 4;
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--measured") {
      measured = true;
    } else if (arg == "--plotted") {
      plotted = true;
    } else {
      usage = true;
    }
  }
  if (usage) {
    std::fprintf(stderr, "usage: %s FILE.png WIDTH HEIGHT [--measured] [--plotted]\n", argv[0]);
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
    // Antialiased text gives dozens of shades and a few percent of bright pixels; in a large
    // window (2560x1440) text is the same size but the region is larger, so a region also
    // passes with 1500 bright pixels (about one line of text at 16 px).
    const double bright = ink * (r.x1 - r.x0) * w * (r.y1 - r.y0) * h;
    if (distinct < 40 || (ink < 0.005 && bright < 1500) || ink > 0.6) {
      std::fprintf(stderr, "FAIL: the %s region looks uniform (no text drawn?)\n", r.name);
      ++failures;
    }
  }
  if (plotted) {
    const Region plot{"plot", 0.36, 0.2, 1.0, 0.72};
    const int blobs = measured_blobs(rgb, w, h, plot);
    std::printf("  plot: %d blob(s) of the measured colour (the legend's swatch is one)\n", blobs);
    if (blobs < 2) {
      std::fprintf(stderr, "FAIL: the speedup plot shows no measured point\n");
      ++failures;
    }
  }
  stbi_image_free(rgb);
  if (failures == 0) std::printf("OK\n");
  return failures == 0 ? 0 : 1;
}
