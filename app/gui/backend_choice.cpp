#include "app/gui/backend_choice.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>
#include <utility>

#ifndef FUSIONLAB_REPLAY_ONLY
#include "app/measure/live_backend.h"
#endif

#ifndef FUSIONLAB_SOURCE_ASSETS_DIR
#define FUSIONLAB_SOURCE_ASSETS_DIR ""
#endif

namespace fl::gui {
namespace {

namespace fs = std::filesystem;

// A sentence turned into a clause: "No NVIDIA GPU was found." -> "no NVIDIA GPU was found".
// Words in capitals ("CUDA ...") keep their first letter.
std::string as_clause(std::string sentence) {
  while (!sentence.empty() && (sentence.back() == '.' || sentence.back() == ' ')) {
    sentence.pop_back();
  }
  if (sentence.size() > 1 && std::isupper(static_cast<unsigned char>(sentence[0])) &&
      std::islower(static_cast<unsigned char>(sentence[1]))) {
    sentence[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(sentence[0])));
  }
  return sentence;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

std::vector<std::string> asset_folder_candidates() {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.has_parent_path()) {
    const fs::path dir = exe.parent_path();
    out.push_back((dir / ".." / "share" / "fusionlab" / "assets").lexically_normal().string());
    out.push_back((dir / ".." / "assets").lexically_normal().string());
  }
  const std::string source_tree = FUSIONLAB_SOURCE_ASSETS_DIR;
  if (!source_tree.empty()) out.push_back(source_tree);
  return out;
}

std::string find_assets_folder() {
  for (const std::string& dir : asset_folder_candidates()) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return dir;
  }
  return "";
}

Status load_shipped_recording(std::unique_ptr<ReplayBackend>* out) {
  const std::string assets = find_assets_folder();
  if (assets.empty()) {
    return Status::Error("no assets folder was found (looked in " +
                         joined(asset_folder_candidates()) + ")");
  }
  const fs::path recordings = fs::path(assets) / "recordings";
  std::error_code ec;
  std::vector<fs::path> folders;
  for (const auto& entry : fs::directory_iterator(recordings, ec)) {
    std::error_code entry_ec;
    if (entry.is_directory(entry_ec)) folders.push_back(entry.path());
  }
  if (folders.empty()) return Status::Error("no recordings in " + recordings.string());
  std::sort(folders.begin(), folders.end());
  std::unique_ptr<ReplayBackend> best;
  std::string first_problem;
  for (const fs::path& folder : folders) {
    std::unique_ptr<ReplayBackend> candidate;
    const Status st = load_recording({folder.string()}, &candidate);
    if (!st.ok()) {
      if (first_problem.empty()) first_problem = st.message();
      continue;
    }
    // The newest; of equal age, the later folder name.
    if (!best || candidate->summary().last_utc >= best->summary().last_utc) {
      best = std::move(candidate);
    }
  }
  if (!best)
    return Status::Error("no recording in " + recordings.string() + " loads: " + first_problem);
  *out = std::move(best);
  return Status::Ok();
}

Engine::BackendFactory live_or_shipped_recording(bool force_no_gpu,
                                                 std::shared_ptr<ReplayBoard> board) {
  return [force_no_gpu, board](std::unique_ptr<MeasureBackend>* out) -> Status {
    std::string why, live_problem;
    if (force_no_gpu) {
      why = "no GPU used: started with --no-gpu";
      live_problem = "Started with --no-gpu";
    } else {
#ifdef FUSIONLAB_REPLAY_ONLY  // built without CUDA (FUSIONLAB_CUDA=OFF): recordings only
      why = "no usable GPU here: this build has no CUDA, so it replays recordings only";
      live_problem = "No usable GPU here (this build has no CUDA)";
#else
      std::unique_ptr<LiveBackend> backend;
      const Status st = LiveBackend::create(interactive_live_options(), &backend);
      if (st.ok()) {
        *out = std::move(backend);
        return Status::Ok();
      }
      why = "no usable GPU here: " + as_clause(st.message());
      live_problem = "No usable GPU here (" + as_clause(st.message()) + ")";
#endif
    }
    std::unique_ptr<ReplayBackend> replay;
    const Status loaded = load_shipped_recording(&replay);
    if (!loaded.ok()) {
      return Status::Error(live_problem + ", and no recording to show instead (" +
                           as_clause(loaded.message()) + ").");
    }
    board->post({why, replay->summary()});
    *out = std::move(replay);
    return Status::Ok();
  };
}

Engine::BackendFactory recorded_backend(std::unique_ptr<ReplayBackend> backend, std::string why,
                                        std::shared_ptr<ReplayBoard> board) {
  // std::function must be copyable: the backend waits in a shared slot until the worker takes it.
  auto slot = std::make_shared<std::unique_ptr<ReplayBackend>>(std::move(backend));
  return [slot, why = std::move(why), board](std::unique_ptr<MeasureBackend>* out) -> Status {
    if (!*slot) return Status::Error("the recording was already handed to an engine");
    board->post({why, (*slot)->summary()});
    *out = std::move(*slot);
    return Status::Ok();
  };
}

}  // namespace fl::gui
