// The window over a backend the caller makes. run_gui() uses the live backend or a recording
// (backend_choice.h); tests use a fake one to screenshot the measured state without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app/gui/gui.h"
#include "app/gui/replay_notice.h"
#include "app/gui/script.h"
#include "app/measure/engine.h"

namespace fl {

// Extra steps before a screenshot (tests; the seed of --script): start on `lesson`, and after the
// default size has been measured, measure each of `then_sizes` in turn, as if the slider had
// been moved there.
struct WindowScript {
  std::string lesson;  // empty: the catalog's first
  std::vector<int64_t> then_sizes;
  int level = -1;        // the fusion slider's position; -1: the lesson's top level
  bool sweep = false;    // before the screenshot, sweep every size (Lab::start_sweep)
  gui::Script commands;  // --script: commands run frame by frame (empty: none)
};

// `factory` runs on the engine's worker thread (see Engine); a factory that may serve a recording
// posts its notice on `replay_board`, and the window then says it replays.
// options.force_no_gpu and options.replay_paths are ignored here (run_gui reads them).
int run_window(const GuiOptions& options, Engine::BackendFactory factory,
               const WindowScript& script = WindowScript(),
               std::shared_ptr<const gui::ReplayBoard> replay_board = nullptr);

}  // namespace fl
