// Small widgets shared by the panels.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "app/gui/lesson_text.h"
#include "kernels/lesson.h"

namespace fl::gui {

// "(?)" that shows `text` in a tooltip when hovered (as in imgui_demo.cpp).
void help_marker(const char* text);
// The same for an explanation loaded as an asset (app/gui/lesson_text.h): its note, if any, then
// its blocks, laid out as the lesson panel lays them out. What only the running window knows
// (the recording's GPU, why a choice is greyed out) goes in a paragraph of its own `before` or
// `after` the file's text (none when empty).
void help_marker(const LessonText& text, const std::string& after = "",
                 const std::string& before = "");

// A section title in the accent colour, its "(?)" help beside it, over a thin separator.
void section_title(const char* text, const char* help);
void section_title(const char* text, const LessonText& help, const std::string& after = "",
                   const std::string& before = "");
// The same with `controls` drawn on the title's line, right of the "(?)", before the separator.
void section_title_with(const char* text, const LessonText& help,
                        const std::function<void()>& controls);

// A loaded text's note ("your copy ... is broken") in a warning colour, wrapped at `wrap_x`
// (ImGui::PushTextWrapPos: 0 is the window's right edge).
void draw_text_note(const std::string& note, float wrap_x = 0.0f);
// Lays `blocks` out at `width` pixels (app/gui/lesson_text.h) and draws them at the cursor, one
// item per line (headings larger, emphasis in its own colour). Returns the lines; *visible (when
// given) says which lie inside the window's clip rectangle.
std::vector<TextLine> draw_text_blocks(const std::vector<TextBlock>& blocks, float width,
                                       std::vector<bool>* visible = nullptr);

// A slider over sizes on a log2 scale, in steps of a quarter octave. Returns true when the value
// changed this frame; *released is set when the learner let go after a change. With `stops`
// (ascending; e.g. the sizes a recording holds) it stops only there, nearest on the log scale,
// and marks each stop with a tick.
bool log_size_slider(const char* id, int64_t* size, int64_t min, int64_t max, bool* released,
                     const std::vector<int64_t>& stops = {});

// For the UI text-fit test (FUSIONLAB_TEXT_RECTS, tests/ui/text_overlap_check.cpp): the label
// of the item just drawn (up to any "##"), with where it had to stay: in_frame, centred in the
// item's frame (a button, a tab), which it must fit less the frame's padding; after_box, right
// of a check box or radio button; from_left, a selectable's text. Beside a frame or from the
// left it must stay inside the window. Nothing while the test is off, or for an item the panel
// has scrolled (partly) out of view.
enum class LabelPlace { in_frame, after_box, from_left };
void record_widget_label(const std::string& label, LabelPlace place);

// A slider's value drawn in its frame on the side of the handle with more room (ImGui centres
// it, and a wide handle covers it), shortened with "..." when that side is too narrow, the
// whole value in a tooltip then. `t` is where the handle is (0..1), `grab_w` its width (ImGui
// 1.86's slider geometry: 2 px padding). Call it right after the slider, drawn with format "".
void slider_value_text(const std::string& text, float t, float grab_w,
                       const std::string& short_text = "");  // tried before "..."

// `text` shortened to fit `width` pixels in the current font, ending in an ellipsis ("…", or
// "..." when the font lacks it); unchanged when it fits. Cuts between UTF-8 characters.
std::string fit_text(const std::string& text, float width);
// One line of text that never crosses `width` (<= 0: what is left of the window's line, also in a
// table cell; pass ImGui::GetContentRegionAvail().x for a stretched column): shortened with an
// ellipsis when too long, the whole text in a tooltip on hover. `color` 0: the text colour;
// `disabled`: the dimmed one.
void text_fitted(const std::string& text, float width = 0, bool disabled = false, ImU32 color = 0);

// A spinning arc, for "the GPU is working".
void spinner(float radius, ImU32 color);

// A wrapped block of text on a coloured background, with a border (banners).
void banner(const char* id, const std::string& text, ImVec4 background, ImVec4 border);

// Numbers as shown on screen.
std::string size_text(int64_t elements);     // "16M" or "1,482,910"
std::string version_text(int cuda_version);  // 12080 -> "12.8"
std::string fixed(double value, int decimals);
// "16M elements = 64.0 MiB of fp32", or for row-wise lessons "4K rows x 768 = 12.0 MiB of fp32".
std::string tensor_text(const Lesson& lesson, int64_t size, Precision precision);

}  // namespace fl::gui
