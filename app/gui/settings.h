// What the window remembers between runs: its size and place, the lesson, view, precision, cache
// mode and panel sizes, in a small text file under $XDG_CONFIG_HOME/fusionlab/ (default
// ~/.config/fusionlab/). Interactive runs read it at start and write it when the window closes;
// --screenshot and --script runs neither read nor write it (their pictures must not depend on
// who ran them before) unless --use-settings asks for it. --reset-settings deletes it.
//
// The file is `key = value` lines (docs/VIEWS.md, "The window"). A file that is too large or has
// a line that does not parse is ignored as a whole with one line on stderr, never a crash; keys
// this version does not know are skipped, so an older fusionlab reads a newer one's file.
#pragma once

#include <string>

#include "kernels/status.h"

namespace fl::gui {

// --size WxH and the script's `window-size W H`: the window's size in pixels.
constexpr int kMinWindowWidth = 640, kMinWindowHeight = 480;
constexpr int kMaxWindowSide = 16384;
// Parses "1920x1080" (also "1920X1080"). On failure *why says what is wanted, in one line.
bool parse_window_size(const std::string& text, int* width, int* height, std::string* why);
// Checks one side pair (both within kMin.. kMaxWindowSide); empty when fine.
std::string window_size_problem(int width, int height);

// --scale F: multiplies the monitor's content scale (fonts, spacing, line widths).
constexpr float kMinScale = 0.5f, kMaxScale = 4.0f;

// The panel sizes, as fractions so they survive a window of another size.
struct PanelSizes {
  float left_width = 0.34f;              // the left column (GPU, lessons) / the window's width
  float measurement_height = 0.32f;      // the measurement panel / the right column's height
  bool split = false;                    // two views at once
  bool side_by_side = false;             // split: left and right (else one above the other)
  float split_fraction = 0.5f;           // split: the first view's share
  std::string second_view = "timeline";  // split: the second pane's view
};

struct Settings {
  // The window in screen coordinates; width/height 0: never saved (use 80% of the work area).
  int x = 0, y = 0, width = 0, height = 0;
  bool has_position = false;
  bool maximized = false;  // the window manager's maximised state
  std::string lesson;      // empty: the first lesson (gelu_scale)
  std::string view;        // "speedup", "flow", ... empty: speedup
  std::string precision;   // "fp32" / "bf16"; empty: fp32
  std::string cache;       // "cold" / "warm"; empty: cold
  bool show_peers = true;  // the speedup plot's "PyTorch peers" box
  PanelSizes panels;
  float zoom = 1.0f;  // Ctrl+= / Ctrl+- / Ctrl+0: text and panels on top of the monitor's scale
};

// The zoom's range and step (Ctrl+= / Ctrl+-): 50% to 300% in steps of 10%.
constexpr float kMinZoom = 0.5f, kMaxZoom = 3.0f, kZoomStep = 0.1f;
// `zoom` moved by `steps` steps (negative: smaller), on the 10% grid, within the range.
float zoomed(float zoom, int steps);

// The limit on the settings file; anything larger is not ours (or is damaged) and is ignored.
constexpr long kMaxSettingsBytes = 64 * 1024;

// $XDG_CONFIG_HOME/fusionlab/settings.ini (an absolute XDG_CONFIG_HOME only, as the spec says),
// else $HOME/.config/fusionlab/settings.ini; empty when neither is set.
std::string settings_path();

// Reads `path`. A missing file is not an error (*out stays default, *found false). A file that is
// too large, unreadable or malformed is an error whose message names the file and the first
// problem ("line 3: width is not a whole number"); *out then stays default.
Status load_settings(const std::string& path, Settings* out, bool* found = nullptr);
// The parse behind load_settings, for a file's text already read: `name` is what messages call
// the file. On failure *out is left as it was.
Status settings_from_text(const std::string& contents, const std::string& name, Settings* out);
// Writes `settings` atomically: a temporary file in the same folder, flushed to disk (fsync),
// then renamed over `path`; the folder is made if missing.
Status save_settings(const std::string& path, const Settings& settings);
// The file's text (what save_settings writes).
std::string settings_text(const Settings& settings);

// Writes `text` to `path` atomically, making its folder first: the shared writer of
// model/file_io.h (temporary file in the same folder, fsync, rename).
Status write_file_atomic(const std::string& path, const std::string& text);

}  // namespace fl::gui
