// The window: GLFW + OpenGL 3.3 core (glad) + Dear ImGui. Only in builds with FUSIONLAB_GUI=ON.
#pragma once

#include <string>
#include <vector>

namespace fl {

struct GuiOptions {
  std::string screenshot_path;      // non-empty: render, wait for the first results, save PNG, exit
  bool screenshot_replace = false;  // --force: the PNG may replace an existing file (also one
                                    // that appeared while the window ran)
  // --size WxH: the window's size in pixels. 0: 1280x720 for --screenshot and --script runs;
  // interactive, the remembered size or about 80% of the monitor's work area.
  int width = 0;
  int height = 0;
  // --scale F: multiplies the monitor's content scale (1 for screenshots and scripts): fonts,
  // spacing and line widths.
  float scale = 1.0f;
  // --reset-settings: delete the remembered settings (app/gui/settings.h) and start afresh.
  bool reset_settings = false;
  // --use-settings: let a --screenshot or --script run read and write the settings file too
  // (interactive runs always do; scripted ones do not, so their pictures are reproducible).
  bool use_settings = false;
  bool force_no_gpu = false;  // --no-gpu: behave as on a machine without a driver (replay)
  // --replay: session files (or folders of them) of one GPU to replay, even with a GPU present.
  // Checked before the window opens.
  std::vector<std::string> replay_paths;
  // Where the window starts (teaching material, tests): a lesson id, a fusion level, and whether
  // to sweep every size before a screenshot.
  std::string lesson;
  int level = -1;
  bool sweep = false;
  std::string view = "speedup";  // the views panel's first tab: speedup, timeline or memory
  bool frame_stats = false;      // with --screenshot: print frame times measured while working
  std::string script_path;       // --script FILE (app/gui/script.h)
  std::string out_dir;           // --out-dir: where a script's outputs go (default ".")
  // --compare: a second recording (files or folders of one GPU) overlaid on the speedup and
  // bandwidth plots from the start, as File > Compare with... does. Checked before the window
  // opens.
  std::vector<std::string> compare_paths;
  // --lessons-dir: a teacher's copies of the lessons' texts (<id>.md) that override the shipped
  // ones. Empty: $XDG_DATA_HOME/fusionlab/lessons in an interactive window, none for --screenshot
  // and --script runs (reproducible pictures). app/gui/lesson_text.h.
  std::string lessons_dir;
  std::string peers_path;  // --peers FILE: PyTorch peers (else the shipped peers.json)
  // --recover: reopen the measurements of the window that ended unexpectedly last (its crash
  // journal, model/journal.h).
  bool recover = false;
};

int run_gui(const GuiOptions& options);

}  // namespace fl
