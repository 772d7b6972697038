// fusionlab: the GUI by default, headless subcommands for benchmarks and scripts.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/cli.h"
#include "model/file_io.h"
#include "app/measure/replay_backend.h"
#include "kernels/catalog.h"
#include "fusionlab_build_info.h"
#if FUSIONLAB_GUI
#include "app/gui/gui.h"
#include "app/gui/settings.h"
#endif

namespace fl {
std::string app_version() {
  return FUSIONLAB_VERSION;
}
}  // namespace fl

namespace {

// The top-level options (the window's), bound before parsing. A build without the window
// (FUSIONLAB_GUI=OFF) still accepts them, to say why it cannot follow them.
struct TopOptions {
  std::string screenshot;
  bool force = false;
  bool no_gpu = false;
  std::string lesson;
  int level = -1;
  bool sweep = false;
  std::string script_path, out_dir;
  bool frame_stats = false;
  std::string view = "speedup";
  std::vector<std::string> replay, compare;
#if FUSIONLAB_GUI
  fl::GuiOptions window;  // --size, --scale, the settings and --lessons-dir
#endif
};

void add_top_options(CLI::App& app, TopOptions* o) {
  app.add_option("--screenshot", o->screenshot,
                 "Render the window, wait for the first measurement, save it as PNG and exit")
      ->type_name("OUT.png");
  app.add_flag("--force", o->force, "With --screenshot: replace OUT.png if it exists");
  app.add_flag("--no-gpu", o->no_gpu,
               "Start as on a machine without a GPU, even if one is present: the window replays "
               "the recording shipped in assets/recordings");
  app.add_option("--lesson", o->lesson, "Open the window on this lesson (see `fusionlab lessons`)");
  app.add_option("--level", o->level,
                 "Start the fusion slider at this level (default: fully fused)");
  app.add_flag("--sweep", o->sweep,
               "With --screenshot: sweep every size first, so the whole speedup curve is drawn");
  app.add_option("--script", o->script_path,
                 "Drive the window from a script of commands (docs/SCRIPTING.md) and exit")
      ->type_name("FILE");
  app.add_option("--out-dir", o->out_dir,
                 "Where a script's outputs go (screenshots, traces, CSV, sessions; default: .)")
      ->type_name("DIR");
  app.add_flag("--frame-stats", o->frame_stats,
               "With --screenshot: print the frame times measured while the engine worked");
}

#if FUSIONLAB_GUI
// The window's size and scale, and its remembered settings (app/gui/settings.h).
void add_window_options(CLI::App& app, fl::GuiOptions* window) {
  app.add_option_function<std::string>(
         "--size",
         [window](const std::string& text) {
           std::string why;
           if (!fl::gui::parse_window_size(text, &window->width, &window->height, &why)) {
             throw CLI::ValidationError("--size", why);
           }
         },
         "The window's size in pixels, for the window and for --screenshot/--script pictures "
         "(default: 1280x720 for pictures, else the remembered size or 80% of the screen)")
      ->type_name("WxH");
  app.add_option("--scale", window->scale,
                 "Multiply the monitor's content scale (fonts, spacing, lines) by F")
      ->check(CLI::Range(fl::gui::kMinScale, fl::gui::kMaxScale))
      ->type_name("F");
  app.add_flag("--reset-settings", window->reset_settings,
               "Forget the remembered window size, place, lesson, view and panel sizes");
  app.add_flag("--use-settings", window->use_settings,
               "With --screenshot or --script: read and write the remembered settings too");
  app.add_option("--lessons-dir", window->lessons_dir,
                 "A teacher's copies of the lesson texts (<lesson id>.md) that replace the shipped "
                 "ones (default: $XDG_DATA_HOME/fusionlab/lessons, not for --screenshot/--script)")
      ->type_name("DIR");
  app.add_option("--peers", window->peers_path,
                 "A PyTorch peer file (scripts/peers.py) for the speedup plot (default: the one "
                 "shipped beside the recordings)")
      ->type_name("PEERS.json");
  app.add_flag("--recover", window->recover,
               "Reopen the measurements of the window that ended unexpectedly last (a crash or a "
               "kill), from its crash journal (docs/RELIABILITY.md)");
}
#endif

void add_view_and_recording_options(CLI::App& app, TopOptions* o) {
  app.add_option("--view", o->view,
                 "The view shown first: speedup, bandwidth, flow, timeline, memory or roofline")
      ->capture_default_str();
  app.add_option("--replay", o->replay,
                 "Open the window on recorded sessions of one GPU (files, or folders of .json "
                 "files) instead of measuring live; comma-separated or repeated")
      ->delimiter(',')
      ->type_name("SESSION.json[,MORE.json]");
  app.add_option("--compare", o->compare,
                 "Overlay a second recording (files or folders of one GPU) on the speedup and "
                 "bandwidth plots")
      ->delimiter(',')
      ->type_name("SESSION.json[,MORE.json]");
}

CLI::App* add_bench_command(CLI::App& app, fl::BenchOptions* o) {
  CLI::App* bench = app.add_subcommand("bench", "Measure lessons on the GPU and print a table");
  bench->add_option("--lesson", o->lessons, "Lesson id(s), comma-separated, or all")
      ->capture_default_str();
  bench->add_option("--sizes", o->sizes, "Sizes, e.g. 1K,1M,16M,1000003")->capture_default_str();
  bench->add_option("--levels", o->levels, "Fusion levels: all, or e.g. 0,1")
      ->capture_default_str();
  bench->add_option("--precision", o->precision, "fp32 or bf16")->capture_default_str();
  bench->add_option("--variant", o->variants,
                    "Run this kernel variant instead of the level table's choice, e.g. "
                    "ffn_fused=ffn_split (`fusionlab lessons` lists them); repeatable");
  bench->add_option("--choose-as", o->choose_as,
                    "Choose kernel variants as a GPU of this compute capability would (e.g. 8.6: "
                    "the portable kernels, no sm_90a ones), running them on this GPU");
  bench
      ->add_option(
          "--cache", o->cache,
          "cold: evict L2 (read-only pass over 3x L2) before every repetition; warm: don't")
      ->capture_default_str();
  bench->add_option("--reps", o->min_repetitions, "Minimum repetitions per level")
      ->capture_default_str();
  bench
      ->add_option("--seconds", o->seconds_per_level,
                   "Time budget per level; repetitions adapt to it")
      ->capture_default_str();
  bench->add_option("--out", o->out_session, "Save the session as JSON")->type_name("SESSION.json");
  bench->add_option("--csv", o->out_csv, "Save one row per launch as CSV")->type_name("FILE.csv");
  bench
      ->add_option("--peers", o->peers,
                   "A peer file (scripts/peers.py): PyTorch's times at the same sizes under each "
                   "lesson's table")
      ->type_name("PEERS.json");
  fl::add_bench_measure_options(bench, o);
  return bench;
}

CLI::App* add_latency_command(CLI::App& app, fl::LatencyOptions* o) {
  CLI::App* latency = app.add_subcommand(
      "latency", "Drag a slider by script through the live engine and report how fast it answers");
  latency->add_option("--rate", o->requests_per_second, "Requests per second while dragging")
      ->capture_default_str();
  latency->add_option("--drags", o->drags, "Number of drags, each followed by a rest")
      ->capture_default_str();
  latency->add_option("--steps", o->requests_per_drag, "Requests per drag")->capture_default_str();
  latency->add_option("--rest-ms", o->rest_ms, "Rest after each drag")->capture_default_str();
  latency->add_option("--max-size", o->max_size, "Largest gelu_scale size")->capture_default_str();
  latency->add_option("--minutes", o->minutes,
                      "Soak: drag every lesson, size, level, precision and cache mode for this "
                      "many minutes, sampling resident and GPU memory (docs/RELIABILITY.md)");
  latency->add_option("--sample-seconds", o->sample_seconds, "Soak: seconds between samples")
      ->capture_default_str();
  latency->add_option("--soak-csv", o->soak_csv, "Soak: write the samples to this CSV")
      ->type_name("FILE.csv");
  latency->add_option("--soak-svg", o->soak_svg, "Soak: plot the samples into this SVG")
      ->type_name("FILE.svg");
  latency->add_option("--replay", o->replay, "Soak a recording instead of the GPU (no GPU needed)")
      ->type_name("SESSION.json|DIR");
  latency->add_option("--cycles", o->cycles,
                      "Soak in cycles: measure every lesson, size of the grid, level, precision "
                      "and cache mode once per cycle, this many cycles, sampling memory at each "
                      "cycle's end (docs/RELIABILITY.md)");
  latency
      ->add_option("--sizes-per-lesson", o->sizes_per_lesson,
                   "Soak in cycles: sizes of each lesson's grid (its smallest, largest and "
                   "between; a recording's own sizes with --replay)")
      ->capture_default_str();
  latency->add_option("--max-minutes", o->max_minutes,
                      "Soak in cycles: start no cycle that would end after this many minutes");
  latency
      ->add_option("--plot-csv", o->plot_csv,
                   "Only plot this soak CSV (e.g. the window soak's) into --soak-svg")
      ->type_name("FILE.csv");
  return latency;
}

#if FUSIONLAB_GUI
int open_window(const TopOptions& o) {
  // The screenshot's file is checked before the window opens: never over an existing file
  // without --force, never onto a folder, device, FIFO or socket, nor into a missing folder.
  if (!o.screenshot.empty()) {
    if (const fl::Status st =
            fl::check_output_file(o.screenshot, o.force, "; pass --force to overwrite it");
        !st.ok()) {
      std::fprintf(stderr, "fusionlab: %s\n", st.message().c_str());
      return fl::kExitFailure;
    }
  }
  fl::GuiOptions gui = o.window;
  gui.screenshot_path = o.screenshot;
  gui.screenshot_replace = o.force;
  gui.force_no_gpu = o.no_gpu;
  gui.replay_paths = o.replay;
  gui.compare_paths = o.compare;
  gui.lesson = o.lesson;
  gui.level = o.level;
  gui.sweep = o.sweep;
  gui.view = o.view;
  gui.frame_stats = o.frame_stats;
  gui.script_path = o.script_path;
  gui.out_dir = o.out_dir;
  return fl::run_gui(gui);
}
#else
// A build without the window: a bad recording is named as in a GUI build; anything else that
// needs the window is refused with the subcommands that remain.
int open_window(const TopOptions& o) {
  if (!o.script_path.empty()) {
    std::fprintf(
        stderr,
        "fusionlab: this build has no window (FUSIONLAB_GUI=OFF), so --script cannot run\n");
    return 2;
  }
  if (!o.replay.empty()) {
    // A good recording still has no window to show it in.
    std::unique_ptr<fl::ReplayBackend> recording;
    const fl::Status loaded = fl::load_recording(o.replay, &recording);
    if (!loaded.ok()) {
      std::fprintf(stderr, "fusionlab: %s\n", loaded.message().c_str());
      return 1;
    }
  }
  std::string unavailable;  // the options that need the window
  if (!o.replay.empty() && !o.screenshot.empty()) {
    unavailable = ", so --replay and --screenshot are unavailable";
  } else if (!o.replay.empty() || !o.screenshot.empty()) {
    unavailable =
        std::string(", so ") + (o.replay.empty() ? "--screenshot" : "--replay") + " is unavailable";
  }
  std::fprintf(stderr,
               "fusionlab: this build has no window (configured with -DFUSIONLAB_GUI=OFF)%s; "
               "use a subcommand: lessons, bench, export-trace, export-csv (see --help)\n",
               unavailable.c_str());
  return 2;
}
#endif

// --lesson and --level, checked before the window opens or any GPU or file work: a lesson that
// exists, and a level the lesson has (the lesson shown first when --lesson is not given is only
// known later, so then any lesson's: the window checks it again against the one it shows).
std::string check_lesson_and_level(const TopOptions& o, bool level_given) {
  const fl::Lesson* lesson = nullptr;
  if (!o.lesson.empty()) {
    lesson = fl::find_lesson(o.lesson);
    if (lesson == nullptr) {
      return "no lesson '" + fl::shorten_for_message(o.lesson) + "' (fusionlab lessons lists them)";
    }
  }
  if (!level_given) return "";
  int top = 0;
  for (const fl::Lesson* l : fl::lessons()) {
    if (lesson == nullptr || l == lesson) top = std::max(top, l->level_count() - 1);
  }
  if (o.level < 0 || o.level > top) {
    return "--level is 0.." + std::to_string(top) +
           (lesson != nullptr ? " for " + o.lesson : std::string(" (the most any lesson has)")) +
           ", got " + std::to_string(o.level);
  }
  return "";
}

}  // namespace

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

  TopOptions top;
  add_top_options(app, &top);
