// The window: GLFW + OpenGL 3.3 core (glad) + Dear ImGui 1.86, one full-window ImGui window
// holding the panels, and the --screenshot mode.
//
// [SECTION] window, OpenGL and ImGui setup (RAII)
// [SECTION] fonts and HiDPI
// [SECTION] the frame: where each panel goes
// [SECTION] screenshot mode: when to shoot
// [SECTION] run_gui
#include "app/gui/gui.h"

// glad first; GLFW must not pull in a GL header of its own.
#include <glad/gl.h>
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cfloat>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "app/gui/backend_choice.h"
#include "app/gui/caption.h"
#include "app/gui/file_dialog.h"
#include "app/gui/fonts.h"
#include "app/gui/layout.h"
#include "app/gui/lesson_text.h"
#include "app/gui/settings.h"
#include "app/gui/shortcuts.h"
#include "app/gui/widgets.h"
#include "app/gui/lab.h"
#include "app/gui/recovery.h"
#include "app/gui/panels.h"
#include "app/gui/screenshot.h"
#include "model/sizes.h"
#include "app/gui/window.h"
#include "model/caps.h"
#include "app/measure/choices.h"
#include "app/measure/export.h"
#include "app/measure/replay_backend.h"
#include "model/session_json.h"
#include "kernels/catalog.h"
#include "viz/caption.h"
#include "viz/speedup_view.h"
#include "viz/svg.h"
#include "viz/timeline_view.h"
#include "viz/view_util.h"

namespace fl {
namespace {

// ---- [SECTION] window, OpenGL and ImGui setup -----------------------------------------------

std::string g_glfw_error = "unknown GLFW error";

// Ctrl+C in the terminal or a desktop session ending (SIGINT, SIGTERM): the window closes as if
// its close button was pressed, so what it remembers is written (the loop wakes at least twice a
// second to see it).
volatile std::sig_atomic_t g_stop_requested = 0;
void request_stop(int) {
  g_stop_requested = 1;
}

void remember_glfw_error(int /*code*/, const char* description) {
  g_glfw_error = description ? description : "unknown GLFW error";
}

std::string one_line(std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return message;
}

// One line on stderr, whatever the message holds, and a failing exit code.
int fail(std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "fusionlab: %s\n", message.c_str());
  return 1;
}

std::string cannot_open_window_message() {
  return "cannot open a window: " + g_glfw_error +
         "; use a subcommand (lessons, bench) or run under Xvfb";
}

struct GlfwLibrary {
  bool ok = false;
  GlfwLibrary() {
    glfwSetErrorCallback(remember_glfw_error);
    ok = glfwInit() == GLFW_TRUE;
  }
  ~GlfwLibrary() {
    if (ok) glfwTerminate();
  }
};

struct Window {
  GLFWwindow* handle = nullptr;
  ~Window() {
    if (handle) glfwDestroyWindow(handle);
  }
};

struct ImGuiSession {
  bool glfw_backend = false, gl_backend = false;
  ImGuiSession() { ImGui::CreateContext(); }
  ~ImGuiSession() {
    if (gl_backend) ImGui_ImplOpenGL3_Shutdown();
    if (glfw_backend) ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
  }
};

// Where the window opens and how large: --size, else (scripts, screenshots) 1280x720, else
// about 80% of the primary monitor's work area, centred in it.
struct WindowPlacement {
  int width = 1280, height = 720;
  bool has_position = false;
  int x = 0, y = 0;
};

constexpr int kScriptedWidth = 1280, kScriptedHeight = 720;
constexpr float kWorkAreaShare = 0.8f;

// Whether (x, y, w, h) lies mostly on one of the monitors' work areas (a remembered place on a
// monitor that is gone is not used).
bool on_some_monitor(int x, int y, int w, int h) {
  int count = 0;
  GLFWmonitor** monitors = glfwGetMonitors(&count);
  for (int i = 0; i < count; ++i) {
    int mx = 0, my = 0, mw = 0, mh = 0;
    glfwGetMonitorWorkarea(monitors[i], &mx, &my, &mw, &mh);
    const int ix = std::max(0, std::min(x + w, mx + mw) - std::max(x, mx));
    const int iy = std::max(0, std::min(y + h, my + mh) - std::max(y, my));
    if (2LL * ix * iy >= 1LL * w * h) return true;
  }
  return false;
}

WindowPlacement window_placement(const GuiOptions& options, bool headless,
                                 const gui::Settings& remembered) {
  WindowPlacement p;
  if (options.width > 0 && options.height > 0) {
    p.width = options.width;
    p.height = options.height;
  } else if (remembered.width > 0 && remembered.height > 0) {
    p.width = remembered.width;
    p.height = remembered.height;
  } else if (headless) {
    p.width = kScriptedWidth;
    p.height = kScriptedHeight;
  }
  if (headless) return p;
  GLFWmonitor* monitor = glfwGetPrimaryMonitor();
  if (!monitor) return p;
  int wx = 0, wy = 0, ww = 0, wh = 0;
  glfwGetMonitorWorkarea(monitor, &wx, &wy, &ww, &wh);
  if (ww <= 0 || wh <= 0) return p;
  if ((options.width <= 0 || options.height <= 0) && remembered.width <= 0) {
    p.width = std::max(std::min(ww, 800), static_cast<int>(std::lround(ww * kWorkAreaShare)));
    p.height = std::max(std::min(wh, 600), static_cast<int>(std::lround(wh * kWorkAreaShare)));
  }
  p.has_position = true;
  if (remembered.has_position && on_some_monitor(remembered.x, remembered.y, p.width, p.height)) {
    p.x = remembered.x;
    p.y = remembered.y;
    return p;
  }
  p.x = wx + std::max(0, (ww - p.width) / 2);
  p.y = wy + std::max(0, (wh - p.height) / 2);
  return p;
}

// Why a picture of width x height cannot be taken on this screen; empty when it can.
std::string too_big_for_screen(int width, int height) {
  GLFWmonitor* monitor = glfwGetPrimaryMonitor();
  const GLFWvidmode* mode = monitor ? glfwGetVideoMode(monitor) : nullptr;
  if (!mode || (width <= mode->width && height <= mode->height)) return "";
  return "a " + std::to_string(width) + "x" + std::to_string(height) +
         " window does not fit on this " + std::to_string(mode->width) + "x" +
         std::to_string(mode->height) +
         " screen; under Xvfb give it a larger one: xvfb-run -a -s "
         "\"-screen 0 2560x1440x24\"";
}

// ---- [SECTION] fonts and HiDPI --------------------------------------------------------------

constexpr float kBaseFontSize = 16.0f;

float content_scale(GLFWwindow* window) {
  float xs = 1, ys = 1;
  glfwGetWindowContentScale(window, &xs, &ys);
  const float s = std::max(xs, ys);
  return std::isfinite(s) ? std::clamp(s, 1.0f, 4.0f) : 1.0f;
}

// The style and the font at `scale` (the monitor's content scale times --scale). Called again
// when the window moves to a monitor of another scale: the style starts afresh (ScaleAllSizes
// multiplies what is there) and the font atlas is rebuilt.
void setup_style_and_fonts(float scale, bool announce) {
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the settings file keeps what we remember; never drop imgui.ini
  ImGui::GetStyle() = ImGuiStyle();
  ImGui::StyleColorsDark();
  ImGuiStyle& style = ImGui::GetStyle();
  style.WindowRounding = 0;
  style.ChildRounding = 4;
  style.FrameRounding = 3;
  style.ScaleAllSizes(scale);

  io.Fonts->Clear();
  static std::string how;
  static const std::string font_file = gui::find_ui_font(&how);  // asked once per process
  ImFont* font = nullptr;
  if (!font_file.empty()) {
    ImFontConfig config;
    config.OversampleH = 2;
    font = io.Fonts->AddFontFromFileTTF(font_file.c_str(), std::round(kBaseFontSize * scale),
                                        &config, gui::ui_glyph_ranges());
  }
  if (!font) {
    ImFontConfig fallback;
    fallback.SizePixels = std::round(13.0f * scale);
    io.Fonts->AddFontDefault(&fallback);
    if (announce) {
      std::fprintf(stderr,
                   "fusionlab: no TrueType font found through fontconfig (fc-match 'DejaVu "
                   "Sans'); using Dear ImGui's built-in font (install fonts-dejavu-core)\n");
    }
  }
}

// ---- [SECTION] the frame --------------------------------------------------------------------
//
// File  View  Help  [Screenshot (F12)]  comparing with ...  last file action's result
// +-- left column ---------+-+-- right column -------------------------------+
// | title                  | | controls (size, level shown, precision, cache)|
// | GPU panel              | | views (speedup vs size, bandwidth, ...)       |
// | lessons + teaching text| |-----------------------------------------------|
// |                        | | current measurement                           |
// +------------------------+-+-----------------------------------------------+
// The gaps are splitters (app/gui/layout.h); F or a double-click on the tab bar maximises the
// views panel; S shows two views at once.

// What the menu bar (or a shortcut) asked for this frame.
struct MenuChoice {
  bool dialog = false;  // open the path popup for `action`
  gui::FileAction action = gui::FileAction::save_session;
  bool quick_shot = false;  // the Screenshot button: save at once under a new name
};

// The layout and the window-level switches that keys and menus change; the panel sizes and the
// second view are remembered in the settings file.
struct WindowUi {
  gui::PanelSizes panels;
  bool maximized = false;           // the views panel fills the window
  bool show_shortcuts = false;      // the F1 list
  bool toggle_full_screen = false;  // F11, View > Full screen: the frame loop does it
  bool full_screen = false;
  bool quit = false;
  std::string second_request;  // bring this view forward in the second pane at the next frame
  std::string second_front = "timeline";  // the second pane's view at the last frame
  // Two views: the height each pane's view asked for at the last frame (viz::take_view_need),
  // and which view asked.
  float pane_asked[2] = {0, 0};
  std::string pane_asked_by[2];
  int zoom_steps = 0;       // Ctrl+= / Ctrl+- this frame
  bool zoom_reset = false;  // Ctrl+0
};

// The menu bar's right-hand line: the last file action's result, for a while.
struct Message {
  std::string text;
  bool error = false;
  double until = 0;
};

constexpr const char* kKeysHelp =
    "F1 lists every keyboard shortcut. F12 saves a screenshot of the whole window, with a caption "
    "strip (GPU, lesson, size, level, precision, cache mode, date), as "
    "fusionlab-<lesson>-<date>-<time>.png in the current folder; an existing file is never "
    "replaced.\n"
    "File > Screenshot... picks the name, only the view in front, and the caption.\n"
    "File > Save session..., Open recording..., Compare with..., Export trace..., Export CSV...: "
    "the desktop's file dialog where there is one (zenity), else a path field; nothing is "
    "overwritten without asking.\n"
    "Drag the gaps between panels to resize them (double-click a gap to reset it). The window "
    "remembers its size, place, lesson, view and panels (fusionlab --reset-settings forgets).\n"
    "Every control can also be driven by a script: fusionlab --script FILE (docs/SCRIPTING.md).";

void toggle_split(WindowUi& ui) {
  ui.panels.split = !ui.panels.split;
  if (ui.panels.split) ui.second_request = ui.panels.second_view;
}

void draw_file_menu(gui::Lab& lab, WindowUi& ui, MenuChoice* choice) {
  if (!ImGui::BeginMenu("File")) return;
  const auto item = [&](const char* label, const char* keys, gui::FileAction action,
                        const char* tip, bool enabled = true) {
    if (ImGui::MenuItem(label, keys, false, enabled)) {
      choice->dialog = true;
      choice->action = action;
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
  };
  item("Save session...", "Ctrl+S", gui::FileAction::save_session,
       "The GPU's facts and every measurement so far, as session JSON (replay it with --replay).");
  item("Open recording...", "Ctrl+O", gui::FileAction::open_recording,
       "Replay a session file or a folder of them (one GPU) instead of this backend.");
  item("Compare with...", nullptr, gui::FileAction::compare,
       "Overlay a second recording (another GPU, another day) on the speedup and bandwidth plots.");
  if (ImGui::MenuItem("Stop comparing", nullptr, false, lab.comparison() != nullptr)) {
    lab.stop_comparing();
  }
  ImGui::Separator();
  item("Export trace...", "Ctrl+E", gui::FileAction::export_trace,
       "The current sweep's kernel launches as a Chrome trace for ui.perfetto.dev.");
  item("Export CSV...", nullptr, gui::FileAction::export_csv,
       "The current sweep: one row per size, level and launch.");
  ImGui::Separator();
  item("Screenshot...", nullptr, gui::FileAction::screenshot,
       "Choose the name, the whole window or only the view in front, and the caption. "
       "F12 saves one at once.");
  ImGui::Separator();
  if (ImGui::MenuItem("Quit", "Ctrl+Q")) ui.quit = true;
  ImGui::EndMenu();
}

void draw_view_and_help_menus(WindowUi& ui) {
  if (ImGui::BeginMenu("View")) {
    ImGui::MenuItem("Maximise the views panel", "F", &ui.maximized);
    if (ImGui::MenuItem("Two views at once", "S", ui.panels.split)) toggle_split(ui);
    ImGui::MenuItem("Two views side by side", nullptr, &ui.panels.side_by_side, ui.panels.split);
    if (ImGui::MenuItem("Full screen", "F11", ui.full_screen)) ui.toggle_full_screen = true;
    ImGui::Separator();
    if (ImGui::MenuItem("Reset panel sizes")) {
      const gui::PanelSizes defaults;
      ui.panels.left_width = defaults.left_width;
      ui.panels.measurement_height = defaults.measurement_height;
      ui.panels.split_fraction = defaults.split_fraction;
    }
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    if (ImGui::MenuItem("Keyboard shortcuts", "F1")) ui.show_shortcuts = true;
    ImGui::Separator();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 34.0f);
    ImGui::TextUnformatted(kKeysHelp);
    ImGui::PopTextWrapPos();
    ImGui::EndMenu();
  }
}

// Right of the menus: the Screenshot button, Restore when maximised, what is compared and the
// last file action's result.
void draw_menu_bar_status(gui::Lab& lab, WindowUi& ui, const Message& message, double now,
                          MenuChoice* choice) {
  if (ImGui::SmallButton("Screenshot (F12)")) choice->quick_shot = true;
  gui::record_widget_label("Screenshot (F12)", gui::LabelPlace::in_frame);
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "Saves the whole window with a caption strip as a new PNG in the current "
        "folder (F12 does the same).");
  }
  if (ui.maximized) {
    ImGui::SameLine(0, ImGui::GetFontSize());
    if (ImGui::SmallButton("Restore panels (F / Esc)")) ui.maximized = false;
    gui::record_widget_label("Restore panels (F / Esc)", gui::LabelPlace::in_frame);
  }
  if (const gui::ComparedSeries compared = lab.compared_series(); compared.found) {
    ImGui::SameLine(0, ImGui::GetFontSize());
    const ImVec4 c = ImGui::ColorConvertU32ToFloat4(viz::kCompareColor);
    ImGui::TextColored(c, "comparing with %s (dashed)", compared.label.c_str());
  } else if (lab.comparison()) {
    ImGui::SameLine(0, ImGui::GetFontSize());
    ImGui::TextDisabled(
        "comparing with %s, %s: no %s in it", lab.comparison()->summary.device.name.c_str(),
        lab.comparison()->summary.date_text().c_str(), lab.lesson().info().id.c_str());
  }
  if (!message.text.empty() && now < message.until) {
    ImGui::SameLine(0, ImGui::GetFontSize());
    ImGui::TextColored(
        message.error ? ImVec4(1.0f, 0.45f, 0.4f, 1.0f) : ImVec4(0.55f, 0.85f, 0.55f, 1.0f), "%s",
        message.text.c_str());
  }
}

