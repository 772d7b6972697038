// fusionlab: the GUI by default, headless subcommands for benchmarks and scripts.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/cli.h"
#include "app/measure/file_io.h"
#include "app/measure/replay_backend.h"
#include "fusionlab_build_info.h"
#if FUSIONLAB_GUI
#include "app/gui/gui.h"
#include "app/gui/settings.h"
#endif

namespace fl {
std::string app_version() { return FUSIONLAB_VERSION; }
}  // namespace fl

int main(int argc, char** argv) {
  CLI::App app{"Fusion Lab: watch kernel fusion make your GPU faster, measured live."};
  app.set_version_flag("--version",
                       std::string("fusionlab ") + FUSIONLAB_VERSION + " (" + FUSIONLAB_BUILD_KIND +
                           (FUSIONLAB_GUI ? ", GUI" : ", headless build: no GUI") + ")");
  app.require_subcommand(0, 1);
  app.footer(
      "Exit status: 0 success; 1 a runtime failure (a file that cannot be read or written, no "
      "usable GPU, a failed measurement); 2 a usage error (an unknown option, a bad value, a "
      "missing argument). Messages go to standard error; -o - writes a CSV or trace to standard "
      "output.");

  std::string screenshot;
  bool no_gpu = false;
  app.add_option("--screenshot", screenshot,
                 "Render the window, wait for the first measurement, save it as PNG and exit")
      ->type_name("OUT.png");
  bool force = false;
  app.add_flag("--force", force, "With --screenshot: replace OUT.png if it exists");
  app.add_flag("--no-gpu", no_gpu,
               "Start as on a machine without a GPU, even if one is present: the window replays "
               "the recording shipped in assets/recordings");
  std::string start_lesson;
  int start_level = -1;
  bool sweep = false;
  app.add_option("--lesson", start_lesson, "Open the window on this lesson (see `fusionlab lessons`)");
  app.add_option("--level", start_level, "Start the fusion slider at this level (default: fully fused)");
  app.add_flag("--sweep", sweep,
               "With --screenshot: sweep every size first, so the whole speedup curve is drawn");
  std::string script_path, out_dir;
  app.add_option("--script", script_path,
                 "Drive the window from a script of commands (docs/SCRIPTING.md) and exit")
      ->type_name("FILE");
  app.add_option("--out-dir", out_dir,
                 "Where a script's outputs go (screenshots, traces, CSV, sessions; default: .)")
      ->type_name("DIR");
  bool frame_stats = false;
  app.add_flag("--frame-stats", frame_stats,
               "With --screenshot: print the frame times measured while the engine worked");
#if FUSIONLAB_GUI
  // The window's size and scale, and its remembered settings (helper A, app/gui/settings.h).
  fl::GuiOptions window_options;
  app.add_option_function<std::string>(
         "--size",
         [&](const std::string& text) {
           std::string why;
           if (!fl::gui::parse_window_size(text, &window_options.width, &window_options.height, &why)) {
             throw CLI::ValidationError("--size", why);
           }
         },
         "The window's size in pixels, for the window and for --screenshot/--script pictures "
         "(default: 1280x720 for pictures, else the remembered size or 80% of the screen)")
      ->type_name("WxH");
  app.add_option("--scale", window_options.scale,
                 "Multiply the monitor's content scale (fonts, spacing, lines) by F")
      ->check(CLI::Range(fl::gui::kMinScale, fl::gui::kMaxScale))->type_name("F");
  app.add_flag("--reset-settings", window_options.reset_settings,
               "Forget the remembered window size, place, lesson, view and panel sizes");
  app.add_flag("--use-settings", window_options.use_settings,
               "With --screenshot or --script: read and write the remembered settings too");
  app.add_option("--lessons-dir", window_options.lessons_dir,
                 "A teacher's copies of the lesson texts (<lesson id>.md) that replace the shipped "
                 "ones (default: $XDG_DATA_HOME/fusionlab/lessons, not for --screenshot/--script)")
      ->type_name("DIR");
#endif
  std::string view = "speedup";
  app.add_option("--view", view, "The view shown first: speedup, bandwidth, flow, timeline, memory or roofline")
      ->capture_default_str();
  std::vector<std::string> replay;
  app.add_option("--replay", replay,
                 "Open the window on recorded sessions of one GPU (files, or folders of .json "
                 "files) instead of measuring live; comma-separated or repeated")
      ->delimiter(',')
      ->type_name("SESSION.json[,MORE.json]");
  std::vector<std::string> compare;
  app.add_option("--compare", compare,
                 "Overlay a second recording (files or folders of one GPU) on the speedup and "
                 "bandwidth plots")
      ->delimiter(',')
      ->type_name("SESSION.json[,MORE.json]");

  bool lessons_json = false;
  CLI::App* lessons = app.add_subcommand("lessons", "List the lessons and their fusion levels");
  lessons->add_flag("--json", lessons_json, "Machine-readable output");

  fl::BenchOptions bench_options;
  CLI::App* bench = app.add_subcommand("bench", "Measure lessons on the GPU and print a table");
  bench->add_option("--lesson", bench_options.lessons, "Lesson id(s), comma-separated, or all")
      ->capture_default_str();
  bench->add_option("--sizes", bench_options.sizes, "Sizes, e.g. 1K,1M,16M,1000003")
      ->capture_default_str();
  bench->add_option("--levels", bench_options.levels, "Fusion levels: all, or e.g. 0,1")
      ->capture_default_str();
  bench->add_option("--precision", bench_options.precision, "fp32 or bf16")->capture_default_str();
  bench->add_option("--cache", bench_options.cache,
                    "cold: evict L2 (read-only pass over 3x L2) before every repetition; warm: don't")
      ->capture_default_str();
  bench->add_option("--reps", bench_options.min_repetitions, "Minimum repetitions per level")
      ->capture_default_str();
  bench->add_option("--seconds", bench_options.seconds_per_level,
                    "Time budget per level; repetitions adapt to it")
      ->capture_default_str();
  bench->add_option("--out", bench_options.out_session, "Save the session as JSON")
      ->type_name("SESSION.json");
  bench->add_option("--csv", bench_options.out_csv, "Save one row per launch as CSV")
      ->type_name("FILE.csv");

  fl::add_bench_measure_options(bench, &bench_options);

  fl::LatencyOptions latency_options;
  CLI::App* latency = app.add_subcommand(
      "latency", "Drag a slider by script through the live engine and report how fast it answers");
  latency->add_option("--rate", latency_options.requests_per_second, "Requests per second while dragging")
      ->capture_default_str();
  latency->add_option("--drags", latency_options.drags, "Number of drags, each followed by a rest")
      ->capture_default_str();
  latency->add_option("--steps", latency_options.requests_per_drag, "Requests per drag")
      ->capture_default_str();
  latency->add_option("--rest-ms", latency_options.rest_ms, "Rest after each drag")->capture_default_str();
  latency->add_option("--max-size", latency_options.max_size, "Largest gelu_scale size")->capture_default_str();

  fl::ExportOptions trace_options, csv_options;
  CLI::App* export_trace = fl::add_export_trace_command(&app, &trace_options);
  CLI::App* export_csv = fl::add_export_csv_command(&app, &csv_options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; any other parse error is a usage error (exit 2),
    // whatever CLI11's own code for it (an unknown option is 109 there).
    const int code = app.exit(e);
    return code == 0 ? fl::kExitOk : fl::kExitUsage;
  }

  if (lessons->parsed()) return fl::run_lessons(lessons_json);
  if (bench->parsed()) return fl::run_bench(bench_options);
  if (latency->parsed()) return fl::run_latency(latency_options);
  if (export_trace->parsed()) return fl::run_export_trace(trace_options);
  if (export_csv->parsed()) return fl::run_export_csv(csv_options);
#if FUSIONLAB_GUI
  // The screenshot's file is checked before the window opens: never over an existing file
  // without --force, never onto a folder, device, FIFO or socket, nor into a missing folder.
  if (!screenshot.empty()) {
    if (const fl::Status st = fl::check_output_file(screenshot, force, "; pass --force to overwrite it");
        !st.ok()) {
      std::fprintf(stderr, "fusionlab: %s\n", st.message().c_str());
      return fl::kExitFailure;
    }
  }
  fl::GuiOptions gui = window_options;
  gui.screenshot_path = screenshot;
  gui.screenshot_replace = force;
  gui.force_no_gpu = no_gpu;
  gui.replay_paths = replay;
  gui.compare_paths = compare;
  gui.lesson = start_lesson;
  gui.level = start_level;
  gui.sweep = sweep;
  gui.view = view;
  gui.frame_stats = frame_stats;
  gui.script_path = script_path;
  gui.out_dir = out_dir;
  return fl::run_gui(gui);
#else
  (void)no_gpu;
  (void)compare;
  (void)start_level;
  (void)sweep;
  (void)view;
  (void)frame_stats;
  (void)force;
  if (!script_path.empty()) {
    std::fprintf(stderr, "fusionlab: this build has no window (FUSIONLAB_GUI=OFF), so --script cannot run\n");
    return 2;
  }
  (void)out_dir;
  if (!replay.empty()) {
    // A bad file is named as in a GUI build; a good one still has no window to show it in.
    std::unique_ptr<fl::ReplayBackend> recording;
    const fl::Status loaded = fl::load_recording(replay, &recording);
    if (!loaded.ok()) {
      std::fprintf(stderr, "fusionlab: %s\n", loaded.message().c_str());
      return 1;
    }
  }
  std::string unavailable;  // the options that need the window
  if (!replay.empty() && !screenshot.empty()) {
    unavailable = ", so --replay and --screenshot are unavailable";
  } else if (!replay.empty() || !screenshot.empty()) {
    unavailable = std::string(", so ") + (replay.empty() ? "--screenshot" : "--replay") +
                  " is unavailable";
  }
  std::fprintf(stderr,
               "fusionlab: this build has no window (configured with -DFUSIONLAB_GUI=OFF)%s; "
               "use a subcommand: lessons, bench, export-trace, export-csv (see --help)\n",
               unavailable.c_str());
  return 2;
#endif
}
