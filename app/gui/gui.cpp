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
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "app/gui/backend_choice.h"
#include "app/gui/lab.h"
#include "app/gui/panels.h"
#include "app/gui/screenshot.h"
#include "app/measure/sizes.h"
#include "app/gui/window.h"
#include "app/measure/replay_backend.h"

namespace fl {
namespace {

// ---- [SECTION] window, OpenGL and ImGui setup -----------------------------------------------

std::string g_glfw_error = "unknown GLFW error";

void remember_glfw_error(int /*code*/, const char* description) {
  g_glfw_error = description ? description : "unknown GLFW error";
}

// One line on stderr, whatever the message holds, and a failing exit code.
int fail(std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "fusionlab: %s\n", message.c_str());
  return 1;
}

int cannot_open_window() {
  return fail("cannot open a window: " + g_glfw_error +
              "; use a subcommand (lessons, bench) or run under Xvfb");
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

// ---- [SECTION] fonts and HiDPI --------------------------------------------------------------

constexpr float kBaseFontSize = 16.0f;
constexpr const char* kFontPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

float content_scale(GLFWwindow* window) {
  float xs = 1, ys = 1;
  glfwGetWindowContentScale(window, &xs, &ys);
  const float s = std::max(xs, ys);
  return std::isfinite(s) ? std::clamp(s, 1.0f, 4.0f) : 1.0f;
}

void setup_style_and_fonts(float scale) {
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the layout is fixed; never drop imgui.ini into the working folder
  ImGui::StyleColorsDark();
  ImGuiStyle& style = ImGui::GetStyle();
  style.WindowRounding = 0;
  style.ChildRounding = 4;
  style.FrameRounding = 3;
  style.ScaleAllSizes(scale);

  ImFontConfig config;
  config.OversampleH = 2;
  std::FILE* probe = std::fopen(kFontPath, "rb");  // AddFontFromFileTTF asserts on a missing file
  ImFont* font = nullptr;
  if (probe) {
    std::fclose(probe);
    font = io.Fonts->AddFontFromFileTTF(kFontPath, std::round(kBaseFontSize * scale), &config);
  }
  if (!font) {
    ImFontConfig fallback;
    fallback.SizePixels = std::round(13.0f * scale);
    io.Fonts->AddFontDefault(&fallback);
  }
}

// ---- [SECTION] the frame --------------------------------------------------------------------
//
// +-- left column ---------+-- right column -------------------------------+
// | title                  | controls (size, level shown, precision, cache)|
// | GPU panel              | speedup vs size plot                          |
// | lessons + teaching text| current measurement                           |
// +------------------------+-----------------------------------------------+

void draw_frame(gui::Lab& lab, double now) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                 ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::Begin("Fusion Lab", nullptr, flags);
  const float fs = ImGui::GetFontSize();
  const float line = ImGui::GetTextLineHeightWithSpacing();
  const float left_w = std::max(fs * 22.0f, ImGui::GetContentRegionAvail().x * 0.34f);

  ImGui::BeginChild("##left", ImVec2(left_w, 0), false);
  ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1.0f), "Fusion Lab");
  ImGui::SameLine();
  if (lab.replay()) {
    ImGui::TextDisabled("kernel fusion, replayed from a recording");
  } else {
    ImGui::TextDisabled("kernel fusion, measured live on your GPU");
  }
  ImGui::Spacing();
  ImGui::BeginChild("##gpu", ImVec2(0, gui::gpu_panel_height(lab, left_w)), true);
  gui::draw_gpu_panel(lab);
  ImGui::EndChild();
  ImGui::BeginChild("##lesson", ImVec2(0, 0), true);
  gui::draw_lesson_panel(lab, now);
  ImGui::EndChild();
  ImGui::EndChild();

  ImGui::SameLine();
  ImGui::BeginChild("##right", ImVec2(0, 0), false);
  ImGui::BeginChild("##controls", ImVec2(0, line * 7.4f), true, ImGuiWindowFlags_NoScrollbar);
  gui::draw_controls_panel(lab, now);
  ImGui::EndChild();
  // The measurement panel holds the level table, the timeline (~3 lines) and the launches.
  const float measurement_h = line * (lab.replay() ? 12.5f : 11.5f);  // + "Recorded on ..."
  const float plot_h = std::max(
      fs * 10, ImGui::GetContentRegionAvail().y - measurement_h - ImGui::GetStyle().ItemSpacing.y);
  ImGui::BeginChild("##plot", ImVec2(0, plot_h), true, ImGuiWindowFlags_NoScrollbar);
  gui::draw_views_panel(lab);
  ImGui::EndChild();
  ImGui::BeginChild("##measurement", ImVec2(0, 0), true);
  gui::draw_measurement_panel(lab);
  ImGui::EndChild();
  ImGui::EndChild();
  ImGui::End();
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
  const std::string& shot_path() const { return shot_path_; }
  const std::string& error() const { return error_; }

  // Once per frame, after lab.update(): runs commands until one needs frames to pass.
  Step step(gui::Lab& lab, double now) {
    if (shot_frames_ > 0) return --shot_frames_ == 0 ? Step::shoot : Step::run;
    if (waiting_) {
      if (!settled(lab)) {
        if (now - wait_started_ < kWaitSeconds) return Step::run;
        return fail(waiting_line_, "wait: no result within 180 s");
      }
      waiting_ = false;
    }
    while (next_ < script_.commands.size()) {
      const gui::ScriptCommand& c = script_.commands[next_++];
      if (c.verb == "lesson") {
        if (!lab.select_lesson(c.arg, now)) return fail(c.line, "no lesson '" + c.arg + "'");
      } else if (c.verb == "size") {
        int64_t n = 0;
        if (Status st = parse_size(c.arg, &n); !st.ok()) return fail(c.line, st.message());
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
        if (!parse_precision(c.arg, &p)) return fail(c.line, "precision is fp32 or bf16");
        lab.set_precision(p, now);
      } else if (c.verb == "cache") {
        CacheMode mode;
        if (!parse_cache_mode(c.arg, &mode)) return fail(c.line, "cache is cold or warm");
        lab.set_cache(mode, now);
      } else if (c.verb == "view") {
        static const char* kViews[] = {"speedup", "bandwidth", "flow", "timeline", "memory",
                                       "roofline"};
        if (std::find(std::begin(kViews), std::end(kViews), c.arg) == std::end(kViews)) {
          return fail(c.line, "view is speedup, bandwidth, flow, timeline, memory or roofline");
        }
        lab.requested_view = c.arg;
      } else if (c.verb == "sweep") {
        lab.start_sweep();
      } else if (c.verb == "wait") {
        waiting_ = true;
        waiting_line_ = c.line;
        wait_started_ = now;
        return Step::run;
      } else if (c.verb == "screenshot") {
        shot_path_ = script_.out_dir + "/" + c.arg;
        shot_frames_ = kFramesBeforeShot;  // let the layout settle
        return Step::run;
      } else if (c.verb == "quit") {
        return Step::quit;
      }
    }
    return Step::quit;
  }

 private:
  static constexpr double kWaitSeconds = 180.0;
  // Nothing left to measure: no pending slider change, no request or sweep in flight, the
  // engine idle (its counter phase included). Without a GPU or recording, nothing will come.
  static bool settled(const gui::Lab& lab) {
    const EngineState state = lab.status().state;
    if (state == EngineState::unavailable) return true;
    return state == EngineState::ready && !lab.change_pending() && !lab.waiting_for_result() &&
           !lab.sweeping() && !lab.status().busy;
  }
  Step fail(int line, const std::string& message) {
    error_ = script_.path + ":" + std::to_string(line) + ": " + message;
    return Step::error;
  }

  gui::Script script_;
  size_t next_ = 0;
  bool waiting_ = false;
  int waiting_line_ = 0;
  double wait_started_ = 0;
  int shot_frames_ = 0;
  std::string shot_path_, error_;
};

