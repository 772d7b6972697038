// The window's state (gui::Lab) over a recording, without a window: it learns it replays, snaps
// the size to recorded sizes, moves to a recorded lesson when the chosen one is not recorded,
// and reports what is not recorded. Then the factory the window uses without a GPU (--no-gpu
// here) finds the shipped recording.
#include <gtest/gtest.h>

#include "app/gui/backend_choice.h"
#include "app/gui/lab.h"
#include "tests/support/lab_pump.h"
#include "tests/support/recorded.h"
#include "viz/speedup_view.h"

namespace fl::gui {
namespace {

using testing_support::lab_over;
using testing_support::pump;
using testing_support::settled;

// Level 0 takes 20 us plus 1 us per million elements, the fused level about half.
Measurement recorded(const std::string& lesson, int64_t size, int level, Precision p,
                     int64_t inner = 0) {
  const double chain_us = level == 0 ? 20.0 + size * 1e-6 : 10.0 + size * 5e-7;
  return testing_support::recorded_measurement(lesson, size, level, chain_us, p, CacheMode::cold,
                                               inner);
}

Session session_of(std::vector<Measurement> ms) {
  return testing_support::recorded_session(std::move(ms));
}

TEST(LabReplay, SnapsToRecordedSizesAndServesThem) {
  std::vector<Measurement> ms;
  for (int64_t size : {int64_t(1) << 10, int64_t(1) << 20, int64_t(1) << 26}) {
    ms.push_back(recorded("gelu_scale", size, 0, Precision::fp32));
    ms.push_back(recorded("gelu_scale", size, 1, Precision::fp32));
  }
  auto lab = lab_over(session_of(ms));
  double now = 0;
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));
  ASSERT_NE(lab->replay(), nullptr);
  EXPECT_EQ(lab->status().backend_kind, "recorded");
  EXPECT_EQ(lab->status().device.name, "NVIDIA H200");
  EXPECT_EQ(replay_headline(*lab->replay()),
            "Replaying a recording made on NVIDIA H200 on 2026-11-21 (chosen in a test)");
  EXPECT_EQ(lab->recorded_sizes(), (std::vector<int64_t>{1 << 10, 1 << 20, 1 << 26}));
  // The default size (16M) is not recorded: the nearest on a log scale, 64M, is asked and shown.
  EXPECT_EQ(lab->size(), 1 << 26);
  ASSERT_EQ(lab->current().size(), 2u);
  EXPECT_EQ(lab->current()[0].size, 1 << 26);
  EXPECT_TRUE(lab->last_error().empty());

  lab->set_size(3 << 20, now);  // a drag to 3M stops at 1M
  EXPECT_EQ(lab->size(), 1 << 20);
  lab->release_size(now);
  ASSERT_TRUE(pump(*lab, &now, [&] {
    return settled(*lab) && !lab->current().empty() && lab->current()[0].size == (1 << 20);
  }));
  EXPECT_EQ(lab->history().size(), 6u)
      << "the whole recorded curve (three sizes, two levels each) without a sweep";
  EXPECT_EQ(lab->size(), 1 << 20) << "filling in the curve leaves the slider alone";

  // A cache mode the recording lacks: no sizes to stop at, and the refusal says what there is.
  lab->set_cache(CacheMode::warm, now);
  EXPECT_TRUE(lab->recorded_sizes().empty());
  EXPECT_FALSE(lab->recorded("gelu_scale", Precision::fp32, CacheMode::warm));
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab) && !lab->last_error().empty(); }));
  EXPECT_EQ(lab->last_error(),
            "gelu_scale in fp32/warm is not in this recording: it is recorded in fp32/cold only.");
}

