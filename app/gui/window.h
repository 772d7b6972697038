// The window over a backend the caller makes. run_gui() uses the live backend; tests use a fake
// one to screenshot the measured state on machines without a GPU (replay will do the same).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/gui/gui.h"
#include "app/measure/engine.h"

namespace fl {

// Extra steps before a screenshot (tests; the seed of --script): start on `lesson`, and after the
// default size has been measured, measure each of `then_sizes` in turn, as if the slider had
// been moved there.
struct WindowScript {
  std::string lesson;  // empty: the catalog's first
  std::vector<int64_t> then_sizes;
};

// `factory` runs on the engine's worker thread (see Engine). options.force_no_gpu is ignored.
int run_window(const GuiOptions& options, Engine::BackendFactory factory,
               const WindowScript& script = WindowScript());

}  // namespace fl
