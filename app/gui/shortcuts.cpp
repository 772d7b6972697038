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
      {A::zoom_in, GLFW_KEY_EQUAL, kModCtrl, "Ctrl+=",
       "Larger text and panels (10% a step; remembered), for a projector", -1, false, true,
       GLFW_KEY_KP_ADD, true},
      {A::zoom_out, GLFW_KEY_MINUS, kModCtrl, "Ctrl+-", "Smaller text and panels", -1, false,
       true, GLFW_KEY_KP_SUBTRACT},
      {A::zoom_reset, GLFW_KEY_0, kModCtrl, "Ctrl+0",
       "Text and panels back to 100% (of the monitor's scale and --scale)", -1, false, true,
       GLFW_KEY_KP_0},
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

int mods_from_glfw(int glfw_mods) {
  return ((glfw_mods & GLFW_MOD_CONTROL) ? kModCtrl : 0) |
         ((glfw_mods & GLFW_MOD_SHIFT) ? kModShift : 0) | ((glfw_mods & GLFW_MOD_ALT) ? kModAlt : 0);
}

std::vector<const Shortcut*> shortcuts_for(const std::vector<KeyEvent>& events) {
  std::vector<const Shortcut*> out;
  for (const KeyEvent& e : events) {
    for (const Shortcut& s : shortcuts()) {
      const bool key = e.key == s.key || (s.keypad_key >= 0 && e.key == s.keypad_key);
      const bool mods = e.mods == s.mods || (s.shift_too && e.mods == (s.mods | kModShift));
      if (key && mods && (!e.repeat || s.repeats)) {
        out.push_back(&s);
        break;
      }
    }
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
