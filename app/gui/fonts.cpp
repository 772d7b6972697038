#include "app/gui/fonts.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "app/gui/subprocess.h"

namespace fl::gui {
namespace {

// Where Debian's fonts-dejavu-core puts it: used only when fontconfig is not there to ask.
constexpr const char* kFallbackFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

bool ends_with_ci(const std::string& s, const std::string& tail) {
  if (s.size() < tail.size()) return false;
  for (size_t i = 0; i < tail.size(); ++i) {
    const char a =
        static_cast<char>(std::tolower(static_cast<unsigned char>(s[s.size() - tail.size() + i])));
    if (a != tail[i]) return false;
  }
  return true;
}

}  // namespace

bool loadable_font_file(const std::string& path) {
  if (path.empty() ||
      !(ends_with_ci(path, ".ttf") || ends_with_ci(path, ".otf") || ends_with_ci(path, ".ttc"))) {
    return false;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::FILE* f = std::fopen(path.c_str(), "rb");  // AddFontFromFileTTF asserts on a missing file
  if (!f) return false;
  std::fclose(f);
  return true;
}

std::string find_ui_font(std::string* how) {
  // FUSIONLAB_FONT: a font file of the user's choice (and how tests pin one down).
  if (const char* forced = std::getenv("FUSIONLAB_FONT"); forced && *forced) {
    if (loadable_font_file(forced)) {
      if (how) *how = "FUSIONLAB_FONT";
      return forced;
    }
  }
  std::string out;
  // fc-match answers at once; a second is plenty even on a cold font cache.
  if (run_and_capture({"fc-match", "-f", "%{file}", "DejaVu Sans:style=Book"}, 5.0, &out)) {
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (loadable_font_file(out)) {
      if (how) *how = "fontconfig";
      return out;
    }
  }
  if (loadable_font_file(kFallbackFont)) {
    if (how) *how = "fallback path";
    return kFallbackFont;
  }
  if (how) *how = "built-in";
  return "";
}

const ImWchar* ui_glyph_ranges() {
  static const ImWchar ranges[] = {
      0x0020, 0x00FF,  // Basic Latin + Latin-1 Supplement (µ × · ±)
      0x0370, 0x03FF,  // Greek (σ, Σ, α)
      0x1D00, 0x1DBF,  // phonetic extensions (ᵀ)
      0x2000, 0x206F,  // general punctuation (– — ’ … ‖)
      0x2070, 0x209F,  // super- and subscripts
      0x2190, 0x21FF,  // arrows
      0x2200, 0x22FF,  // mathematical operators (≈ ≤ ≥ √ ∑)
      0x25A0, 0x25FF,  // geometric shapes (● ▲ ■)
      0,
  };
  return ranges;
}

}  // namespace fl::gui
