// Test support for the window's state without a window (gui::Lab): a Lab over an in-memory
// recording, as --replay makes it, and the loop that runs its frames until something happened.
// Header only; the test links fusionlab_gui.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <utility>

#include "app/gui/backend_choice.h"
#include "app/gui/lab.h"
#include "app/measure/replay_backend.h"
#include "tests/support/recorded.h"

namespace fl::testing_support {

// A Lab replaying `session` (tests/support/recorded.h builds one), named "test.json" and
// "chosen in a test" in the replay banner.
inline std::unique_ptr<gui::Lab> lab_over(Session session) {
  std::unique_ptr<ReplayBackend> backend;
  const Status st = ReplayBackend::create({{"test.json", std::move(session)}}, &backend);
  EXPECT_TRUE(st.ok()) << st.message();
  auto board = std::make_shared<gui::ReplayBoard>();
  return std::make_unique<gui::Lab>(
      gui::recorded_backend(std::move(backend), "chosen in a test", board), board);
}

// Runs the Lab's frames (simulated time, 20 ms apart; the engine's worker runs in real time
// beside them) until `done()` or ~10 s. Returns whether `done()` came true.
template <typename Done>
bool pump(gui::Lab& lab, double* now, Done done) {
  for (int i = 0; i < 2000; ++i) {
    *now += 0.02;
    lab.update(*now);
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// The Lab has an answer and nothing more is coming: the engine is ready, a request finished, no
// slider change or result is pending and no sweep runs.
inline bool settled(const gui::Lab& lab) {
  return lab.status().state == EngineState::ready && lab.requests_finished() > 0 &&
         !lab.waiting_for_result() && !lab.change_pending() && !lab.sweeping();
}

}  // namespace fl::testing_support