MenuChoice draw_menu_bar(gui::Lab& lab, WindowUi& ui, const Message& message, double now) {
  MenuChoice choice;
  if (!ImGui::BeginMainMenuBar()) return choice;
  draw_file_menu(lab, ui, &choice);
  draw_view_and_help_menus(ui);
  draw_menu_bar_status(lab, ui, message, now, &choice);
  ImGui::EndMainMenuBar();
  return choice;
}

// The F1 list, drawn from the same table that handles the keys (app/gui/shortcuts.h).
void draw_shortcuts_window(WindowUi& ui) {
  if (!ui.show_shortcuts) return;
  const float fs = ImGui::GetFontSize();
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x + viewport->WorkSize.x * 0.5f,
                                 viewport->WorkPos.y + viewport->WorkSize.y * 0.5f),
                          ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSizeConstraints(
      ImVec2(0, 0), ImVec2(viewport->WorkSize.x * 0.95f, viewport->WorkSize.y * 0.95f));
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_AlwaysAutoResize;
  ImGui::SetNextWindowBgAlpha(1.0f);  // opaque: the panels behind must not show through
  if (ImGui::Begin("Keyboard shortcuts (F1, Esc closes)", &ui.show_shortcuts, flags)) {
    const float what_w = std::min(fs * 30.0f, viewport->WorkSize.x * 0.9f - fs * 7.0f);
    if (ImGui::BeginTable("##shortcuts", 2,
                          ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV)) {
      ImGui::TableSetupColumn("key", ImGuiTableColumnFlags_WidthFixed, fs * 5.0f);
      ImGui::TableSetupColumn("what", ImGuiTableColumnFlags_WidthFixed, what_w);
      for (const gui::ShortcutRow& row : gui::shortcut_rows()) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1.0f), "%s", row.keys.c_str());
        ImGui::TableNextColumn();
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextUnformatted(row.what.c_str());
        ImGui::PopTextWrapPos();
      }
      ImGui::EndTable();
    }
    ImGui::TextDisabled(
        "Keys act when no text field has the focus. Scripts press them with `key NAME`.");
  }
  ImGui::End();
}

gui::PixelRect to_pixels(const gui::Box& box) {
  const ImVec2 scale = ImGui::GetIO().DisplayFramebufferScale;
  return gui::PixelRect{static_cast<int>(std::lround(box.x * scale.x)),
                        static_cast<int>(std::lround(box.y * scale.y)),
                        static_cast<int>(std::lround(box.w * scale.x)),
                        static_cast<int>(std::lround(box.h * scale.y))};
}

// A child window exactly over `box`.
bool begin_panel(const char* id, const gui::Box& box, bool border,
                 ImGuiWindowFlags flags = ImGuiWindowFlags_None) {
  ImGui::SetCursorScreenPos(ImVec2(box.x, box.y));
  return ImGui::BeginChild(id, ImVec2(std::max(1.0f, box.w), std::max(1.0f, box.h)), border, flags);
}

