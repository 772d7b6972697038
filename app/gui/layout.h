// Where the window's panels go: two columns (GPU and lessons on the left; controls, views and the
// measurement on the right) with draggable splitters between them, a views panel that can be
// maximised to the whole window, and an optional second views panel beside or under the first.
// layout_frame() is plain arithmetic on rectangles (tested without a window); splitter() is the
// small ImGui widget that moves a boundary.
//
//   +-- left ---------------+ | +-- right ------------------------------+
//   | title                 | | | controls                               |
//   | GPU                   | | | views [ | second views when split ]    |
//   | lessons + teaching    | | |---------------------------------------- (splitter)
//   |                       | | | measurement                            |
//   +-----------------------+ | +----------------------------------------+
//                     (splitter)
#pragma once

#include <functional>
#include <string>

#include "app/gui/settings.h"

namespace fl::gui {

struct Box {
  float x = 0, y = 0, w = 0, h = 0;
  float right() const { return x + w; }
  float bottom() const { return y + h; }
  bool empty() const { return w <= 0 || h <= 0; }
};

struct LayoutInput {
  Box area;                     // the window below the menu bar
  float font_size = 16;         // panels' minimum sizes are multiples of it
  float gap = 8;                // between panels; the splitters sit in the gaps
  float title_height = 20;      // the "Fusion Lab" line over the left column
  float controls_height = 150;  // the controls panel's natural height
  // The GPU panel's natural height at a given width (its text wraps).
  std::function<float(float width)> gpu_height = [](float) { return 200.0f; };
  PanelSizes panels;
  bool maximized = false;  // the views panel fills the area
  // Two views at once: what the view in front of each pane needs along the split (its height
  // one above the other, its width side by side): `min`, a plot's readable height with its
  // legend and three ticks; `max` > 0, the most its content uses (a timeline's lanes), so the
  // other pane gets the rest. Zeros: kMinPaneFonts, no maximum.
  struct PaneNeed {
    float min = 0, max = 0;
  };
  PaneNeed panes[2];
};

struct FrameLayout {
  Box title, gpu, lessons;                   // left column
  Box controls, views, views2, measurement;  // right column; views2 empty unless split
  Box column_splitter;                       // between the columns (drag: left_width)
  Box measurement_splitter;  // between views and measurement (drag: measurement_height)
  Box views_splitter;        // between the two views when split (drag: split_fraction)
  bool maximized = false;    // only `views` is set
};

// Minimum sizes in font heights: the left column, the right column, the views panel, the
// measurement panel.
constexpr float kMinLeftFonts = 15, kMinRightFonts = 30, kMinViewsFonts = 9,
                kMinMeasurementFonts = 5;
// The least a pane of two views gets along the split when its view asks for nothing more.
constexpr float kMinPaneFonts = 8;
// With two views one above the other the measurement panel gives way down to its title (it
// scrolls), so both views keep what they need in a short window.
constexpr float kMinMeasurementSplitFonts = 2;

// The panels' rectangles for `in`; fractions outside what fits are clamped (the stored
// fractions are not changed).
FrameLayout layout_frame(const LayoutInput& in);

// The fraction that puts a boundary at `pixels` within `total` (for the splitters), clamped to
// [lo, hi].
float fraction_of(float pixels, float total, float lo, float hi);

// A splitter over `bar` (screen coordinates, inside the current ImGui window): a thin invisible
// button that shows a resize cursor and a highlight, and while dragged moves *position (pixels
// along its axis: x for a vertical bar, y for a horizontal one) with the mouse. Returns true while
// it moves; *reset is set on a double-click (back to the default).
bool splitter(const char* id, const Box& bar, bool vertical, float* position, bool* reset);

}  // namespace fl::gui
