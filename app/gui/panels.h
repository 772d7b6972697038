// The window's panels, one file each. Each draws into the current ImGui window or child; sizes
// are multiples of the font size so HiDPI scaling carries through.
#pragma once

#include "model/peers.h"

#include <string>
#include <vector>

#include "app/gui/lab.h"

namespace fl::gui {

void draw_gpu_panel(const Lab& lab);                  // panel_gpu.cpp
float gpu_panel_height(const Lab& lab, float width);  // the child height that fits it
void draw_lesson_panel(Lab& lab, double now);         // panel_lesson.cpp
void draw_controls_panel(Lab& lab, double now);       // panel_controls.cpp
void draw_speedup_panel(const Lab& lab);              // panel_speedup.cpp: under its title
void draw_speedup_title_line(const Lab& lab);  // its "PyTorch peers" box, on the title's line
// PyTorch peers for the speedup plot (model/peers.h), read once before the window opens:
// `path`, or when empty the peer file shipped beside the recordings (none: no peer series).
// Fails only for a named file that cannot be used.
Status load_window_peers(const std::string& path);
const PeerFile* window_peers();
// Whether the speedup plot's "PyTorch peers" box is ticked (the measurement panel follows it).
bool window_peers_shown();
void set_window_peers_shown(bool shown);  // the remembered setting, at start
bool window_peers_ticked();               // the box, for the settings file (peers or not)
// " (recorded on GPU, date)" when the peers were measured on another GPU than the one `lab`
// shows (live, or the replayed recording's), else "".
std::string peers_recorded_note(const PeerFile& peers, const Lab& lab);
// The portable kernels' series for the speedup plot (model/portable.h), read once before the
// window opens: the portable/ folder of the replayed recording when it has one, else of the
// newest shipped recording (none: no such series). Fails only for a replayed recording's
// portable/ folder that cannot be used.
Status load_window_portable(const std::vector<std::string>& replay_paths);
void draw_views_panel(const Lab& lab);  // panel_views.cpp: the views, one tab each
// After the views of a frame (both panes of two views; `second_view` empty with one): the UI
// text-fit test's record of the frame (FUSIONLAB_TEXT_RECTS), when on.
void end_views_frame(const Lab& lab, const std::string& second_view);
std::vector<std::string> views_panel_tabs();  // the views' names in tab order
void draw_measurement_panel(const Lab& lab);  // panel_measurement.cpp

}  // namespace fl::gui