// A double-click on a views panel's tab bar maximises it (or restores it).
void maximise_on_tab_double_click(const gui::Box& box, WindowUi& ui) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const ImVec2 a(box.x, box.y);
  const ImVec2 b(box.right(), box.y + style.WindowPadding.y + ImGui::GetFrameHeight());
  if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left) &&
      ImGui::IsMouseHoveringRect(a, b, false)) {
    ui.maximized = !ui.maximized;
  }
}

// What the view `name` needs in a pane of two views (app/gui/layout.h, PaneNeed), one above
// the other: the pane's chrome (padding, tab bar, title and its rule) plus the view's content.
// A plot keeps a frame of viz::kPlotMinFrameFonts lines (three or more labelled y ticks), its axes'
// labels and titles and two rows of legend above the frame; the timeline takes the height of its
// lanes and no more; the flow view its boxes with a few tensors each.
gui::LayoutInput::PaneNeed pane_need(const std::string& name, bool phases) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float fs = ImGui::GetFontSize(), line = ImGui::GetTextLineHeightWithSpacing();
  const float chrome = style.WindowPadding.y * 2 + ImGui::GetFrameHeightWithSpacing() + line +
                       style.ItemSpacing.y * 2 + 2;
  gui::LayoutInput::PaneNeed need;
  if (name == "timeline") {
    // The level line with the "phases" box, the launches' strip (draw_timeline's least height).
    need.min = chrome + ImGui::GetFrameHeightWithSpacing() + fs * viz::kTimelineMinFonts +
               style.ItemSpacing.y;
    if (phases) {
      need.min += fs * 10;  // one phase lane block at its least
    } else {
      need.max = need.min + fs * (viz::kTimelineTitledFonts - viz::kTimelineMinFonts);
    }
  } else if (name == "flow") {
    need.min = chrome + fs * 17;
  } else {
    // speedup (its "PyTorch peers" line), bandwidth, memory, roofline.
    const float plot = fs * (1.6f + 2.9f + viz::kPlotMinFrameFonts) + fs * 1.35f * 2 + fs * 0.2f;
    need.min = chrome + ImGui::GetFrameHeightWithSpacing() + plot;
  }
  need.min = std::ceil(need.min);
  need.max = std::ceil(need.max);
  return need;
}

// Where each panel goes this frame (app/gui/layout.h).
gui::LayoutInput frame_layout_input(const gui::Lab& lab, const WindowUi& ui) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  const ImGuiStyle& style = ImGui::GetStyle();
  const float line = ImGui::GetTextLineHeightWithSpacing();
  gui::LayoutInput in;
  in.area = {viewport->WorkPos.x + style.WindowPadding.x,
             viewport->WorkPos.y + style.WindowPadding.y,
             viewport->WorkSize.x - 2 * style.WindowPadding.x,
             viewport->WorkSize.y - 2 * style.WindowPadding.y};
  in.font_size = ImGui::GetFontSize();
  in.gap = style.ItemSpacing.x;
  in.title_height = line + style.ItemSpacing.y;
  // The controls: title, size, fusion, precision/cache, sweep + status (and the note line).
  in.controls_height = line * (lab.note.empty() ? 6.4f : 7.4f) + style.WindowPadding.y * 2;
  in.gpu_height = [&lab](float width) { return gui::gpu_panel_height(lab, width); };
  in.panels = ui.panels;
  in.maximized = ui.maximized;
  if (ui.panels.split && !ui.panels.side_by_side) {
    const std::string fronts[2] = {lab.front_view, ui.second_front};
    for (int i = 0; i < 2; ++i) {
      in.panes[i] = pane_need(fronts[i], lab.phases());
      // What the view itself asked for at the last frame, when it is still in front.
      if (ui.pane_asked_by[i] == fronts[i] && ui.pane_asked[i] > 0) {
        in.panes[i].min = std::ceil(ui.pane_asked[i]);
        // A timeline's lanes, with the axis title where there is room.
        if (in.panes[i].max > 0) {
          in.panes[i].max = in.panes[i].min + ImGui::GetFontSize() * (viz::kTimelineTitledFonts -
                                                                      viz::kTimelineMinFonts);
        }
      }
    }
  } else if (ui.panels.split) {
    in.panes[0].min = in.panes[1].min = in.font_size * 22;  // a plot's readable width
  }
  return in;
}

// The title and every panel but the views.
void draw_side_panels(gui::Lab& lab, const gui::FrameLayout& L, double now) {
  ImGui::SetCursorScreenPos(ImVec2(L.title.x, L.title.y));
  ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1.0f), "Fusion Lab");
  ImGui::SameLine();
  gui::text_fitted(lab.replay() ? "kernel fusion, replayed from a recording"
                                : "kernel fusion, measured live on your GPU",
                   L.title.right() - ImGui::GetCursorScreenPos().x, true);
  if (begin_panel("##gpu", L.gpu, true)) gui::draw_gpu_panel(lab);
  ImGui::EndChild();
  if (begin_panel("##lesson", L.lessons, true)) gui::draw_lesson_panel(lab, now);
  ImGui::EndChild();
  if (begin_panel("##controls", L.controls, true, ImGuiWindowFlags_NoScrollbar)) {
    gui::draw_controls_panel(lab, now);
  }
  ImGui::EndChild();
  if (begin_panel("##measurement", L.measurement, true)) gui::draw_measurement_panel(lab);
  ImGui::EndChild();
}

// The views: the first pane is the one the keys, --view and the screenshots mean.
void draw_view_panes(gui::Lab& lab, WindowUi& ui, const gui::FrameLayout& L,
                     gui::PixelRect* views_px) {
  *views_px = to_pixels(L.views);
  maximise_on_tab_double_click(L.views, ui);
  viz::take_view_need();
  viz::view_need_asked() = ui.panels.split && !ui.panels.side_by_side;
  if (begin_panel("##plot", L.views, true, ImGuiWindowFlags_NoScrollbar))
    gui::draw_views_panel(lab);
  ImGui::EndChild();
  ui.pane_asked[0] = viz::take_view_need();
  ui.pane_asked_by[0] = lab.front_view;
  if (L.views2.empty()) {
    gui::end_views_frame(lab, "");
    return;
  }
  // The second pane is the same panel with its own tab bar (its own ImGui id); the Lab's
  // "requested" and "front" views belong to the first pane, so they are set for the second
  // one's draw and put back after it.
  const std::string first_front = lab.front_view, pending = lab.requested_view;
  lab.requested_view = ui.second_request;
  ui.second_request.clear();
  maximise_on_tab_double_click(L.views2, ui);
  if (begin_panel("##plot2", L.views2, true, ImGuiWindowFlags_NoScrollbar)) {
    gui::draw_views_panel(lab);
  }
  ImGui::EndChild();
  ui.pane_asked[1] = viz::take_view_need();
  ui.pane_asked_by[1] = lab.front_view;
  ui.second_front = lab.front_view;
  ui.panels.second_view = ui.second_front;
  lab.front_view = first_front;
  lab.requested_view = pending;
  gui::end_views_frame(lab, ui.second_front);
}

// The splitters over the gaps, drawn last so they get the mouse before the panels' edges.
void draw_splitters(WindowUi& ui, const gui::FrameLayout& L, const gui::LayoutInput& in) {
  float at = 0;
  bool reset = false;
  if (!L.maximized) {
    at = L.column_splitter.x;
    if (gui::splitter("##split_columns", L.column_splitter, true, &at, &reset)) {
      ui.panels.left_width = gui::fraction_of(at - in.area.x, in.area.w, 0.05f, 0.95f);
    }
    if (reset) ui.panels.left_width = gui::PanelSizes().left_width;
    reset = false;
    at = L.measurement_splitter.y;
    if (gui::splitter("##split_measurement", L.measurement_splitter, false, &at, &reset)) {
      const float top = L.views.y, bottom = L.measurement.bottom();
      const float rest = bottom - top - in.gap;
      ui.panels.measurement_height = gui::fraction_of(bottom - (at + in.gap), rest, 0.05f, 0.95f);
    }
    if (reset) ui.panels.measurement_height = gui::PanelSizes().measurement_height;
    reset = false;
  }
  if (!L.views2.empty()) {
    const bool side = ui.panels.side_by_side;
    at = side ? L.views_splitter.x : L.views_splitter.y;
    if (gui::splitter("##split_views", L.views_splitter, side, &at, &reset)) {
      const float start = side ? L.views.x : L.views.y;
      const float total =
          side ? L.views2.right() - L.views.x - in.gap : L.views2.bottom() - L.views.y - in.gap;
      ui.panels.split_fraction = gui::fraction_of(at - start, total, 0.1f, 0.9f);
    }
    if (reset) ui.panels.split_fraction = gui::PanelSizes().split_fraction;
  }
}

// Draws the panels; *views_px is the (first) views panel, tab bar and view, in framebuffer
// pixels.
void draw_frame(gui::Lab& lab, WindowUi& ui, double now, gui::PixelRect* views_px) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  const ImGuiWindowFlags flags =
      ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
      ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoScrollWithMouse;
  ImGui::Begin("Fusion Lab", nullptr, flags);
  const gui::LayoutInput in = frame_layout_input(lab, ui);
  const gui::FrameLayout L = gui::layout_frame(in);
  if (!L.maximized) draw_side_panels(lab, L, now);
  draw_view_panes(lab, ui, L, views_px);
  draw_splitters(ui, L, in);
  ImGui::End();
}

// ---- [SECTION] keyboard ---------------------------------------------------------------------

