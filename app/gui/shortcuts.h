// The keyboard: one table of shortcuts drives both what the keys do (the window's frame loop asks
// which shortcuts were pressed) and the list that F1 and Help > Keyboard shortcuts show, so the
// list can never leave a key out. Scripts press the same keys with `key NAME`.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace fl::gui {

enum class KeyAction {
  size_down,        // the size slider one step left (a quarter octave; replay: the recorded size)
  size_up,          // ... one step right
  level_down,       // the fusion slider one level down
  level_up,         // ... one level up
  pick_view,        // bring view N forward (Shortcut::view: 0..5, tab order)
  pause_animation,  // pause / resume the data-flow animation
  maximize_view,    // the views panel fills the window / back
  restore_view,     // back from a maximised view (and closes the shortcut list)
  split_views,      // two views at once / one
  open_recording,   // File > Open recording...
  save_session,     // File > Save session...
  export_trace,     // File > Export trace...
  screenshot,       // save the window as PNG at once
  full_screen,      // full screen / windowed
  show_shortcuts,   // the list of every shortcut
  quit,
};
constexpr int kKeyActionCount = static_cast<int>(KeyAction::quit) + 1;

// Modifier bits (as held, from ImGuiIO's KeyCtrl / KeyShift / KeyAlt).
constexpr int kModCtrl = 1, kModShift = 2, kModAlt = 4;

struct Shortcut {
  KeyAction action;
  int key;           // a GLFW key code (GLFW_KEY_*), as Dear ImGui 1.86's KeysDown[] indexes them
  int mods;          // the modifiers that must be held (exactly)
  const char* name;  // as shown and as a script's `key NAME` writes it: "Ctrl+O", "Left", "1"
  const char* what;  // one line for the F1 list
  int view = -1;     // pick_view: which view (0..5, tab order)
  bool repeats = false;    // held down, it repeats (the arrows)
  bool scriptable = true;  // `key NAME` may press it (not the file dialogs, full screen, quit)
};

// Every shortcut, in the order the F1 list shows them.
const std::vector<Shortcut>& shortcuts();

// The shortcuts pressed this frame. `pressed(key, repeat)` says whether a key went down (with
// repeat: or auto-repeated); `mods` the modifiers held. A shortcut with modifiers wins over the
// same key without: Ctrl+S is never also S.
std::vector<const Shortcut*> pressed_shortcuts(
    const std::function<bool(int key, bool repeat)>& pressed, int mods);

// The shortcut a script's `key NAME` names (case-insensitive); nullptr when none.
const Shortcut* find_shortcut(const std::string& name);

// The F1 list's rows, one per shortcut: its keys and what they do.
struct ShortcutRow {
  std::string keys;
  std::string what;
};
std::vector<ShortcutRow> shortcut_rows();

}  // namespace fl::gui
