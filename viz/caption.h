// The caption strip under a screenshot (GPU, lesson, size, level, cache mode, date), as data:
// which pieces go on which line for a given width. The window draws it (app/gui/screenshot.cpp)
// below the pixels it saves; tests check the layout without a window.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace fl::viz {

// Between two pieces on one line.
constexpr const char* kCaptionSeparator = "  \xC2\xB7  ";  // a middle dot, in the default glyphs

struct CaptionLayout {
  float width = 0, height = 0;  // the strip, in pixels
  float padding = 0;            // left/top inset of the first line
  float line_height = 0;
  float font_size = 0;
  std::vector<std::string> lines;  // top to bottom
};

// Joins `pieces` with kCaptionSeparator into as few lines as fit `width` minus the padding, in
// order, never splitting a piece (one wider than the strip gets a line of its own). Empty pieces
// are skipped. `text_width` measures a string at `font_size` (default: 0.55 * font_size per
// byte, a fair guess for DejaVu Sans). No pieces: height 0.
CaptionLayout layout_caption(const std::vector<std::string>& pieces, float width, float font_size,
                             const std::function<float(const std::string&)>& text_width = {});

}  // namespace fl::viz