// The size one step from the current one: the next recorded size when replaying, else a quarter
// octave (as the slider's steps).
int64_t stepped_size(const gui::Lab& lab, int direction) {
  const std::vector<int64_t>& stops = lab.recorded_sizes();
  const int64_t size = lab.size();
  if (!stops.empty()) {
    size_t nearest = 0;
    for (size_t i = 1; i < stops.size(); ++i) {
      if (std::fabs(std::log2(double(stops[i])) - std::log2(double(size))) <
          std::fabs(std::log2(double(stops[nearest])) - std::log2(double(size)))) {
        nearest = i;
      }
    }
    const long next = std::clamp<long>(static_cast<long>(nearest) + direction, 0,
                                       static_cast<long>(stops.size()) - 1);
    return stops[static_cast<size_t>(next)];
  }
  const SizeAxis& axis = lab.lesson().info().size_axis;
  double octaves = std::round(std::log2(double(std::max<int64_t>(1, size))) * 4.0) / 4.0;
  for (int tries = 0; tries < 8; ++tries) {
    octaves += 0.25 * direction;
    const int64_t value = std::clamp<int64_t>(std::llround(std::exp2(octaves)), axis.min, axis.max);
    if (value != size) return value;
  }
  return size;
}

// What a shortcut does; the compiler's -Wswitch keeps every KeyAction handled.
void apply_shortcut(const gui::Shortcut& key, gui::Lab& lab, WindowUi& ui, MenuChoice* choice,
                    double now) {
  switch (key.action) {
    case gui::KeyAction::size_down:
    case gui::KeyAction::size_up: {
      const int64_t size = stepped_size(lab, key.action == gui::KeyAction::size_up ? 1 : -1);
      if (size != lab.size()) {
        lab.set_size(size, now);  // measured once it rests, as when the slider is dragged
      }
      break;
    }
    case gui::KeyAction::level_down:
      lab.set_shown_level(std::max(0, lab.shown_level() - 1));
      break;
    case gui::KeyAction::level_up:
      lab.set_shown_level(std::min(lab.top_level(), lab.shown_level() + 1));
      break;
    case gui::KeyAction::pick_view: {
      const auto& names = view_names();
      if (key.view >= 0 && key.view < static_cast<int>(names.size())) {
        lab.requested_view = names[static_cast<size_t>(key.view)];
      }
      break;
    }
    case gui::KeyAction::pause_animation:
      lab.flow_pause_toggle = true;
      break;
    case gui::KeyAction::maximize_view:
      ui.maximized = !ui.maximized;
      break;
    case gui::KeyAction::restore_view:
      if (ui.show_shortcuts) {
        ui.show_shortcuts = false;
      } else {
        ui.maximized = false;
      }
      break;
    case gui::KeyAction::split_views:
      toggle_split(ui);
      break;
    case gui::KeyAction::open_recording:
      choice->dialog = true;
      choice->action = gui::FileAction::open_recording;
      break;
    case gui::KeyAction::save_session:
      choice->dialog = true;
      choice->action = gui::FileAction::save_session;
      break;
    case gui::KeyAction::export_trace:
      choice->dialog = true;
      choice->action = gui::FileAction::export_trace;
      break;
    case gui::KeyAction::screenshot:
      choice->quick_shot = true;
      break;
    case gui::KeyAction::full_screen:
      ui.toggle_full_screen = true;
      break;
    case gui::KeyAction::show_shortcuts:
      ui.show_shortcuts = !ui.show_shortcuts;
      break;
    case gui::KeyAction::zoom_in:
      ++ui.zoom_steps;
      break;
    case gui::KeyAction::zoom_out:
      --ui.zoom_steps;
      break;
    case gui::KeyAction::zoom_reset:
      ui.zoom_reset = true;
      ui.zoom_steps = 0;
      break;
    case gui::KeyAction::quit:
      ui.quit = true;
      break;
  }
}

// The key events GLFW delivered since the last frame, each with its own modifiers
// (gui::KeyEvent); the window's key callback fills it, Dear ImGui's backend chains to it.
std::vector<gui::KeyEvent>& key_events() {
  static std::vector<gui::KeyEvent> events;
  return events;
}

void on_key(GLFWwindow*, int key, int, int action, int mods) {
  if (action != GLFW_PRESS && action != GLFW_REPEAT) return;
  if (key_events().size() < 256) {
    key_events().push_back({key, gui::mods_from_glfw(mods), action == GLFW_REPEAT});
  }
}

// The keys pressed since the last frame (after ImGui::NewFrame), each read with the modifiers of
// its own event, unless a text field or a popup has them.
void handle_keys(gui::Lab& lab, WindowUi& ui, MenuChoice* choice, double now) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || ImGui::IsPopupOpen("", ImGuiPopupFlags_AnyPopupId)) return;
  for (const gui::Shortcut* key : gui::shortcuts_for(key_events())) {
    apply_shortcut(*key, lab, ui, choice, now);
  }
}

// ---- [SECTION] file actions (the File menu and scripts) --------------------------------------

std::string sweep_words(const gui::Lab& lab) {
  return lab.lesson().info().id + " in " + to_string(lab.precision()) + " with a " +
         to_string(lab.cache()) + " L2";
}

// Saves, exports, opens or compares; one sentence on failure. `why_open` says who opened a
// recording (shown in the replay banner).
Status run_file_action(gui::FileAction action, const std::string& path, gui::Lab& lab, double now,
                       const std::string& why_open) {
  switch (action) {
    case gui::FileAction::save_session: {
      const Session session = lab.session_snapshot();
      if (session.measurements.empty()) {
        return Status::Error("Nothing is measured yet, so there is no session to save.");
      }
      return save_session(session, path);
    }
    case gui::FileAction::export_trace: {
      Session sweep = lab.session_snapshot();
      sweep.measurements = lab.sweep_measurements();
      if (sweep.measurements.empty()) {
        return Status::Error("Nothing is measured yet for " + sweep_words(lab) +
                             ": sweep or move the size slider first.");
      }
      TraceOptions trace;
      trace.peers = gui::window_peers_shown() ? gui::window_peers() : nullptr;
      return export_trace(sweep, path, trace);
    }
    case gui::FileAction::export_csv: {
      Session sweep = lab.session_snapshot();  // the GPU, driver and date columns
      sweep.measurements = lab.sweep_measurements();
      if (sweep.measurements.empty()) {
        return Status::Error("Nothing is measured yet for " + sweep_words(lab) +
                             ": sweep or move the size slider first.");
      }
      // The PyTorch peers follow our rows when the plots show them.
      return export_csv(sweep, path, {}, gui::window_peers_shown() ? gui::window_peers() : nullptr);
    }
    case gui::FileAction::open_recording:
      return lab.open_recording(gui::resolve_recording_paths(path), why_open, now);
    case gui::FileAction::compare:
      return lab.compare_with(gui::resolve_recording_paths(path));
    case gui::FileAction::screenshot:
      break;  // needs a frame: the window takes it
  }
  return Status::Ok();
}

// A file name in the current folder that does not exist yet: base + ext, else base-2 + ext, ...
std::string unused_name(const std::string& base, const std::string& ext) {
  std::error_code ec;
  std::string name = base + ext;
  for (int n = 2; std::filesystem::exists(name, ec) && n < 10000; ++n) {
    name = base + "-" + std::to_string(n) + ext;
  }
  return name;
}

std::string default_path(gui::FileAction action, const gui::Lab& lab, bool view_only) {
  const std::string stamp = gui::local_time_stamp();
  const std::string sweep =
      lab.lesson().info().id + "-" + to_string(lab.precision()) + "-" + to_string(lab.cache());
  switch (action) {
    case gui::FileAction::save_session:
      return unused_name("fusionlab-session-" + stamp, ".json");
    case gui::FileAction::export_trace:
      return unused_name("fusionlab-trace-" + sweep + "-" + stamp, ".json");
    case gui::FileAction::export_csv:
      return unused_name("fusionlab-" + sweep + "-" + stamp, ".csv");
    case gui::FileAction::screenshot:
      return unused_name("fusionlab-" + lab.lesson().info().id +
                             (view_only ? "-" + lab.front_view : std::string()) + "-" + stamp,
                         ".png");
    case gui::FileAction::open_recording:
    case gui::FileAction::compare: {
      const std::string assets = gui::find_assets_folder();
      return assets.empty() ? std::string() : assets + "/recordings/";
    }
  }
  return "";
}

// A picture to take once the frame is drawn.
struct ShotRequest {
  std::string path;
  bool view_only = false;
  bool caption = true;
};

// Reads this frame (whole or the views panel), adds the caption strip below it and saves it.
// The frame's draw data is rendered again afterwards, so the back buffer is the frame's again.
Status take_shot(const ShotRequest& shot, int fb_w, int fb_h, gui::PixelRect views_px,
                 const gui::Lab& lab) {
  glFinish();
  gui::PixelRect rect = shot.view_only ? views_px : gui::PixelRect{0, 0, fb_w, fb_h};
  std::vector<uint8_t> rgb;
  if (Status st = gui::read_back_region(&rect, fb_w, fb_h, &rgb); !st.ok()) return st;
  int height = rect.h;
  if (shot.caption) {
    ImFont* font = ImGui::GetIO().Fonts->Fonts.empty() ? nullptr : ImGui::GetIO().Fonts->Fonts[0];
    const float font_px = font ? font->FontSize : 16.0f;
    const auto measure = [&](const std::string& text) {
      return font ? font->CalcTextSizeA(font_px, FLT_MAX, 0, text.c_str()).x
                  : 0.55f * font_px * static_cast<float>(text.size());
    };
    const viz::CaptionLayout layout =
        viz::layout_caption(gui::caption_pieces(lab, gui::local_time_text()),
                            static_cast<float>(rect.w), font_px, measure);
    std::vector<uint8_t> strip;
    int strip_w = 0, strip_h = 0;
    const Status drawn = gui::render_caption_strip(layout, fb_w, fb_h, &strip, &strip_w, &strip_h);
    // The frame again, for the swap that follows.
    glViewport(0, 0, fb_w, fb_h);
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x, bg.y, bg.z, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (!drawn.ok()) return drawn;
    if (strip_w != rect.w) return Status::Error("the caption strip is narrower than the picture");
    rgb.insert(rgb.end(), strip.begin(), strip.end());
    height += strip_h;
  }
  return gui::write_png_atomic(shot.path, rect.w, height, rgb);
}

