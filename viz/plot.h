// A small plot widget on ImDrawList (ImPlot is not in the registries we can use): a log-x axis
// for tensor sizes, a linear y axis, several series (line + markers), a horizontal reference
// line, a vertical marker for the current size, a legend and a hover read-out.
//
// Two steps, so the geometry is testable without a window or pixels:
//   1. layout_plot(spec, canvas) computes everything as plain data: axis ranges, ticks and their
//      labels, every point's screen position, the reference line's y, the marker's x, the legend
//      (plot_layout.cpp, which needs no ImGui context).
//   2. draw_plot(draw_list, layout, hover) draws that data and decides nothing (plot.cpp).
// plot_widget() wraps both in the Canvas pattern (InvisibleButton + draw list) with a tooltip.
#pragma once

#include <imgui.h>

#include <functional>
#include <string>
#include <vector>

#include "viz/palette.h"

namespace fl::viz {

struct PlotPoint {
  double x = 0;  // > 0: the x axis is logarithmic
  double y = 0;
  double lo = 0, hi = 0;  // a spread around y (drawn as a band when the series asks); lo < hi
  // Measured while another process used the GPU or its clocks were held down
  // (model/gpu_conditions.h): an orange ring around the marker, said in the hover read-out.
  bool disturbed = false;
};

struct PlotSeries {
  std::string label;
  std::vector<PlotPoint> points;  // any order; drawn sorted by x
  ImU32 color = palette::level_top;
  float line_thickness = 2.0f;
  float marker_radius = 4.0f;
  bool hollow_markers = false;  // hollow: a reference series, not a measurement
  bool band = false;            // shade each point's lo..hi spread (e.g. p20-p80)
  bool dashed = false;          // a dashed line: a compared recording, drawn under the measured
  bool in_legend = true;        // false: only the hover read-out names it
  std::string legend_label;     // the legend's text when not the label (empty: the label)
  std::string band_label = "shaded: p20-p80 of the repetitions";  // the band's legend row
};

// A horizontal line across the plot (e.g. the speedup the byte counts allow), drawn dashed in
// the neutral reference grey; its label goes in the legend, never on the data.
struct PlotReferenceLine {
  bool enabled = false;
  double y = 0;
  std::string label;
  ImU32 color = palette::reference;
  bool dotted = false;  // short dashes: a second line (the 1x line) apart from the first
};

enum class PlotYScale { automatic, linear, log };

// A vertical line at one x (e.g. the size the slider is on).
struct PlotMarker {
  bool enabled = false;
  double x = 0;
  std::string label;
  ImU32 color = palette::reference_dim;
};

struct PlotSpec {
  std::string x_title;             // under the x axis
  std::string y_title;             // above the plot area, left
  std::string x_unit;              // appended to x values in the read-out: "16M elements"
  double x_min = 1, x_max = 1024;  // log axis range, > 0
  double log_base = 2;             // ticks sit at integer powers of this base
  // Tick labels and read-out values on x; default "%g".
  std::function<std::string(double)> x_format;
  bool y_auto = true;          // range from the data, the reference line and y_include_zero
  bool y_include_zero = true;  // linear axes only
  // automatic: logarithmic when every value is > 0 and they span more than 10x (a 0.06x level
  // beside a 12x limit stays readable), else linear.
  PlotYScale y_scale = PlotYScale::automatic;
  double y_min = 0, y_max = 1;  // when !y_auto
  std::string y_suffix;         // "x" for speedups
  std::vector<PlotSeries> series;
  PlotReferenceLine reference;
  std::vector<PlotReferenceLine>
      more_lines;  // further reference lines (e.g. 1x), in the legend too
  PlotMarker marker;
  std::string note;  // a short remark drawn bottom-left in the plot ("Nothing measured: ...")
};

// Sizes in pixels; layout_plot estimates text widths from font_size so it needs no ImGui context.
struct PlotStyle {
  float font_size = 16.0f;
  float char_width = 0.0f;  // 0: 0.6 * font_size (a fair average for DejaVu Sans digits)
  // A label's width in pixels, for the legend; unset: char_width per character. The widget
  // passes ImGui's measure, so the legend is placed by the text it will draw.
  std::function<float(const std::string&)> text_width;
};

struct PlotTick {
  float pos = 0;  // screen x (x ticks) or y (y ticks)
  double value = 0;
  std::string label;  // empty for minor ticks
  bool major = true;
};

struct PlotSeriesLayout {
  std::string label;
  ImU32 color = 0;
  float line_thickness = 2.0f;
  float marker_radius = 4.0f;
  bool hollow_markers = false;
  std::vector<PlotPoint> data;  // sorted by x
  std::vector<ImVec2> screen;   // data[i] in screen space
  bool band = false;
  std::vector<ImVec2> band_lo, band_hi;  // data[i].lo / .hi in screen space, when band
  bool dashed = false;
  std::string legend_label;  // empty: not in the legend
};

// One row of the legend: a series (line and marker), its p20-p80 band, or a reference line.
struct PlotLegendEntry {
  enum Kind { series, band, line } kind = series;
  std::string label;
  int index = 0;  // into PlotLayout::series (series, band) or PlotLayout::lines (line)
};

// A reference line placed on screen.
struct PlotLineLayout {
  float y = 0;
  double value = 0;
  std::string label;
  ImU32 color = 0;
  bool dotted = false;
};

struct PlotLayout {
  ImVec2 canvas_min, canvas_max;  // the whole widget
  ImVec2 frame_min, frame_max;    // the plot area inside the axes
  double x_min = 1, x_max = 10, log_base = 2;
  double y_min = 0, y_max = 1;
  bool y_log = false;  // the y axis is logarithmic (base 10)
  int y_decimals = 1;  // for y tick labels, from the tick step
  std::vector<PlotTick> x_ticks, y_ticks;
  std::vector<PlotSeriesLayout> series;