#if FUSIONLAB_GUI
  add_window_options(app, &top.window);
#endif
  add_view_and_recording_options(app, &top);

  bool lessons_json = false;
  CLI::App* lessons = app.add_subcommand("lessons", "List the lessons and their fusion levels");
  lessons->add_flag("--json", lessons_json, "Machine-readable output");
  fl::TaskListOptions task_options;
  lessons->add_option("--tasks", task_options.lesson,
                      "Print a lesson's megakernel task list instead (gpt2_decode)");
  lessons->add_option("--sms", task_options.blocks, "With --tasks: persistent blocks (SMs)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  lessons->add_option("--tokens", task_options.tokens, "With --tasks: new tokens")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  lessons->add_option("--cache", task_options.cache, "With --tasks: cached tokens")
      ->check(CLI::Range(1, 8192))
      ->capture_default_str();
  fl::BenchOptions bench_options;
  CLI::App* bench = add_bench_command(app, &bench_options);
  fl::LatencyOptions latency_options;
  CLI::App* latency = add_latency_command(app, &latency_options);
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

  if (lessons->parsed()) {
    return task_options.lesson.empty() ? fl::run_lessons(lessons_json)
                                       : fl::run_task_list(task_options);
  }
  if (bench->parsed()) return fl::run_bench(bench_options);
  if (latency->parsed()) return fl::run_latency(latency_options);
  if (export_trace->parsed()) return fl::run_export_trace(trace_options);
  if (export_csv->parsed()) return fl::run_export_csv(csv_options);
  if (const std::string why = check_lesson_and_level(top, app.count("--level") > 0); !why.empty()) {
    std::fprintf(stderr, "fusionlab: %s\n", why.c_str());
    return fl::kExitUsage;
  }
  return open_window(top);
}