// ---- [SECTION] screenshot mode --------------------------------------------------------------
//
// The picture should show a real measurement when there is a GPU: once the engine is ready the
// Lab submits the default size by itself, and we shoot when that request has finished (a result
// or an error line), after any sizes a WindowScript adds. A recording (--replay, or no usable GPU)
// answers the same way, only at once. With neither a GPU nor a recording we shoot the "no GPU"
// state at once. After 180 s without an answer we shoot anyway, with a note on screen.
// A few frames pass after the decision so the newest state is laid out (ImGui sizes some items
// one frame late).

constexpr double kScreenshotTimeoutSeconds = 180.0;
constexpr int kFramesBeforeShot = 3;

class ScreenshotPlan {
 public:
  ScreenshotPlan(bool active, double started, std::vector<int64_t> then_sizes, bool sweep)
      : active_(active), started_(started), then_sizes_(std::move(then_sizes)), sweep_(sweep) {}

  // Called once per frame after lab.update(); true when this frame's pixels are to be saved.
  bool shoot_this_frame(gui::Lab& lab, double now) {
    if (!active_) return false;
    if (frames_left_ >= 0) return --frames_left_ == 0;
    const EngineState state = lab.status().state;
    const bool idle = state == EngineState::ready && lab.requests_finished() > 0 &&
                      !lab.waiting_for_result() && !lab.change_pending();
    if (idle && next_size_ < then_sizes_.size()) {
      lab.set_size(then_sizes_[next_size_++], now);
      lab.release_size(now);  // measured at the next update, as when the slider is let go
      return false;
    }
    if (idle && sweep_ && !sweep_started_) {
      lab.start_sweep();
      sweep_started_ = true;
      return false;
    }
    if (lab.sweeping()) return false;
    const bool answered = state == EngineState::unavailable || idle;
    if (!answered && now - started_ >= kScreenshotTimeoutSeconds) {
      lab.note = "Screenshot taken after waiting 180 s: no measurement arrived in time.";
    }
    if (answered || !lab.note.empty()) frames_left_ = kFramesBeforeShot;
    return false;
  }

 private:
  bool active_;
  double started_;
  std::vector<int64_t> then_sizes_;
  size_t next_size_ = 0;
  bool sweep_ = false, sweep_started_ = false;
  int frames_left_ = -1;  // -1: still waiting for the state worth showing
};

// ---- [SECTION] scripted sessions (--script) --------------------------------------------------

class ScriptRunner {
 public:
  enum class Step { run, shoot, quit, error };

  explicit ScriptRunner(gui::Script script) : script_(std::move(script)) {}
  bool active() const { return !script_.commands.empty(); }
  const ShotRequest& shot() const { return shot_; }
  bool shot_pending() const { return shot_frames_ > 0; }
  const std::string& error() const { return error_; }
  // The line of the screenshot being taken, for an error while saving it.
  int shot_line() const { return shot_line_; }
  int resize_line() const { return resize_line_; }
  std::string where(int line) const { return script_.path + ":" + std::to_string(line) + ": "; }

  // A `window-size` command asks the window for a new size: the window takes it with
  // take_resize() and step() waits until the framebuffer has that size.
  // A `key NAME` command: the shortcut to press this frame (once).
  const gui::Shortcut* take_key() {
    const gui::Shortcut* key = key_;
    key_ = nullptr;
    return key;
  }

  bool take_resize(int* width, int* height) {
    if (!resize_asked_) return false;
    resize_asked_ = false;
    *width = resize_w_;
    *height = resize_h_;
    return true;
  }

  // Once per frame, after lab.update(): runs commands until one needs frames to pass.
  // fb_w x fb_h: the framebuffer's size now.
  Step step(gui::Lab& lab, double now, int fb_w, int fb_h) {
    if (shot_frames_ > 0) return --shot_frames_ == 0 ? Step::shoot : Step::run;
    if (const std::optional<Step> waiting = still_waiting(lab, now, fb_w, fb_h)) return *waiting;
    while (next_ < script_.commands.size()) {
      const gui::ScriptCommand& c = script_.commands[next_++];
      std::optional<Step> done = set_control(c, lab, now);
      if (!done) done = use_file(c, lab, now);
      if (!done) done = pace(c, lab, now);
      if (done) return *done;
    }
    return Step::quit;
  }

  Step fail(int line, const std::string& message) {
    error_ = where(line) + message;
    return Step::error;
  }

 private:
  static constexpr double kWaitSeconds = 180.0;
  static constexpr double kResizeSeconds = 10.0;  // for the window to take a window-size

  // A window-size the window has not taken yet, or a `wait` whose results have not come: run
  // (or fail once their time is up). Nothing: the next command may run.
  std::optional<Step> still_waiting(const gui::Lab& lab, double now, int fb_w, int fb_h) {
    if (resizing_) {
      if (fb_w != resize_w_ || fb_h != resize_h_) {
        if (now - resize_started_ < kResizeSeconds) return Step::run;
        return fail(resize_line_, "window-size: the window stayed " + std::to_string(fb_w) + "x" +
                                      std::to_string(fb_h) + " instead of " +
                                      std::to_string(resize_w_) + "x" + std::to_string(resize_h_));
      }
      resizing_ = false;
    }
    if (waiting_) {
      if (!settled(lab)) {
        if (now - wait_started_ < wait_limit_) return Step::run;
        return fail(waiting_line_, "wait: no result within " +
                                       std::to_string(static_cast<int>(wait_limit_)) + " s");
      }
      waiting_ = false;
    }
    return std::nullopt;
  }

  // The controls a learner moves: lesson, size, level, precision, cache, view, sweep. An error
  // ends the script; anything else lets the next command run (nullopt); other verbs are not
  // controls (nullopt, nothing done).
  std::optional<Step> set_control(const gui::ScriptCommand& c, gui::Lab& lab, double now) {
    if (c.verb == "lesson") {
      if (!lab.select_lesson(c.arg, now)) return fail(c.line, "no lesson '" + c.arg + "'");
    } else if (c.verb == "size") {
      int64_t n = 0;
      if (Status st = parse_size(c.arg, &n); !st.ok()) return fail(c.line, st.message());
      // The lesson on screen: the script may not have named one (checked against all on load).
      if (Status st = check_lesson_size(lab.lesson().info(), n); !st.ok()) {
        return fail(c.line, st.message());
      }
      lab.set_size(n, now);
      lab.release_size(now);
    } else if (c.verb == "level") {
      char* end = nullptr;
      const long level = c.arg == "top" ? lab.top_level() : std::strtol(c.arg.c_str(), &end, 10);
      if ((c.arg != "top" && (end == c.arg.c_str() || *end != '\0')) || level < 0 ||
          level > lab.top_level()) {
        return fail(c.line, lab.lesson().info().id + " has levels 0.." +
                                std::to_string(lab.top_level()) + " (or top)");
      }
      lab.set_shown_level(static_cast<int>(level));
    } else if (c.verb == "precision") {
      Precision p;
      if (!parse_precision(c.arg, &p))
        return fail(c.line, not_a_choice("precision", kPrecisionChoices));
      lab.choose_precision(p, now);
    } else if (c.verb == "cache") {
      CacheMode mode;
      if (!parse_cache_mode(c.arg, &mode))
        return fail(c.line, not_a_choice("cache", kCacheChoices));
      lab.set_cache(mode, now);
    } else if (c.verb == "view") {
      lab.requested_view = c.arg;
    } else if (c.verb == "sweep") {
      lab.start_sweep();
    } else if (c.verb == "cancel-sweep") {
      lab.cancel_sweep();
    }
    return std::nullopt;
  }

  // Recordings opened or compared, the front plot as SVG, and the exports. Exports wait until
  // every requested measurement has finished.
  std::optional<Step> use_file(const gui::ScriptCommand& c, gui::Lab& lab, double now) {
    if (c.verb == "open" || c.verb == "compare") {
      if (c.verb == "compare" && c.arg == "off") {
        lab.stop_comparing();
        return std::nullopt;
      }
      const gui::FileAction action =
          c.verb == "open" ? gui::FileAction::open_recording : gui::FileAction::compare;
      const Status st =
          run_file_action(action, c.arg, lab, now, "opened by the script: nothing runs here");
      if (!st.ok()) return fail(c.line, st.message());
    } else if (c.verb == "svg") {  // the front plot, as last drawn (viz/svg.h)
      if (!viz::has_svg_source()) {
        return fail(c.line, "svg: the " + lab.front_view +
                                " view is not a plot (speedup, bandwidth, memory, roofline are)");
      }
      std::string why;
      const std::string path = script_.out_dir + "/" + c.arg;
      if (!viz::write_file_atomic(path, viz::current_svg(), &why)) return fail(c.line, why);
      std::printf("%s\n", path.c_str());
      std::fflush(stdout);
    } else if (c.verb == "export-trace" || c.verb == "export-csv" || c.verb == "save-session") {
      // Exports write what has been measured: first let every requested measurement finish.
      if (!settled(lab)) {
        --next_;
        start_wait(c.line, now, kWaitSeconds);
        return Step::run;
      }
      const gui::FileAction action = c.verb == "export-trace" ? gui::FileAction::export_trace
                                     : c.verb == "export-csv" ? gui::FileAction::export_csv
                                                              : gui::FileAction::save_session;
      const std::string path = script_.out_dir + "/" + c.arg;
      const Status st = run_file_action(action, path, lab, now, "");
      if (!st.ok()) return fail(c.line, st.message());
      std::printf("%s\n", path.c_str());
      std::fflush(stdout);
    }
    return std::nullopt;
  }

