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
  zoom_in,          // the content scale 10% larger (for a projector), remembered
  zoom_out,         // ... 10% smaller
  zoom_reset,       // ... back to 100%
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
  int keypad_key = -1;     // the same key on the keypad (GLFW_KEY_KP_*), or -1
  bool shift_too = false;  // also with Shift held ("Ctrl++" is Ctrl+Shift+= on most layouts)
};

// One key going down (or auto-repeating), with the modifiers GLFW gave that very event: a
// shortcut reads those, not what is held when the frame starts, so a Ctrl that arrives in the
// same frame as S (or is let go before the frame) still makes Ctrl+S.
struct KeyEvent {
  int key = 0;  // GLFW_KEY_*
  int mods = 0;  // kModCtrl | kModShift | kModAlt
  bool repeat = false;
};
// GLFW's modifier bits (GLFW_MOD_SHIFT, _CONTROL, _ALT; the rest ignored) as ours.
int mods_from_glfw(int glfw_mods);

// Every shortcut, in the order the F1 list shows them.
const std::vector<Shortcut>& shortcuts();

// The shortcuts pressed this frame. `pressed(key, repeat)` says whether a key went down (with
// repeat: or auto-repeated); `mods` the modifiers held. A shortcut with modifiers wins over the
// same key without: Ctrl+S is never also S.
std::vector<const Shortcut*> pressed_shortcuts(
    const std::function<bool(int key, bool repeat)>& pressed, int mods);

// The shortcuts the key events of a frame press, in order: each event matches a shortcut with
// its own modifiers (exactly, but for shift_too), a repeat only a shortcut that repeats.
std::vector<const Shortcut*> shortcuts_for(const std::vector<KeyEvent>& events);

// The shortcut a script's `key NAME` names (case-insensitive); nullptr when none.
const Shortcut* find_shortcut(const std::string& name);

// The F1 list's rows, one per shortcut: its keys and what they do.
struct ShortcutRow {
  std::string keys;
  std::string what;
};
std::vector<ShortcutRow> shortcut_rows();

}  // namespace fl::gui
