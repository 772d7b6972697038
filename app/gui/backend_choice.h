// Which backend the window measures with (DESIGN.md §3): live when this machine has a usable
// GPU, otherwise the recording shipped in assets/recordings, saying so on screen; with --replay,
// the recording given. Each factory runs on the engine's worker thread (see Engine).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/gui/replay_notice.h"
#include "app/measure/engine.h"

namespace fl::gui {

// Where the assets folder may be, in the order tried: <exe dir>/../share/fusionlab/assets (an
// installed copy), <exe dir>/../assets (a build folder inside the source tree), then the source
// tree's assets folder this binary was built from.
std::vector<std::string> asset_folder_candidates();
// The first candidate that exists; empty when none does.
std::string find_assets_folder();

// The newest recording (by its files' created_utc) among the folders of <assets>/recordings that
// load; each folder is one recording of one GPU. Fails with one sentence saying what was missing.
Status load_shipped_recording(std::unique_ptr<ReplayBackend>* out);

// Live on GPU 0; when that is impossible (no driver, no GPU, the runtime fails to start) or
// `force_no_gpu` (--no-gpu), the shipped recording, with a notice posted on `board` saying why.
// Fails only when neither works.
Engine::BackendFactory live_or_shipped_recording(bool force_no_gpu,
                                                 std::shared_ptr<ReplayBoard> board);

// A recording already loaded (--replay): hands it to the engine and posts the notice.
Engine::BackendFactory recorded_backend(std::unique_ptr<ReplayBackend> backend, std::string why,
                                        std::shared_ptr<ReplayBoard> board);

}  // namespace fl::gui