  // The commands that need frames to pass (wait, key, window-size, screenshot) or end the script
  // (quit); caption changes how later screenshots look.
  std::optional<Step> pace(const gui::ScriptCommand& c, gui::Lab& lab, double now) {
    if (c.verb == "wait") {
      start_wait(c.line, now, c.args.empty() ? kWaitSeconds : std::strtod(c.arg.c_str(), nullptr));
      return Step::run;
    } else if (c.verb == "caption") {
      caption_ = c.arg == "on";
    } else if (c.verb == "phases") {
      lab.set_phases(c.arg == "on");
    } else if (c.verb == "key") {
      key_ = gui::find_shortcut(c.arg);
      return Step::run;  // pressed before the next frame is drawn
    } else if (c.verb == "window-size") {
      resize_asked_ = resizing_ = true;
      resize_w_ = c.width;
      resize_h_ = c.height;
      resize_line_ = c.line;
      resize_started_ = now;
      return Step::run;
    } else if (c.verb == "screenshot") {
      shot_ = ShotRequest{script_.out_dir + "/" + c.arg, c.view_only, caption_};
      shot_line_ = c.line;
      if (!c.view.empty()) lab.requested_view = c.view;
      shot_frames_ = kFramesBeforeShot;  // let the layout settle
      return Step::run;
    } else if (c.verb == "quit") {
      return Step::quit;
    }
    return std::nullopt;
  }

  // Nothing left to measure: no pending slider change, no request or sweep in flight, the
  // engine idle (its counter phase included). Without a GPU or recording, nothing will come.
  static bool settled(const gui::Lab& lab) {
    const EngineState state = lab.status().state;
    if (state == EngineState::unavailable) return true;
    return state == EngineState::ready && !lab.change_pending() && !lab.waiting_for_result() &&
           !lab.sweeping() && !lab.status().busy && lab.requests_submitted() > 0;
  }
  void start_wait(int line, double now, double limit) {
    waiting_ = true;
    waiting_line_ = line;
    wait_started_ = now;
    wait_limit_ = limit;
  }

  gui::Script script_;
  size_t next_ = 0;
  bool waiting_ = false;
  int waiting_line_ = 0;
  double wait_started_ = 0, wait_limit_ = kWaitSeconds;
  int shot_frames_ = 0;
  int shot_line_ = 0;
  bool caption_ = true;
  const gui::Shortcut* key_ = nullptr;
  bool resize_asked_ = false, resizing_ = false;
  int resize_w_ = 0, resize_h_ = 0, resize_line_ = 0;
  double resize_started_ = 0;
  ShotRequest shot_;
  std::string error_;
};

// --frame-stats: how long the window's frames took while the engine was working.
void print_frame_stats(std::vector<double> ms, const gui::Lab& lab) {
  if (ms.empty()) {
    std::printf("frame stats: no frame was drawn while the engine worked\n");
    return;
  }
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  std::printf(
      "frame stats: %zu frames while the engine worked (%s backend): median %.2f ms, "
      "p99 %.2f ms, max %.2f ms\n",
      ms.size(), lab.status().backend_kind.c_str(), at(0.5), at(0.99), ms.back());
}

// ---- [SECTION] run_gui ----------------------------------------------------------------------

double seconds_now() {
  using clock = std::chrono::steady_clock;
  static const clock::time_point start = clock::now();
  return std::chrono::duration<double>(clock::now() - start).count();
}

// ---- [SECTION] run_window: set-up, the frame loop, tear-down ---------------------------------
//
// WindowRun::open() sets up GLFW, the window, OpenGL, ImGui and the Lab with the command line's
// and the remembered choices; loop() draws frames until the window closes, a script ends or the
// screenshot is saved. Tear-down is the members' destructors, in reverse order of declaration
// (the Lab and its engine, ImGui, the window, GLFW), after close() wrote what the window
// remembers on a normal exit.

class WindowRun {
 public:
  WindowRun(const GuiOptions& options, const WindowScript& script)
      : options_(options),
        script_(script),
        screenshot_(!options.screenshot_path.empty()),
        // A scripted session renders like a screenshot run: fixed size, scale 1, no mouse.
        headless_(screenshot_ || !script.commands.commands.empty()),
        runner_(script.commands) {}

  Status open(Engine::BackendFactory factory,
              std::shared_ptr<const gui::ReplayBoard> replay_board) {
    if (!is_view_name(options_.view)) {
      return Status::Error("--view is " + std::string(kViewChoices) + "; got '" + options_.view +
                           "'");
    }
    if (!glfw_.ok) return Status::Error(cannot_open_window_message());
    load_remembered_settings();
    FL_TRY(open_window());
    FL_TRY(start_imgui());
    lab_ = std::make_unique<gui::Lab>(std::move(factory), std::move(replay_board));
    FL_TRY(set_up_lab());
    // The crash journal: every window but a --screenshot run journals; only an interactive one
    // offers to reopen what a crashed window left.
    // FL_RECOVERY_OFFER=1 shows the offer in a scripted run too (its picture, docs/RELIABILITY.md).
    recovery_.start(lab_.get(), options_.recover,
                    !headless_ || std::getenv("FL_RECOVERY_OFFER") != nullptr, !screenshot_);
    plan_.emplace(screenshot_, seconds_now(), script_.then_sizes, script_.sweep);
    dialog_.allow_native = !headless_;  // the desktop's file dialog (zenity) where there is one
    if (!headless_) {
      std::signal(SIGINT, request_stop);
      std::signal(SIGTERM, request_stop);
    }
    return Status::Ok();
  }

  // The frame loop; returns the exit status.
  int loop() {
    while (!glfwWindowShouldClose(window_.handle) && !g_stop_requested) {
      if (const std::optional<int> done = frame()) return *done;
    }
    if (screenshot_) return fail("the window was closed before the screenshot was taken");
    return close();
  }

 private:
  // ---- set-up

  // What the window remembers (app/gui/settings.h): not for pictures unless --use-settings.
  void load_remembered_settings() {
    use_settings_ = !headless_ || options_.use_settings;
    settings_file_ = use_settings_ ? gui::settings_path() : "";
    if (settings_file_.empty()) return;
    if (options_.reset_settings) {
      std::error_code ec;
      if (std::filesystem::remove(settings_file_, ec)) {
        std::fprintf(stderr, "fusionlab: settings reset (removed %s)\n", settings_file_.c_str());
      }
    } else if (Status st = gui::load_settings(settings_file_, &remembered_); !st.ok()) {
      remembered_ = gui::Settings();
      std::fprintf(stderr,
                   "fusionlab: ignoring the settings file: %s (it is rewritten when the "
                   "window closes)\n",
                   one_line(st.message()).c_str());
    }
  }

