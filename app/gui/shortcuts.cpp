#include "app/gui/shortcuts.h"

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <cctype>

namespace fl::gui {

const std::vector<Shortcut>& shortcuts() {
  using A = KeyAction;
  // The view keys follow the tab order of app/gui/panel_views.cpp (app/measure/choices.h's
  // view_names()).
  static const std::vector<Shortcut> table = {
      {A::size_down, GLFW_KEY_LEFT, 0, "Left",
       "Tensor size one step smaller (a quarter octave; "
       "replaying: the next recorded size)",
       -1, true},
      {A::size_up, GLFW_KEY_RIGHT, 0, "Right", "Tensor size one step larger", -1, true},
      {A::level_down, GLFW_KEY_DOWN, 0, "Down", "Fusion slider one level down (towards unfused)",
       -1, true},
      {A::level_up, GLFW_KEY_UP, 0, "Up", "Fusion slider one level up (towards fused)", -1, true},
      {A::pick_view, GLFW_KEY_1, 0, "1", "View: Data flow", 0},
      {A::pick_view, GLFW_KEY_2, 0, "2", "View: Speedup vs size", 1},
      {A::pick_view, GLFW_KEY_3, 0, "3", "View: Bandwidth", 2},
      {A::pick_view, GLFW_KEY_4, 0, "4", "View: Timeline", 3},
      {A::pick_view, GLFW_KEY_5, 0, "5", "View: Memory", 4},
      {A::pick_view, GLFW_KEY_6, 0, "6", "View: Roofline", 5},
      {A::pause_animation, GLFW_KEY_SPACE, 0, "Space", "Pause or resume the data-flow animation"},
      {A::maximize_view, GLFW_KEY_F, 0, "F",
       "Maximise the view in front to the whole window, or restore it (or double-click its tab)"},
      {A::restore_view, GLFW_KEY_ESCAPE, 0, "Esc", "Restore a maximised view; close this list"},
      {A::split_views, GLFW_KEY_S, 0, "S", "Two views at once (e.g. flow above timeline), or one"},
      {A::open_recording, GLFW_KEY_O, kModCtrl, "Ctrl+O", "Open a recording...", -1, false, false},
      {A::save_session, GLFW_KEY_S, kModCtrl, "Ctrl+S", "Save the session...", -1, false, false},
      {A::export_trace, GLFW_KEY_E, kModCtrl, "Ctrl+E", "Export the current sweep as a trace...",
       -1, false, false},
      {A::screenshot, GLFW_KEY_F12, 0, "F12",
       "Save the window as a PNG with a caption strip, under a new name", -1, false, false},
      {A::full_screen, GLFW_KEY_F11, 0, "F11", "Full screen, or back to a window", -1, false,
       false},
      {A::show_shortcuts, GLFW_KEY_F1, 0, "F1", "This list of shortcuts"},
      {A::quit, GLFW_KEY_Q, kModCtrl, "Ctrl+Q",
       "Quit (the window's size and choices are remembered)", -1, false, false},
  };
  return table;
}

std::vector<const Shortcut*> pressed_shortcuts(const std::function<bool(int, bool)>& pressed,
                                               int mods) {
  std::vector<const Shortcut*> out;
  for (const Shortcut& s : shortcuts()) {
    if (s.mods == mods && pressed(s.key, s.repeats)) out.push_back(&s);
  }
  return out;
}

const Shortcut* find_shortcut(const std::string& name) {
  const auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string want = lower(name);
  for (const Shortcut& s : shortcuts()) {
    if (lower(s.name) == want) return &s;
  }
  return nullptr;
}

std::vector<ShortcutRow> shortcut_rows() {
  std::vector<ShortcutRow> rows;
  for (const Shortcut& s : shortcuts()) rows.push_back({s.name, s.what});
  return rows;
}

}  // namespace fl::gui
