// Scripted sessions (`fusionlab --script FILE --out-dir DIR`): a text file of commands that drive
// every control of the window as a learner would, for reproducible teaching figures and tests.
// docs/SCRIPTING.md lists the commands with examples.
//
//   # a comment
//   lesson ID | size N | level N|top | precision fp32|bf16 | cache cold|warm
//   view speedup|bandwidth|flow|timeline|memory|roofline
//   sweep | cancel-sweep | wait [SECONDS]
//   caption on|off                          the caption strip under later screenshots
//   phases on|off                           the Timeline view's phase lanes (live: measured)
//   window-size W H | window-size WxH       resize the window (pixels) for later screenshots
//   key NAME                                press a keyboard shortcut (F, S, 1-6, Left, Space...)
//   screenshot NAME.png                     the whole window
//   screenshot view [VIEW] NAME.png         only the views panel (VIEW first brought forward)
//   open RECORDING                          replay a recording (files or folders, commas)
//   compare RECORDING | compare off         overlay a second recording on the plots
//   export-trace NAME.json[.gz] | export-csv NAME.csv | save-session NAME.json
//   quit
//
// Everything is checked before the window opens: verbs, arguments, lessons, sizes, output names
// and the recordings named (loaded once to check them). A script can neither run programs nor
// write outside --out-dir: every output is a plain name (letters, digits, '.', '_', '-'; no
// folders, no "..") inside it, replaced atomically. Recordings are only read. An error names the
// script's file and line and stops the run with a failing exit code.
#pragma once

#include <string>
#include <vector>

#include "kernels/status.h"

namespace fl::gui {

struct ScriptCommand {
  int line = 0;
  std::string verb;
  std::string arg;                // the last word (the output name, the value); empty if none
  std::vector<std::string> args;  // every word after the verb
  // open / compare: the recording's paths, resolved (see resolve_recording_paths).
  std::vector<std::string> paths;
  // screenshot: only the views panel; `view` (may be empty) is brought forward first.
  bool view_only = false;
  std::string view;
  // window-size: the size asked for, in pixels.
  int width = 0, height = 0;
};

struct Script {
  std::string path;     // for messages
  std::string out_dir;  // where outputs go
  std::vector<ScriptCommand> commands;
};

// Whether `name` is a plain output name with one of `extensions` (".png", ".json.gz", ...):
// letters, digits, '.', '_' and '-', not starting with '.', no "..", no folder.
bool plain_output_name(const std::string& name, const std::vector<std::string>& extensions);

// RECORDING as a script (or the File menu) names it: comma-separated files or folders. A relative
// path that does not exist from the working directory is looked up beside the shipped assets
// folder, so "assets/recordings/h100-2026-11-27" works from any folder.
std::vector<std::string> resolve_recording_paths(const std::string& text);

// Reads and checks every line before the window opens; makes --out-dir if it does not exist.
Status load_script(const std::string& path, const std::string& out_dir, Script* out);

// The checks of load_script on a script's text already read; `path` names it in messages. Makes
// --out-dir as load_script does.
Status script_from_text(const std::string& contents, const std::string& path,
                        const std::string& out_dir, Script* out);

}  // namespace fl::gui
