// What the window knows about a replay: which recording it serves and why it is not measuring
// live. The backend factory posts it on the engine's worker thread before it returns, so it is
// complete once the engine leaves "starting"; the window's thread reads it then.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "app/measure/replay_backend.h"

namespace fl::gui {

struct ReplayNotice {
  // Why a recording and not this machine's GPU, as a clause: "no usable GPU here: no NVIDIA GPU
  // was found on this machine", "chosen with --replay: nothing runs here".
  std::string why;
  RecordingSummary recording;
};

// "Replaying a recording made on NVIDIA H200 on 2026-11-21 (no usable GPU here: ...)"
inline std::string replay_headline(const ReplayNotice& notice) {
  return "Replaying a recording made on " + notice.recording.device.name + " on " +
         notice.recording.date_text() + " (" + notice.why + ")";
}

class ReplayBoard {
 public:
  void post(ReplayNotice notice) {
    std::lock_guard<std::mutex> lock(mutex_);
    notice_ = std::move(notice);
  }
  std::optional<ReplayNotice> read() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return notice_;
  }

 private:
  mutable std::mutex mutex_;
  std::optional<ReplayNotice> notice_;
};

}  // namespace fl::gui
