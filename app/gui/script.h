// Scripted sessions, first cut (`fusionlab --script FILE --out-dir DIR`): a text file of
// commands that drive the window as a learner would, for reproducible teaching figures and tests.
//
//   # a comment
//   lesson gelu_scale        choose a lesson
//   size 16M                 move the size slider (measured once it rests, as when let go)
//   level 0 | level top      move the fusion slider
//   precision fp32|bf16      cache cold|warm
//   view speedup|flow|timeline|memory|roofline
//   sweep                    start "Sweep sizes"
//   wait                     until every requested measurement (and a sweep) has finished
//   screenshot NAME.png      save the window under --out-dir (replaced atomically)
//   quit                     close the window (also at the end of the file)
//
// A script can neither run commands nor write outside --out-dir: screenshot names are plain
// relative paths with no "..". An error names the script's line and stops the run.
#pragma once

#include <string>
#include <vector>

#include "kernels/status.h"

namespace fl::gui {

struct ScriptCommand {
  int line = 0;
  std::string verb;
  std::string arg;
};

struct Script {
  std::string path;     // for messages
  std::string out_dir;  // where screenshots go
  std::vector<ScriptCommand> commands;
};

// Reads and checks every line (verbs, arguments, output names) before the window opens.
Status load_script(const std::string& path, const std::string& out_dir, Script* out);

}  // namespace fl::gui