  Status open_window() {
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    // Sizes are pixels (--size, remembered, or a share of the work area, which is already in the
    // monitor's pixels): GLFW must not scale them again. Text follows the content scale instead.
    glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_FALSE);
    glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);  // shown once it has its size and place
    const WindowPlacement place = window_placement(options_, headless_, remembered_);
    if (headless_) {
      // A picture is exactly the size asked for: a window larger than the screen would be cut
      // (or garbage) where the screen ends.
      if (const std::string why = too_big_for_screen(place.width, place.height); !why.empty()) {
        return Status::Error(why);
      }
    }
    window_.handle = glfwCreateWindow(place.width, place.height, "Fusion Lab", nullptr, nullptr);
    if (!window_.handle) return Status::Error(cannot_open_window_message());
    if (place.has_position) glfwSetWindowPos(window_.handle, place.x, place.y);
    glfwShowWindow(window_.handle);
    if (!headless_ && remembered_.maximized && options_.width <= 0)
      glfwMaximizeWindow(window_.handle);
    glfwMakeContextCurrent(window_.handle);
    if (gladLoadGL(reinterpret_cast<GLADloadfunc>(glfwGetProcAddress)) == 0) {
      return Status::Error(
          "cannot load OpenGL 3.3 functions (glad): the driver offers no OpenGL 3.3 core");
    }
    glfwSwapInterval(1);
    windowed_ = Rect{place.x, place.y, place.width, place.height};  // until it moves or resizes
    if (!headless_) return Status::Ok();
    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window_.handle, &fb_w, &fb_h);
    if (fb_w != place.width || fb_h != place.height) {
      return Status::Error("the window is " + std::to_string(fb_w) + "x" + std::to_string(fb_h) +
                           " pixels, not the " + std::to_string(place.width) + "x" +
                           std::to_string(place.height) +
                           " asked for (a window manager or a scaled screen?)");
    }
    return Status::Ok();
  }

  Status start_imgui() {
    imgui_.emplace();
    if (headless_) ImGui::GetIO().ConfigFlags |= ImGuiConfigFlags_NoMouse;  // no stray hover
    // Screenshots are rendered at scale 1 (times --scale) so they look the same everywhere; the
    // window follows the monitor's content scale (HiDPI) times --scale.
    if (use_settings_) zoom_ = remembered_.zoom;
    ui_scale_ = (headless_ ? 1.0f : content_scale(window_.handle)) * options_.scale * zoom_;
    setup_style_and_fonts(ui_scale_, true);
    // Ours first: Dear ImGui's backend keeps it and calls it from its own key callback.
    glfwSetKeyCallback(window_.handle, on_key);
    imgui_->glfw_backend = ImGui_ImplGlfw_InitForOpenGL(window_.handle, true);
    imgui_->gl_backend = imgui_->glfw_backend && ImGui_ImplOpenGL3_Init("#version 330 core");
    if (!imgui_->gl_backend)
      return Status::Error("cannot start Dear ImGui's GLFW/OpenGL 3 backend");
    return Status::Ok();
  }

  // The command line's choices, then the remembered ones where the command line said nothing.
  Status set_up_lab() {
    gui::Lab& lab = *lab_;
    if (!script_.lesson.empty() && !lab.select_lesson(script_.lesson, seconds_now())) {
      return Status::Error("no lesson '" + script_.lesson + "' (fusionlab lessons lists them)");
    }
    lab.requested_view = options_.view;
    if (!remembered_.lesson.empty() && script_.lesson.empty()) {
      lab.select_lesson(remembered_.lesson, seconds_now());  // a lesson no longer there: the first
    }
    if (!remembered_.view.empty() && options_.view == "speedup" && is_view_name(remembered_.view)) {
      lab.requested_view = remembered_.view;
    }
    if (Precision p; !remembered_.precision.empty() && parse_precision(remembered_.precision, &p)) {
      lab.choose_precision(p, seconds_now());
    }
    if (CacheMode c; !remembered_.cache.empty() && parse_cache_mode(remembered_.cache, &c)) {
      lab.set_cache(c, seconds_now());
    }
    gui::set_window_peers_shown(remembered_.show_peers);
    if (use_settings_) {
      ui_.panels = remembered_.panels;
      if (!is_view_name(ui_.panels.second_view))
        ui_.panels.second_view = gui::PanelSizes().second_view;
      if (ui_.panels.split) ui_.second_request = ui_.panels.second_view;
    }
    if (!options_.compare_paths.empty()) FL_TRY(lab.compare_with(options_.compare_paths));
    if (script_.level >= 0) {
      if (script_.level > lab.top_level()) {
        return Status::Error(lab.lesson().info().id + " has fusion levels 0.." +
                             std::to_string(lab.top_level()));
      }
      lab.set_shown_level(script_.level);
    }
    return Status::Ok();
  }

  // ---- the frame loop

  // One frame: events, the Lab, the script, the UI, the pictures. An exit status ends the run.
  std::optional<int> frame() {
    wait_for_events();
    const double now = seconds_now();
    const double frame_start = now;  // the frame's own work: update, layout, render, swap
    gui::Lab& lab = *lab_;
    lab.update(now);
    // The terminal says it too, not only the window; again after File > Open recording. On
    // standard error, as every message of the program (README.md): standard output is for what
    // a command was asked to print.
    if (lab.replay() && announced_generation_ != lab.backend_generation()) {
      std::fprintf(stderr, "fusionlab: %s\n", gui::replay_headline(*lab.replay()).c_str());
      std::fflush(stderr);
      announced_generation_ = lab.backend_generation();
    }
    const bool shoot = plan_->shoot_this_frame(lab, now);
    ScriptRunner::Step script_step = ScriptRunner::Step::run;
    if (std::optional<int> done = run_script(now, &script_step)) return done;
    follow_content_scale();
    // While a picture is on its way (F12, File > Screenshot..., a script's), the mouse is away
    // from the window: no tooltip or hover highlight lands in it.
    ImGuiIO& io = ImGui::GetIO();
    if (ui_shot_ || runner_.shot_pending() || headless_) {
      io.ConfigFlags |= ImGuiConfigFlags_NoMouse;
    } else {
      io.ConfigFlags &= ~ImGuiConfigFlags_NoMouse;
    }
    draw_ui(now);
    int fb_w = 0, fb_h = 0;
    render(&fb_w, &fb_h);
    if (std::optional<int> done = take_pictures(script_step, shoot, fb_w, fb_h, now)) return done;
    glfwSwapBuffers(window_.handle);
    // Frame time while the engine works (or a sweep runs): the window must stay at 60 fps.
    // Kept only for --frame-stats, at most kMaxFrameSamples (caps.h): the recent ones.
    if (options_.frame_stats && (lab.sweeping() || lab.status().busy || lab.waiting_for_result())) {
      keep_recent_half(&frame_ms_, kMaxFrameSamples);
      frame_ms_.push_back((seconds_now() - frame_start) * 1e3);
    }
    // Software GL under Xvfb may not wait for vsync: do not spin while waiting for a result.
    if (headless_) std::this_thread::sleep_for(std::chrono::milliseconds(15));
    return std::nullopt;
  }

  // Power saving: sleep until input (or a slow tick) unless something is changing.
  void wait_for_events() {
    if (headless_) {
      glfwPollEvents();
    } else if (lab_->animating()) {
      glfwWaitEventsTimeout(1.0 / 60.0);
    } else {
      glfwWaitEventsTimeout(0.5);
    }
  }

  // The script's next commands (--script); a window-size it asks for is applied here.
  std::optional<int> run_script(double now, ScriptRunner::Step* step) {
    if (!runner_.active()) return std::nullopt;
    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window_.handle, &fb_w, &fb_h);
    *step = runner_.step(*lab_, now, fb_w, fb_h);
    if (*step == ScriptRunner::Step::error) return fail(runner_.error());
    if (*step == ScriptRunner::Step::quit) return close();
    if (int w = 0, h = 0; runner_.take_resize(&w, &h)) {
      if (const std::string why = too_big_for_screen(w, h); !why.empty()) {
        return fail(runner_.where(runner_.resize_line()) + why);
      }
      glfwSetWindowSize(window_.handle, w, h);
    }
    return std::nullopt;
  }

  // The monitor's content scale changed (the window moved to another monitor), or the zoom
  // (Ctrl+= / Ctrl+- / Ctrl+0, asked in the last frame): new style and font.
  void follow_content_scale() {
    if (ui_.zoom_reset || ui_.zoom_steps != 0) {
      zoom_ = ui_.zoom_reset ? 1.0f : gui::zoomed(zoom_, ui_.zoom_steps);
      ui_.zoom_reset = false;
      ui_.zoom_steps = 0;
      char text[64];
      std::snprintf(text, sizeof(text), "zoom %.0f%%%s", zoom_ * 100.0f,
                    std::fabs(zoom_ - 1.0f) < 0.01f ? "" : " (Ctrl+0 resets)");
      message_ = Message{text, false, seconds_now() + 3.0};
    }
    const float scale_now =
        (headless_ ? 1.0f : content_scale(window_.handle)) * options_.scale * zoom_;
    if (std::fabs(scale_now - ui_scale_) > 0.01f) {
      ui_scale_ = scale_now;
      setup_style_and_fonts(ui_scale_, false);
      ImGui_ImplOpenGL3_DestroyFontsTexture();
      ImGui_ImplOpenGL3_CreateFontsTexture();
    }
  }

  void draw_ui(double now) {
    gui::Lab& lab = *lab_;
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    MenuChoice choice = draw_menu_bar(lab, ui_, message_, now);
    // Keys (the shortcut table), from the keyboard or a script's `key NAME`.
    if (!headless_ && !dialog_.is_open()) handle_keys(lab, ui_, &choice, now);
    key_events().clear();  // a key pressed while a dialog has the focus does nothing later
    if (const gui::Shortcut* key = runner_.take_key()) apply_shortcut(*key, lab, ui_, &choice, now);
    draw_frame(lab, ui_, now, &views_px_);
    draw_shortcuts_window(ui_);
    recovery_.draw_offer(lab_.get());
    lab.flow_pause_toggle = false;  // taken by the flow view if it was drawn
    if (ui_.quit) glfwSetWindowShouldClose(window_.handle, GLFW_TRUE);
    if (ui_.toggle_full_screen) toggle_full_screen();
    // F12 or the Screenshot button: the whole window with its caption, under a new name, once
    // menus and popups are gone. Not while a popup is open (the picture would show it).
    if (choice.quick_shot && !ui_shot_ && !dialog_.is_open()) {
      ui_shot_ = ShotRequest{default_path(gui::FileAction::screenshot, lab, false), false, true};
      ui_shot_frames_ = kFramesBeforeShot;
    }
    if (choice.dialog)
      dialog_.open(choice.action, default_path(choice.action, lab, dialog_.view_only));
    draw_file_dialog(now);
    ImGui::Render();
  }

  void toggle_full_screen() {
    ui_.toggle_full_screen = false;
    GLFWmonitor* monitor = glfwGetPrimaryMonitor();
    const GLFWvidmode* mode = monitor ? glfwGetVideoMode(monitor) : nullptr;
    if (!ui_.full_screen && mode) {
      glfwGetWindowPos(window_.handle, &windowed_.x, &windowed_.y);
      glfwGetWindowSize(window_.handle, &windowed_.width, &windowed_.height);
      glfwSetWindowMonitor(window_.handle, monitor, 0, 0, mode->width, mode->height,
                           mode->refreshRate);
      ui_.full_screen = true;
    } else if (ui_.full_screen) {
      glfwSetWindowMonitor(window_.handle, nullptr, windowed_.x, windowed_.y, windowed_.width,
                           windowed_.height, 0);
      ui_.full_screen = false;
    }
  }

  // The File menu's popup: a screenshot is taken without it; anything else runs at once.
  void draw_file_dialog(double now) {
    gui::FileRequest request;
    if (!dialog_.draw(&request)) return;
    if (request.action == gui::FileAction::screenshot) {
      dialog_.close();  // the picture is taken without the popup
      ui_shot_ = ShotRequest{request.path, request.view_only, request.caption};
      ui_shot_frames_ = kFramesBeforeShot;
      return;
    }
    const Status st = run_file_action(request.action, request.path, *lab_, now,
                                      "opened from the File menu: nothing runs here");
    if (!st.ok()) {
      dialog_.fail(st.message());
      return;
    }
    dialog_.close();
    const bool reads = !gui::writes_file(request.action);
    message_ = {
        (reads ? (request.action == gui::FileAction::compare ? "Comparing with " : "Opened ")
               : "Saved ") +
            request.path,
        false, now + 8};
  }

  void render(int* fb_w, int* fb_h) {
    glfwGetFramebufferSize(window_.handle, fb_w, fb_h);
    glViewport(0, 0, *fb_w, *fb_h);
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x, bg.y, bg.z, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  }

  // The script's screenshot, the File menu's or F12's, and --screenshot's (which ends the run).
  std::optional<int> take_pictures(ScriptRunner::Step script_step, bool shoot, int fb_w, int fb_h,
                                   double now) {
    if (script_step == ScriptRunner::Step::shoot) {
      const Status st = take_shot(runner_.shot(), fb_w, fb_h, views_px_, *lab_);
      if (!st.ok()) {
        return fail(runner_.where(runner_.shot_line()) +
                    "cannot save the screenshot: " + st.message());
      }
      std::printf("%s\n", runner_.shot().path.c_str());
      std::fflush(stdout);
    }
    if (ui_shot_ && --ui_shot_frames_ <= 0) {
      const Status st = take_shot(*ui_shot_, fb_w, fb_h, views_px_, *lab_);
      if (st.ok()) {
        message_ = {"Saved " + ui_shot_->path, false, now + 8};
        std::printf("%s\n", ui_shot_->path.c_str());
        std::fflush(stdout);
      } else {  // back to the popup, with the reason
        dialog_.open(gui::FileAction::screenshot, ui_shot_->path,
                     "Cannot save the screenshot: " + st.message());
      }
      ui_shot_.reset();
    }
    if (!shoot) return std::nullopt;
    glFinish();
    std::vector<uint8_t> rgb;
    Status st = gui::read_back_buffer(fb_w, fb_h, &rgb);
    if (st.ok()) {
      // Without --force the start-up check refused an existing file; one that appeared while
      // the window ran is refused here too (the final rename never replaces it).
      st = gui::write_png_atomic(options_.screenshot_path, fb_w, fb_h, rgb,
                                 options_.screenshot_replace);
    }
    if (!st.ok()) return fail("cannot save the screenshot: " + st.message());
    std::printf("%s\n", options_.screenshot_path.c_str());
    if (options_.frame_stats) print_frame_stats(frame_ms_, *lab_);
    return close();
  }

  // ---- tear-down

  // A normal end: what the window remembers is written; returns the exit status.
  int close() {
    remember();
    return 0;
  }

  void remember() {
    if (settings_file_.empty()) return;
    gui::Settings s;
    const bool maximized = glfwGetWindowAttrib(window_.handle, GLFW_MAXIMIZED) == GLFW_TRUE;
    if (!ui_.full_screen && !maximized) {  // full screen keeps the last windowed place
      glfwGetWindowPos(window_.handle, &windowed_.x, &windowed_.y);
      glfwGetWindowSize(window_.handle, &windowed_.width, &windowed_.height);
    }
    s.x = windowed_.x;
    s.y = windowed_.y;
    s.has_position = !headless_;
    if (gui::window_size_problem(windowed_.width, windowed_.height).empty()) {
      s.width = windowed_.width;
      s.height = windowed_.height;
    }
    s.maximized = maximized;
    s.lesson = lab_->lesson().info().id;
    s.view = lab_->front_view;
    // Only a precision the learner chose is remembered: until then each lesson opens at its own.
    s.precision = lab_->precision_chosen() ? to_string(lab_->precision()) : "";
    s.cache = to_string(lab_->cache());
    s.show_peers = gui::window_peers_ticked();
    s.panels = ui_.panels;
    s.zoom = zoom_;
    if (Status st = gui::save_settings(settings_file_, s); !st.ok()) {
      std::fprintf(stderr, "fusionlab: cannot remember the settings: %s\n",
                   one_line(st.message()).c_str());
    }
  }

  const GuiOptions& options_;
  const WindowScript& script_;
  const bool screenshot_, headless_;
  bool use_settings_ = false;
  std::string settings_file_;
  gui::Settings remembered_;
  // The window's place and size while windowed (full screen keeps the last windowed one).
  struct Rect {
    int x = 0, y = 0, width = 0, height = 0;
  };
  Rect windowed_;
  float ui_scale_ = 1.0f;
  float zoom_ = 1.0f;  // Ctrl+= / Ctrl+- / Ctrl+0 (gui::Settings::zoom)
  // Torn down in reverse order: the Lab (and its engine) first, GLFW last.
  GlfwLibrary glfw_;
  Window window_;
  std::optional<ImGuiSession> imgui_;
  std::unique_ptr<gui::Lab> lab_;
  gui::CrashRecovery recovery_;  // after lab_: removes the journal first on an orderly end
  WindowUi ui_;
  std::optional<ScreenshotPlan> plan_;
  ScriptRunner runner_;
  std::vector<double> frame_ms_;
  gui::FileDialog dialog_;
  Message message_;
  std::optional<ShotRequest> ui_shot_;  // F12, the Screenshot button, File > Screenshot...
  int ui_shot_frames_ = 0;
  gui::PixelRect views_px_;
  int announced_generation_ = -1;
};

}  // namespace