  bool reference_visible = false;
  float reference_y = 0;
  std::string reference_label;
  ImU32 reference_color = 0;
  // Every reference line in view, the byte-ratio limit (when visible) first.
  std::vector<PlotLineLayout> lines;
  // The legend's rows in order: series, their bands, reference lines.
  std::vector<PlotLegendEntry> legend;

  bool marker_visible = false;
  float marker_x = 0;
  std::string marker_label;
  ImU32 marker_color = 0;

  std::string x_title, y_title, x_unit, y_suffix, note;
  ImVec2 x_title_pos, y_title_pos;  // top-left of each title
  // The legend sits in the corner of the plot area its box covers least data in (points and
  // lines, sampled), bottom-right first on a tie: 0 bottom-right, 1 top-right, 2 top-left,
  // 3 bottom-left. legend_anchor is the box's corner on that side; legend_min/max the box as
  // estimated from the labels' lengths (the drawing measures the text itself).
  // When every corner would hide data and the canvas is tall enough, the legend leaves the plot
  // area instead (legend_outside): its entries flow in rows across a strip between the y title
  // and the frame, legend_entries[i] the top-left of entry i (series with a legend label in
  // order, then the reference line), legend_min/max the strip.
  int legend_corner = 0;
  ImVec2 legend_anchor;
  ImVec2 legend_min, legend_max;
  float legend_row_height = 0;
  bool legend_outside = false;
  bool legend_beside = false;  // outside, in a column right of the frame (not a strip above)
  std::vector<ImVec2> legend_entries;
  ImVec2 note_anchor;   // bottom-left corner of the note
  float note_wrap = 0;  // the note's wrap width
  float font_size = 16;
  std::function<std::string(double)> x_format;

  float x_to_screen(double x) const;
  float y_to_screen(double y) const;
  std::string format_x(double x) const;
  std::string format_y(double y, int decimals) const;
};

// A plot's frame keeps at least this many lines of height when its legend leaves it (room for
// three or more labelled y values), unless the canvas itself is shorter.
constexpr float kPlotMinFrameFonts = 5.0f;

PlotLayout layout_plot(const PlotSpec& spec, ImVec2 canvas_min, ImVec2 canvas_max,
                       const PlotStyle& style = PlotStyle());

// The canvas height that keeps a frame of kPlotMinFrameFonts lines with the legend in a strip
// above it, at the layout's width (what a pane of two views asks for).
float plot_needed_height(const PlotLayout& layout, const PlotStyle& style);

// How much of the series the legend box covers (points count 4, line samples 1; 0 when the
// legend is outside the frame or empty): what the UI test requires to be 0.
int legend_over_data(const PlotLayout& layout);

// What the UI test checks of each plot the window draws (recorded while viz::text_recording()
// is on, viz/text.h): the frame, its labelled ticks and whether the legend hides data.
struct PlotFit {
  std::string id;
  float font_size = 0;
  ImVec2 frame_min, frame_max;
  int x_labels = 0, y_labels = 0;
  int legend_over_data = 0;
  bool legend_outside = false;
};
const std::vector<PlotFit>& recorded_plots();
void record_plot(const PlotFit& fit);
void clear_recorded_plots();
PlotFit plot_fit(const char* id, const PlotLayout& layout);

// The point nearest to `mouse` (screen distance), if the mouse is inside the plot area and the
// point lies within `max_distance` pixels.
struct PlotHover {
  int series = -1;
  int index = -1;
  bool valid() const { return series >= 0; }
};
PlotHover pick_nearest(const PlotLayout& layout, ImVec2 mouse, float max_distance);

// "GELU + scale, measured: 16M elements, 1.91x"
std::string hover_readout(const PlotLayout& layout, const PlotHover& hover);

// "Nice" linear ticks covering [lo, hi]: steps of 1, 2 or 5 x 10^k, at most max_ticks of them.
// Returns the step; *lo and *hi are widened to multiples of it.
double nice_linear_step(double* lo, double* hi, int max_ticks);

void draw_plot(ImDrawList* draw_list, const PlotLayout& layout, const PlotHover& hover);

// The Canvas pattern at the cursor: `size` components <= 0 fill the available space.
// Returns the hovered point (and shows its read-out in a tooltip).
PlotHover plot_widget(const char* id, const PlotSpec& spec, ImVec2 size);

}  // namespace fl::viz