// Replaying, the whole recorded curve of the lesson, precision and cache mode is drawn at once,
// and each precision's curve is still there after switching to the other and back.
TEST(LabReplay, DrawsTheWholeRecordedCurveAndKeepsEachPrecisionsCurve) {
  std::vector<Measurement> ms;
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    for (int64_t size : {int64_t(1) << 10, int64_t(1) << 14, int64_t(1) << 20, int64_t(1) << 26}) {
      ms.push_back(recorded("gelu_scale", size, 0, p));
      ms.push_back(recorded("gelu_scale", size, 1, p));
    }
  }
  auto lab = lab_over(session_of(ms));
  double now = 0;
  const auto curve = [&](Precision p) {
    return viz::speedup_series(lab->history(), "gelu_scale", p, CacheMode::cold, 1).size();
  };
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab) && curve(Precision::fp32) == 4; }));
  EXPECT_FALSE(lab->sweeping());
  EXPECT_EQ(lab->size(), int64_t(1) << 26) << "the slider stays where it was";
  ASSERT_FALSE(lab->current().empty());
  EXPECT_EQ(lab->current()[0].size, int64_t(1) << 26) << "the panel shows the slider's size";
  lab->choose_precision(Precision::bf16, now);
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab) && curve(Precision::bf16) == 4; }));
  EXPECT_EQ(curve(Precision::fp32), 4u) << "fp32's curve is kept while bf16 is shown";
  lab->choose_precision(Precision::fp32, now);
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));
  EXPECT_EQ(curve(Precision::fp32), 4u);
  EXPECT_EQ(curve(Precision::bf16), 4u);
}

TEST(LabReplay, MovesToARecordedLessonAndPrecision) {
  auto lab = lab_over(session_of({recorded("bias_gelu", 2, 0, Precision::bf16, 768),
                                  recorded("bias_gelu", 2, 1, Precision::bf16, 768),
                                  recorded("bias_gelu", 262144, 0, Precision::bf16, 768),
                                  recorded("bias_gelu", 262144, 1, Precision::bf16, 768)}));
  double now = 0;
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));
  EXPECT_EQ(lab->lesson().info().id, "bias_gelu");
  EXPECT_EQ(lab->precision(), Precision::bf16);
  EXPECT_EQ(lab->size(), 262144) << "default 16384 rows: 262144 is nearer than 2 on a log scale";
  ASSERT_EQ(lab->current().size(), 2u);
  EXPECT_EQ(lab->current()[1].precision, Precision::bf16);
  EXPECT_TRUE(lab->last_error().empty());
}

TEST(LabReplay, ALiveLabHasNoReplay) {
  auto board = std::make_shared<ReplayBoard>();
  Lab lab(
      [](std::unique_ptr<MeasureBackend>*) { return Status::Error("No NVIDIA GPU was found."); },
      board);
  double now = 0;
  ASSERT_TRUE(pump(lab, &now, [&] { return lab.status().state == EngineState::unavailable; }));
  EXPECT_EQ(lab.replay(), nullptr);
  EXPECT_TRUE(lab.recorded("gelu_scale", Precision::bf16, CacheMode::warm));
}

TEST(BackendChoice, WithoutAGpuTheShippedRecordingIsReplayed) {
  ASSERT_FALSE(find_assets_folder().empty()) << "looked in the source tree's assets too";
  auto board = std::make_shared<ReplayBoard>();
  Lab lab(live_or_shipped_recording(/*force_no_gpu=*/true, board), board);
  double now = 0;
  ASSERT_TRUE(pump(lab, &now, [&] { return settled(lab); }));
  ASSERT_NE(lab.replay(), nullptr);
  EXPECT_EQ(lab.replay()->why, "no GPU used: started with --no-gpu");
  EXPECT_EQ(lab.status().backend_kind, "recorded");
  EXPECT_FALSE(lab.replay()->recording.device.name.empty());
  EXPECT_EQ(lab.lesson().info().id, "gelu_scale");
  EXPECT_FALSE(lab.current().empty()) << lab.last_error();
  for (const Measurement& m : lab.current()) EXPECT_EQ(m.size, lab.size());
}

}  // namespace
}  // namespace fl::gui