int run_window(const GuiOptions& options, Engine::BackendFactory factory,
               const WindowScript& script, std::shared_ptr<const gui::ReplayBoard> replay_board) {
  WindowRun run(options, script);
  if (Status st = run.open(std::move(factory), std::move(replay_board)); !st.ok()) {
    return fail(st.message());
  }
  return run.loop();
}

// Every lesson's teaching text and the views' and panels' explanations, read once before the
// window opens (app/gui/lesson_text.h).
void load_teaching_texts(const GuiOptions& options, bool headless) {
  gui::LessonTextSources sources;
  const std::string assets = gui::find_assets_folder();
  if (!assets.empty()) sources.shipped_dir = (std::filesystem::path(assets) / "lessons").string();
  sources.override_named = !options.lessons_dir.empty();
  sources.override_dir = sources.override_named ? options.lessons_dir
                         : headless             ? ""
                                                : gui::default_lessons_override_dir();
  std::vector<std::string> ids;
  for (const Lesson* lesson : lessons()) ids.push_back(lesson->info().id);
  for (const std::string& id : gui::window_text_ids()) ids.push_back(id);
  gui::load_lesson_texts(ids, sources);
}

int run_gui(const GuiOptions& options) {
  load_teaching_texts(options, !options.screenshot_path.empty() || !options.script_path.empty());
  WindowScript script;
  script.lesson = options.lesson;
  script.level = options.level;
  script.sweep = options.sweep;
  if (!options.script_path.empty()) {
    if (!options.screenshot_path.empty()) {
      return fail(
          "--script takes its pictures with its own `screenshot` command; drop --screenshot");
    }
    // Checked before any window opens: a bad line is named at once.
    const Status loaded = gui::load_script(options.script_path, options.out_dir, &script.commands);
    if (!loaded.ok()) return fail(loaded.message());
    if (script.commands.commands.empty())
      return fail(options.script_path + ": the script has no commands");
  }
  // PyTorch peers for the speedup plot: a named file that cannot be used is refused here.
  if (Status st = gui::load_window_peers(options.peers_path); !st.ok()) return fail(st.message());
  // The portable kernels' series (what a GPU before Hopper runs), beside the speedup curve.
  if (Status st = gui::load_window_portable(options.replay_paths); !st.ok()) {
    return fail(st.message());
  }
  if (!options.compare_paths.empty()) {  // a bad file is named before any window opens
    std::unique_ptr<ReplayBackend> compared;
    if (Status st = load_recording(options.compare_paths, &compared); !st.ok()) {
      return fail(st.message());
    }
  }
  auto board = std::make_shared<gui::ReplayBoard>();
  if (!options.replay_paths.empty()) {
    // Checked before any window opens: a bad file is one line on stderr and a failing exit.
    std::unique_ptr<ReplayBackend> recording;
    const Status loaded = load_recording(options.replay_paths, &recording);
    if (!loaded.ok()) return fail(loaded.message());
    return run_window(options,
                      gui::recorded_backend(std::move(recording),
                                            "chosen with --replay: nothing runs here", board),
                      script, board);
  }
  return run_window(options, gui::live_or_shipped_recording(options.force_no_gpu, board), script,
                    board);
}

}  // namespace fl
