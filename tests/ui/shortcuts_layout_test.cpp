// The keyboard table (app/gui/shortcuts.h) and the panel layout (app/gui/layout.h), as data: every
// action has a key, every key is listed in F1, no key does two things; panels never overlap,
// stay inside the window and keep their minimum sizes at every window size the app supports.
#include <gtest/gtest.h>

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "app/gui/layout.h"
#include "app/gui/script.h"
#include "app/measure/choices.h"
#include "app/gui/shortcuts.h"

namespace fl::gui {
namespace {

// ---- shortcuts

TEST(Shortcuts, EveryActionHasAKey) {
  std::set<int> actions;
  for (const Shortcut& s : shortcuts()) actions.insert(static_cast<int>(s.action));
  for (int a = 0; a < kKeyActionCount; ++a) {
    EXPECT_TRUE(actions.count(a)) << "KeyAction " << a << " has no key in shortcuts()";
  }
}

TEST(Shortcuts, TheF1ListShowsEveryShortcut) {
  const std::vector<ShortcutRow> rows = shortcut_rows();
  ASSERT_EQ(rows.size(), shortcuts().size());
  for (const Shortcut& s : shortcuts()) {
    bool listed = false;
    for (const ShortcutRow& row : rows)
      listed = listed || (row.keys == s.name && row.what == s.what);
    EXPECT_TRUE(listed) << s.name << " is not in the F1 list";
    EXPECT_GT(std::string(s.what).size(), 5u) << s.name << " says nothing about what it does";
  }
}

TEST(Shortcuts, TheIssuesKeysAreAllThere) {
  // Issue 15: arrows move the sliders, 1-6 pick a view, Space pauses, Ctrl+O/S/E open, save and
  // export a trace, F11 full screen, F1 lists the shortcuts; F maximises and Esc restores.
  const std::map<std::string, KeyAction> want = {
      {"Left", KeyAction::size_down},        {"Right", KeyAction::size_up},
      {"Down", KeyAction::level_down},       {"Up", KeyAction::level_up},
      {"Space", KeyAction::pause_animation}, {"Ctrl+O", KeyAction::open_recording},
      {"Ctrl+S", KeyAction::save_session},   {"Ctrl+E", KeyAction::export_trace},
      {"F11", KeyAction::full_screen},       {"F1", KeyAction::show_shortcuts},
      {"F", KeyAction::maximize_view},       {"Esc", KeyAction::restore_view},
      {"F12", KeyAction::screenshot},
  };
  for (const auto& [name, action] : want) {
    const Shortcut* s = find_shortcut(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->action, action) << name;
  }
  // 1-6: the views in tab order, the order scripts and --view name them.
  for (int v = 0; v < 6; ++v) {
    const Shortcut* s = find_shortcut(std::to_string(v + 1));
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->action, KeyAction::pick_view);
    EXPECT_EQ(s->view, v);
  }
  EXPECT_EQ(view_names().size(), 6u);
  EXPECT_EQ(find_shortcut("ctrl+o"), find_shortcut("Ctrl+O"));  // names are case-insensitive
  EXPECT_EQ(find_shortcut("Hyper+Z"), nullptr);
}

TEST(Shortcuts, NoKeyDoesTwoThings) {
  std::set<std::pair<int, int>> seen;
  std::set<std::string> names;
  for (const Shortcut& s : shortcuts()) {
    EXPECT_TRUE(seen.insert({s.key, s.mods}).second) << s.name << " is bound twice";
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " is named twice";
  }
}

TEST(Shortcuts, PressedKeysMatchOnlyWithTheirModifiers) {
  const Shortcut* ctrl_s = find_shortcut("Ctrl+S");
  const Shortcut* s = find_shortcut("S");
  ASSERT_TRUE(ctrl_s && s);
  ASSERT_EQ(ctrl_s->key, s->key);
  const auto only = [](int key) { return [key](int k, bool) { return k == key; }; };
  auto hit = pressed_shortcuts(only(s->key), kModCtrl);
  ASSERT_EQ(hit.size(), 1u);
  EXPECT_EQ(hit[0]->action, KeyAction::save_session);
  hit = pressed_shortcuts(only(s->key), 0);
  ASSERT_EQ(hit.size(), 1u);
  EXPECT_EQ(hit[0]->action, KeyAction::split_views);
  EXPECT_TRUE(pressed_shortcuts(only(s->key), kModCtrl | kModShift).empty());
  // Only the arrows repeat while held.
  const Shortcut* left = find_shortcut("Left");
  bool asked_repeat = false;
  pressed_shortcuts(
      [&](int k, bool repeat) {
        if (k == left->key) asked_repeat = repeat;
        return false;
      },
      0);
  EXPECT_TRUE(asked_repeat);
}

// Each key event carries its own modifiers (docs/VIEWS.md, "Keyboard"): Ctrl+S arriving in one
// frame saves and never also toggles two views, whatever is held when the frame starts.
TEST(Shortcuts, KeyEventsAreReadWithTheirOwnModifiers) {
  const Shortcut* ctrl_s = find_shortcut("Ctrl+S");
  const Shortcut* s = find_shortcut("S");
  ASSERT_TRUE(ctrl_s && s);
  // Ctrl down, S down (with Ctrl in its mods), S up and Ctrl up, all before one frame: GLFW
  // reports no press for the modifier keys as shortcuts, and S's press carries Ctrl.
  std::vector<const Shortcut*> hit =
      shortcuts_for({{GLFW_KEY_LEFT_CONTROL, kModCtrl, false}, {s->key, kModCtrl, false}});
  ASSERT_EQ(hit.size(), 1u);
  EXPECT_EQ(hit[0]->action, KeyAction::save_session);
  hit = shortcuts_for({{s->key, 0, false}});
  ASSERT_EQ(hit.size(), 1u);
  EXPECT_EQ(hit[0]->action, KeyAction::split_views);
  // Two presses in one frame: both, in order.
  hit = shortcuts_for({{s->key, 0, false}, {s->key, kModCtrl, false}});
  ASSERT_EQ(hit.size(), 2u);
  EXPECT_EQ(hit[0]->action, KeyAction::split_views);
  EXPECT_EQ(hit[1]->action, KeyAction::save_session);
  EXPECT_TRUE(shortcuts_for({{s->key, kModCtrl | kModAlt, false}}).empty());
  // A held S repeats nothing; a held arrow repeats.
  EXPECT_TRUE(shortcuts_for({{s->key, 0, true}}).empty());
  EXPECT_EQ(shortcuts_for({{GLFW_KEY_LEFT, 0, true}}).size(), 1u);
  // GLFW's modifier bits.
  EXPECT_EQ(mods_from_glfw(GLFW_MOD_CONTROL | GLFW_MOD_SHIFT), kModCtrl | kModShift);
  EXPECT_EQ(mods_from_glfw(GLFW_MOD_ALT | GLFW_MOD_SUPER), kModAlt);
}

// Ctrl+= / Ctrl+- / Ctrl+0 zoom; "Ctrl++" (Shift held) and the keypad's keys too; = alone is no
// shortcut, and Ctrl+0 is not the view key 0.
TEST(Shortcuts, ZoomKeys) {
  const auto action_of = [](KeyEvent e) {
    const auto hit = shortcuts_for({e});
    return hit.size() == 1 ? static_cast<int>(hit[0]->action) : -1;
  };
  EXPECT_EQ(action_of({GLFW_KEY_EQUAL, kModCtrl, false}), static_cast<int>(KeyAction::zoom_in));
  EXPECT_EQ(action_of({GLFW_KEY_EQUAL, kModCtrl | kModShift, false}),
            static_cast<int>(KeyAction::zoom_in));
  EXPECT_EQ(action_of({GLFW_KEY_KP_ADD, kModCtrl, false}), static_cast<int>(KeyAction::zoom_in));
  EXPECT_EQ(action_of({GLFW_KEY_MINUS, kModCtrl, false}), static_cast<int>(KeyAction::zoom_out));
  EXPECT_EQ(action_of({GLFW_KEY_KP_SUBTRACT, kModCtrl, false}),
            static_cast<int>(KeyAction::zoom_out));
  EXPECT_EQ(action_of({GLFW_KEY_0, kModCtrl, false}), static_cast<int>(KeyAction::zoom_reset));
  EXPECT_EQ(action_of({GLFW_KEY_EQUAL, 0, false}), -1);
  EXPECT_EQ(action_of({GLFW_KEY_MINUS, kModCtrl | kModShift, false}), -1);
  EXPECT_EQ(find_shortcut("ctrl+="), find_shortcut("Ctrl+="));
  EXPECT_TRUE(find_shortcut("Ctrl+=")->scriptable);
}

TEST(Shortcuts, ScriptsCannotOpenDialogsOrQuit) {
  for (const char* name : {"Ctrl+O", "Ctrl+S", "Ctrl+E", "F11", "F12", "Ctrl+Q"}) {
    ASSERT_NE(find_shortcut(name), nullptr) << name;
    EXPECT_FALSE(find_shortcut(name)->scriptable) << name;
  }
  for (const char* name : {"F", "Esc", "S", "1", "Left", "Up", "Space", "F1"}) {
    EXPECT_TRUE(find_shortcut(name)->scriptable) << name;
  }
}

// ---- layout

bool inside(const Box& inner, const Box& outer) {
  const float e = 0.5f;
  return inner.x >= outer.x - e && inner.y >= outer.y - e && inner.right() <= outer.right() + e &&
         inner.bottom() <= outer.bottom() + e;
}

bool overlap(const Box& a, const Box& b) {
  const float e = 0.5f;
  return a.x < b.right() - e && b.x < a.right() - e && a.y < b.bottom() - e && b.y < a.bottom() - e;
}

LayoutInput input_for(float w, float h, float fs = 16) {
  LayoutInput in;
  in.area = {8, 27, w - 16, h - 35};  // below a menu bar, inside the window padding
  in.font_size = fs;
  in.gap = fs / 2;
  in.title_height = fs * 1.6f;
  in.controls_height = fs * 9;
  in.gpu_height = [fs](float width) { return width < fs * 25 ? fs * 16 : fs * 13; };
  return in;
}

TEST(Layout, PanelsFitAndNeverOverlapAtEverySupportedSize) {
  for (const auto& [w, h] : std::vector<std::pair<float, float>>{
           {640, 480}, {1024, 768}, {1280, 720}, {1920, 1080}, {2560, 1440}, {3840, 2160}}) {
    for (bool split : {false, true}) {
      for (bool side : {false, true}) {
        LayoutInput in = input_for(w, h);
        in.panels.split = split;
        in.panels.side_by_side = side;
        const FrameLayout L = layout_frame(in);
        const std::vector<std::pair<const char*, Box>> boxes = {
            {"title", L.title},       {"gpu", L.gpu},     {"lessons", L.lessons},
            {"controls", L.controls}, {"views", L.views}, {"measurement", L.measurement},
            {"views2", L.views2}};
        for (const auto& [name, box] : boxes) {
          if (std::string(name) == "views2" && !split) {
            EXPECT_TRUE(box.empty());
            continue;
          }
          EXPECT_FALSE(box.empty()) << name << " at " << w << "x" << h;
          EXPECT_TRUE(inside(box, in.area)) << name << " leaves the window at " << w << "x" << h;
          for (const auto& [other, b] : boxes) {
            if (std::string(name) < std::string(other) &&
                !(std::string(other) == "views2" && !split)) {
              EXPECT_FALSE(overlap(box, b))
                  << name << " overlaps " << other << " at " << w << "x" << h;
            }
          }
        }
        // Minimums from 1024x768 up: the right column keeps 30 font heights, the views 9, the
        // measurement 5.
        if (w >= 1024) {
          EXPECT_GE(L.controls.w, in.font_size * kMinRightFonts - 1) << w;
          EXPECT_GE(L.gpu.w, in.font_size * kMinLeftFonts - 1) << w;
          EXPECT_GE(L.measurement.h, in.font_size * kMinMeasurementFonts - 1) << w;
          EXPECT_GE(L.views.h + (split && !side ? L.views2.h + in.gap : 0),
                    in.font_size * kMinViewsFonts - 1)
              << w;
        }
      }
    }
  }
}

TEST(Layout, FractionsMoveTheBoundariesAndAreClamped) {
  LayoutInput in = input_for(1920, 1080);
  in.panels.left_width = 0.25f;
  const FrameLayout narrow = layout_frame(in);
  in.panels.left_width = 0.45f;
  const FrameLayout wide = layout_frame(in);
  EXPECT_NEAR(narrow.gpu.w, 0.25f * in.area.w, 1.0f);
  EXPECT_NEAR(wide.gpu.w, 0.45f * in.area.w, 1.0f);
  EXPECT_GT(narrow.views.w, wide.views.w);
  // Dragged past the right column's minimum: it stops there.
  in.panels.left_width = 0.95f;
  const FrameLayout too_wide = layout_frame(in);
  EXPECT_NEAR(too_wide.controls.w, in.font_size * kMinRightFonts, 1.0f);
  // The measurement's share of the right column below the controls.
  in.panels.left_width = 0.34f;
  in.panels.measurement_height = 0.5f;
  const FrameLayout half = layout_frame(in);
  EXPECT_NEAR(half.measurement.h, half.views.h, 2.0f);
  // The splitters sit in the gaps, between the panels they move.
  EXPECT_NEAR(half.column_splitter.x, half.gpu.right(), 0.5f);
  EXPECT_NEAR(half.column_splitter.right(), half.controls.x, 0.5f);
  EXPECT_NEAR(half.measurement_splitter.y, half.views.bottom(), 0.5f);
  EXPECT_NEAR(half.measurement_splitter.bottom(), half.measurement.y, 0.5f);
  EXPECT_FLOAT_EQ(fraction_of(300, 1000, 0.05f, 0.95f), 0.3f);
  EXPECT_FLOAT_EQ(fraction_of(-50, 1000, 0.05f, 0.95f), 0.05f);
  EXPECT_FLOAT_EQ(fraction_of(5, 0, 0.05f, 0.95f), 0.05f);
}

TEST(Layout, AMaximisedViewFillsTheWindow) {
  LayoutInput in = input_for(1280, 720);
  in.maximized = true;
  const FrameLayout L = layout_frame(in);
  EXPECT_TRUE(L.maximized);
  EXPECT_FLOAT_EQ(L.views.w, in.area.w);
  EXPECT_FLOAT_EQ(L.views.h, in.area.h);
  EXPECT_TRUE(L.gpu.empty() && L.controls.empty() && L.measurement.empty() && L.lessons.empty());
  // Maximised and split: the two views share the whole window.
  in.panels.split = true;
  const FrameLayout both = layout_frame(in);
  EXPECT_NEAR(both.views.h + both.views2.h + in.gap, in.area.h, 1.0f);
  EXPECT_FALSE(overlap(both.views, both.views2));
}

TEST(Layout, TheSecondViewGetsItsShare) {
  LayoutInput in = input_for(2560, 1440);
  in.panels.split = true;
  in.panels.side_by_side = false;
  in.panels.split_fraction = 0.3f;
  const FrameLayout stacked = layout_frame(in);
  EXPECT_NEAR(stacked.views.h / (stacked.views.h + stacked.views2.h), 0.3f, 0.01f);
  EXPECT_FLOAT_EQ(stacked.views.w, stacked.views2.w);
  in.panels.side_by_side = true;
  const FrameLayout side = layout_frame(in);
  EXPECT_NEAR(side.views.w / (side.views.w + side.views2.w), 0.3f, 0.01f);
  EXPECT_FLOAT_EQ(side.views.h, side.views2.h);
}

// Two views one above the other (docs/VIEWS.md, "Two views at once"): each pane gets what its
// view needs, a timeline no more than its lanes (the plot above takes the rest), and the
// measurement panel gives way to make room, down to its title.
TEST(Layout, TwoViewsGetWhatTheirViewsNeed) {
  for (const auto& [w, h] : std::vector<std::pair<float, float>>{
           {1024, 768}, {1536, 864}, {1920, 1080}, {2560, 1440}}) {
    LayoutInput in = input_for(w, h);
    in.panels.split = true;
    in.panels.split_fraction = 0.5f;
    in.panes[0].min = 300;                       // a plot with its legend above it
    in.panes[1].min = in.panes[1].max = 200;     // a timeline's lanes
    const FrameLayout L = layout_frame(in);
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    EXPECT_GE(L.views.h, 300.0f);
    EXPECT_FLOAT_EQ(L.views2.h, 200.0f);
    EXPECT_GE(L.measurement.h, in.font_size * kMinMeasurementSplitFonts - 1);
    EXPECT_NEAR(L.views2.bottom() + in.gap, L.measurement_splitter.bottom(), 1.0f);
  }
  // A need the window cannot meet shares what there is in proportion; nothing overlaps.
  LayoutInput in = input_for(1024, 768);
  in.panels.split = true;
  in.panes[0].min = in.panes[1].min = 600;
  const FrameLayout L = layout_frame(in);
  EXPECT_NEAR(L.views.h, L.views2.h, 1.0f);
  EXPECT_LE(L.views2.bottom(), L.measurement.y);
}

}  // namespace
}  // namespace fl::gui