namespace fl::gui {
namespace {

// "Sweep sizes" fills the curve: every recorded size is measured in turn, the progress reaches
// 1, and the speedup series then has one point per size. Moving the slider cancels a sweep.
TEST(LabReplay, SweepFillsTheCurveAndTheSliderCancelsIt) {
  std::vector<Measurement> ms;
  const std::vector<int64_t> sizes = {int64_t(1) << 10, int64_t(1) << 14, int64_t(1) << 20,
                                      int64_t(1) << 24, int64_t(1) << 26};
  for (int64_t size : sizes) {
    ms.push_back(recorded("gelu_scale", size, 0, Precision::fp32));
    ms.push_back(recorded("gelu_scale", size, 1, Precision::fp32));
  }
  auto lab = lab_over(session_of(ms));
  double now = 0;
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));
  ASSERT_TRUE(lab->select_lesson("gelu_scale", now));
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));

  lab->start_sweep();
  EXPECT_TRUE(lab->sweeping());
  EXPECT_LT(lab->sweep_progress(), 1.0);
  ASSERT_TRUE(pump(*lab, &now, [&] { return !lab->sweeping() && settled(*lab); }));
  const auto series =
      viz::speedup_series(lab->history(), "gelu_scale", Precision::fp32, CacheMode::cold);
  ASSERT_EQ(series.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(series[i].size, sizes[i]);

  // The fusion slider at level 0 plots level 0 against itself: exactly 1.0 everywhere.
  lab->set_shown_level(0);
  EXPECT_EQ(lab->shown_level(), 0);
  for (const auto& p : viz::speedup_series(lab->history(), "gelu_scale", Precision::fp32,
                                           CacheMode::cold, lab->shown_level())) {
    EXPECT_DOUBLE_EQ(p.speedup, 1.0);
  }

  lab->start_sweep();
  lab->set_size(int64_t(1) << 20, now);  // the learner grabs the slider
  EXPECT_FALSE(lab->sweeping());
}

}  // namespace
}  // namespace fl::gui

namespace fl::gui {
namespace {

// The tensor-core lessons open at bf16, the memory-bound ones at fp32, until the learner picks a
// precision: from then on every lesson keeps it. A lesson not recorded in bf16 keeps fp32.
TEST(LabReplay, GemmLessonsOpenAtBf16UntilAPrecisionIsChosen) {
  std::vector<Measurement> ms;
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    for (int level = 0; level < 2; ++level) {
      ms.push_back(recorded("gelu_scale", int64_t(1) << 24, level, p));
      ms.push_back(recorded("ffn", 16384, level, p, 768));
    }
  }
  ms.push_back(recorded("linear_gelu", 16384, 0, Precision::fp32, 768));
  ms.push_back(recorded("linear_gelu", 16384, 1, Precision::fp32, 768));
  auto lab = lab_over(session_of(ms));
  double now = 0;
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));
  ASSERT_EQ(lab->lesson().info().id, "gelu_scale");
  EXPECT_EQ(lab->precision(), Precision::fp32);

  ASSERT_TRUE(lab->select_lesson("ffn", now));
  EXPECT_EQ(lab->precision(), Precision::bf16);
  ASSERT_TRUE(lab->select_lesson("gelu_scale", now));
  EXPECT_EQ(lab->precision(), Precision::fp32);
  ASSERT_TRUE(lab->select_lesson("linear_gelu", now));
  EXPECT_EQ(lab->precision(), Precision::fp32) << "linear_gelu is recorded in fp32 only";
  EXPECT_FALSE(lab->precision_chosen());

  lab->choose_precision(Precision::fp32, now);
  ASSERT_TRUE(lab->select_lesson("ffn", now));
  EXPECT_EQ(lab->precision(), Precision::fp32) << "the learner's choice wins";
  EXPECT_TRUE(lab->precision_chosen());
}

TEST(OpeningPrecision, FollowsTheLessonsStory) {
  LessonInfo info;
  info.precisions = {Precision::fp32, Precision::bf16};
  info.id = "ffn";
  EXPECT_EQ(opening_precision(info), Precision::bf16);
  info.id = "gelu_scale";
  EXPECT_EQ(opening_precision(info), Precision::fp32);
  info.id = "attention";
  info.precisions = {Precision::fp32};
  EXPECT_EQ(opening_precision(info), Precision::fp32) << "no bf16 kernels: fp32";
}

}  // namespace
}  // namespace fl::gui