// --frame-stats: how long the window's frames took while the engine was working.
void print_frame_stats(std::vector<double> ms, const gui::Lab& lab) {
  if (ms.empty()) {
    std::printf("frame stats: no frame was drawn while the engine worked\n");
    return;
  }
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))]; };
  std::printf("frame stats: %zu frames while the engine worked (%s backend): median %.2f ms, "
              "p99 %.2f ms, max %.2f ms\n",
              ms.size(), lab.status().backend_kind.c_str(), at(0.5), at(0.99), ms.back());
}

// ---- [SECTION] run_gui ----------------------------------------------------------------------

double seconds_now() {
  using clock = std::chrono::steady_clock;
  static const clock::time_point start = clock::now();
  return std::chrono::duration<double>(clock::now() - start).count();
}

}  // namespace

int run_window(const GuiOptions& options, Engine::BackendFactory factory,
               const WindowScript& script, std::shared_ptr<const gui::ReplayBoard> replay_board) {
  const bool screenshot = !options.screenshot_path.empty();
  // A scripted session renders like a screenshot run: fixed size, scale 1, no mouse.
  const bool headless = screenshot || !script.commands.commands.empty();
  GlfwLibrary glfw;
  if (!glfw.ok) return cannot_open_window();

  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  // A screenshot is exactly width x height pixels; an interactive window grows with the monitor's
  // scale so text keeps its physical size.
  glfwWindowHint(GLFW_SCALE_TO_MONITOR, headless ? GLFW_FALSE : GLFW_TRUE);
  if (headless) glfwWindowHint(GLFW_RESIZABLE, GLFW_FALSE);
  Window window;
  window.handle = glfwCreateWindow(options.width, options.height, "Fusion Lab", nullptr, nullptr);
  if (!window.handle) return cannot_open_window();
  glfwMakeContextCurrent(window.handle);
  if (gladLoadGL(reinterpret_cast<GLADloadfunc>(glfwGetProcAddress)) == 0) {
    return fail("cannot load OpenGL 3.3 functions (glad): the driver offers no OpenGL 3.3 core");
  }
  glfwSwapInterval(1);

  ImGuiSession imgui;
  if (headless) ImGui::GetIO().ConfigFlags |= ImGuiConfigFlags_NoMouse;  // no stray hover
  // Screenshots are rendered at scale 1 so they look the same everywhere; the window follows
  // the monitor's content scale (HiDPI).
  setup_style_and_fonts(headless ? 1.0f : content_scale(window.handle));
  imgui.glfw_backend = ImGui_ImplGlfw_InitForOpenGL(window.handle, true);
  imgui.gl_backend = imgui.glfw_backend && ImGui_ImplOpenGL3_Init("#version 330 core");
  if (!imgui.gl_backend) return fail("cannot start Dear ImGui's GLFW/OpenGL 3 backend");

  gui::Lab lab(std::move(factory), std::move(replay_board));
  bool replay_announced = false;
  if (!script.lesson.empty() && !lab.select_lesson(script.lesson, seconds_now())) {
    return fail("no lesson '" + script.lesson + "' (fusionlab lessons lists them)");
  }
  if (options.view != "speedup" && options.view != "timeline" && options.view != "memory" &&
      options.view != "roofline" && options.view != "flow" && options.view != "bandwidth") {
    return fail("--view is speedup, bandwidth, flow, timeline, memory or roofline; got '" +
                options.view + "'");
  }
  lab.requested_view = options.view;
  if (script.level >= 0) {
    if (script.level > lab.top_level()) {
      return fail(lab.lesson().info().id + " has fusion levels 0.." + std::to_string(lab.top_level()));
    }
    lab.set_shown_level(script.level);
  }
  ScreenshotPlan plan(screenshot, seconds_now(), script.then_sizes, script.sweep);

  ScriptRunner runner(script.commands);
  std::vector<double> frame_ms;
  while (!glfwWindowShouldClose(window.handle)) {
    // Power saving: sleep until input (or a slow tick) unless something is changing.
    if (headless) {
      glfwPollEvents();
    } else if (lab.animating()) {
      glfwWaitEventsTimeout(1.0 / 60.0);
    } else {
      glfwWaitEventsTimeout(0.5);
    }
    const double now = seconds_now();
    const double frame_start = now;  // the frame's own work: update, layout, render, swap
    lab.update(now);
    if (lab.replay() && !replay_announced) {  // the terminal says it too, not only the window
      std::printf("fusionlab: %s\n", gui::replay_headline(*lab.replay()).c_str());
      std::fflush(stdout);
      replay_announced = true;
    }
    const bool shoot = plan.shoot_this_frame(lab, now);
    ScriptRunner::Step script_step = ScriptRunner::Step::run;
    if (runner.active()) {
      script_step = runner.step(lab, now);
      if (script_step == ScriptRunner::Step::error) return fail(runner.error());
      if (script_step == ScriptRunner::Step::quit) return 0;
    }

    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    draw_frame(lab, now);
    ImGui::Render();

    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window.handle, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x, bg.y, bg.z, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

    if (script_step == ScriptRunner::Step::shoot) {
      glFinish();
      std::vector<uint8_t> rgb;
      Status st = gui::read_back_buffer(fb_w, fb_h, &rgb);
      if (st.ok()) st = gui::write_png_atomic(runner.shot_path(), fb_w, fb_h, rgb);
      if (!st.ok()) return fail("cannot save the screenshot: " + st.message());
      std::printf("%s\n", runner.shot_path().c_str());
      std::fflush(stdout);
    }
    if (shoot) {
      glFinish();
      std::vector<uint8_t> rgb;
      Status st = gui::read_back_buffer(fb_w, fb_h, &rgb);
      if (st.ok()) st = gui::write_png_atomic(options.screenshot_path, fb_w, fb_h, rgb);
      if (!st.ok()) return fail("cannot save the screenshot: " + st.message());
      std::printf("%s\n", options.screenshot_path.c_str());
      if (options.frame_stats) print_frame_stats(frame_ms, lab);
      return 0;
    }
    glfwSwapBuffers(window.handle);
    // Frame time while the engine works (or a sweep runs): the window must stay at 60 fps.
    if (lab.sweeping() || lab.status().busy || lab.waiting_for_result()) {
      frame_ms.push_back((seconds_now() - frame_start) * 1e3);
    }
    // Software GL under Xvfb may not wait for vsync: do not spin while waiting for a result.
    if (headless) std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
  if (screenshot) return fail("the window was closed before the screenshot was taken");
  return 0;
}

int run_gui(const GuiOptions& options) {
  WindowScript script;
  script.lesson = options.lesson;
  script.level = options.level;
  script.sweep = options.sweep;
  if (!options.script_path.empty()) {
    if (!options.screenshot_path.empty()) {
      return fail("--script takes its pictures with its own `screenshot` command; drop --screenshot");
    }
    // Checked before any window opens: a bad line is named at once.
    const Status loaded = gui::load_script(options.script_path, options.out_dir, &script.commands);
    if (!loaded.ok()) return fail(loaded.message());
    if (script.commands.commands.empty()) return fail(options.script_path + ": the script has no commands");
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
