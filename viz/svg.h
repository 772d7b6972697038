// SVG export of the plots for slides: the speedup and bandwidth plots (PlotLayout), the roofline
// and the memory chart, drawn from the same layout data the window draws, in the palette's
// colours on a white page (viz/palette.h). Each plot widget leaves its SVG source behind while
// it draws, so "the view in front" can be exported (File menu, a script's `svg NAME.svg`).
#pragma once

#include <imgui.h>

#include <functional>
#include <string>

namespace fl::viz {

struct PlotLayout;
struct RooflineLayout;
struct RooflineInput;
struct MemoryLayout;
struct MemoryInput;

// Standalone SVG documents (the canvas's size, its top-left at 0,0).
std::string plot_svg(const PlotLayout& layout);
std::string roofline_svg(const RooflineInput& input, const RooflineLayout& layout, ImVec2 min,
                         ImVec2 max);
std::string memory_svg(const MemoryInput& input, const MemoryLayout& layout, ImVec2 min,
                       ImVec2 max);

// The SVG of the plot drawn last (each plot widget sets it while drawing; the views panel
// clears it at the start of a frame, so after a frame it is the front view's, or empty for a
// view that is not a plot).
void set_svg_source(std::function<std::string()> source);
void clear_svg_source();
bool has_svg_source();
std::string current_svg();

// Writes `text` to `path` atomically through model/file_io.h (a temporary made exclusively
// beside it, flushed to disk, renamed over `path`). False with a one-line reason in *error.
bool write_file_atomic(const std::string& path, const std::string& text, std::string* error);

}  // namespace fl::viz
