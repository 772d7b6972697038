// The window's font: found through fontconfig (`fc-match`), so it is whatever the desktop calls
// "DejaVu Sans" (or its stand-in), not a hard-coded path; Dear ImGui's built-in font is the last
// resort. The glyph ranges cover the characters our text uses: Latin-1 (µ, ×, ·), Greek,
// punctuation (– … ’), super- and subscripts, arrows and maths (→ ≈ ≤).
#pragma once

#include <imgui.h>

#include <string>

namespace fl::gui {

// A TrueType/OpenType file for the UI font, and how it was found ("fontconfig", "fallback
// path"); empty when none is readable (use ImGui's built-in font).
std::string find_ui_font(std::string* how = nullptr);

// Whether `path` is a readable font file Dear ImGui can load (.ttf, .otf, .ttc).
bool loadable_font_file(const std::string& path);

// Zero-terminated pairs for ImFontConfig::GlyphRanges (static storage).
const ImWchar* ui_glyph_ranges();

}  // namespace fl::gui
