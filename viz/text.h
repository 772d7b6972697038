// The one way the views draw text: draw_text() keeps a string inside the draw list's clip rect
// (the view's panel, or a plot's frame), shortens it with "..." when it does not fit, shows the
// whole string in a tooltip when the mouse is over a shortened one, and, when recording is on,
// remembers the rectangle it drew and the clip rect it had to stay in. The UI overlap test
// (tests/ui/text_overlap_check.cpp) reads those rectangles: no two may overlap and none may cross
// its clip rect, at any window size.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

namespace fl::viz {

struct TextRect {
  ImVec2 min, max;            // what was drawn
  ImVec2 clip_min, clip_max;  // the clip rect it had to stay inside
  std::string text;           // as drawn (shortened when it had to be)
};

struct TextOptions {
  float max_width = 0;  // > 0: shorten to this width too (besides the clip rect)
  float font_size = 0;  // 0: the current font size
  bool record = true;   // false: decoration that may sit under other text (none today)
};

// Draws `text` (one line) with its top-left at `pos`. A string that would cross the clip rect's
// right edge, or max_width, is shortened with "..."; one that would cross its left edge moves
// right; one that does not fit the clip rect's height is not drawn. Returns the rectangle drawn
// (zero size when nothing was).
TextRect draw_text(ImDrawList* dl, ImVec2 pos, ImU32 color, const std::string& text,
                   const TextOptions& options = TextOptions());
// The same for several lines ("a\nb"), each shortened on its own.
TextRect draw_text_lines(ImDrawList* dl, ImVec2 pos, ImU32 color, const std::string& text,
                         const TextOptions& options = TextOptions());

// `text` shortened with "..." to at most `width` px in the current font at `font_size`
// (needs an ImGui context). Empty when not even "x..." fits.
std::string ellipsize(const std::string& text, float width, float font_size = 0);

// ---- recording (the UI overlap test) -----------------------------------------------------------
void set_text_recording(bool on);
bool text_recording();
// Records a rectangle drawn by other means (an ImGui table cell or label), when recording is on.
void record_text(const TextRect& rect);
// The rectangles drawn since the last clear.
const std::vector<TextRect>& recorded_text();
void clear_recorded_text();

// Rectangles that overlap one another (by more than `slack` px each way) or cross their clip
// rect (by more than `slack`), one line each, for a test's message. Empty when all is well.
std::vector<std::string> text_problems(const std::vector<TextRect>& rects, float slack = 0.5f);

}  // namespace fl::viz
