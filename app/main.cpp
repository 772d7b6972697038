// fusionlab: the GUI by default, headless subcommands for benchmarks and scripts.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/cli.h"
#include "fusionlab_build_info.h"
#if FUSIONLAB_GUI
#include "app/gui/gui.h"
#endif

namespace fl {
std::string app_version() { return FUSIONLAB_VERSION; }
}  // namespace fl

int main(int argc, char** argv) {
  CLI::App app{"Fusion Lab: watch kernel fusion make your GPU faster, measured live."};
  app.set_version_flag("--version",
                       std::string("fusionlab ") + FUSIONLAB_VERSION + " (CUDA " +
                           FUSIONLAB_CUDA_VERSION + ", sm_" + FUSIONLAB_CUDA_ARCHS +
                           (FUSIONLAB_GUI ? ", GUI" : ", headless build: no GUI") + ")");
  app.require_subcommand(0, 1);

  std::string screenshot;
  bool no_gpu = false;
  app.add_option("--screenshot", screenshot,
                 "Render the window, wait for the first measurement, save it as PNG and exit")
      ->type_name("OUT.png");
  app.add_flag("--no-gpu", no_gpu, "Start as on a machine without a GPU, even if one is present");

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

  CLI11_PARSE(app, argc, argv);

  if (lessons->parsed()) return fl::run_lessons(lessons_json);
  if (bench->parsed()) return fl::run_bench(bench_options);
#if FUSIONLAB_GUI
  fl::GuiOptions gui;
  gui.screenshot_path = screenshot;
  gui.force_no_gpu = no_gpu;
  return fl::run_gui(gui);
#else
  (void)no_gpu;
  std::fprintf(stderr,
               "fusionlab: this build has no window (configured with -DFUSIONLAB_GUI=OFF)%s; "
               "use a subcommand: lessons, bench (see --help)\n",
               screenshot.empty() ? "" : ", so --screenshot is unavailable");
  return 2;
#endif
}
