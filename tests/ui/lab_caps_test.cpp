// Bounded memory in the window's state: however long a learner drags the size slider,
// the measurements the Lab keeps stay at their cap (model/caps.h), the newest kept.
#include <gtest/gtest.h>

#include <memory>

#include "app/gui/lab.h"
#include "model/caps.h"
#include "tests/support/lab_pump.h"

namespace fl {
namespace {

// Answers every size at once: level 0 and level 1 of gelu_scale.
class AnySizeBackend final : public MeasureBackend {
 public:
  AnySizeBackend() {
    device_.usable = true;
    device_.name = "Fake GPU (any size)";
  }
  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "fake"; }
  Status measure(const MeasureRequest& request, const CancelCheck&,
                 std::vector<Measurement>* out) override {
    for (int level = 0; level < 2; ++level) {
      Measurement m;
      m.lesson = request.lesson;
      m.size = request.size;
      m.level = level;
      m.precision = request.precision;
      m.cache = request.cache;
      m.check.passed = true;
      m.launches.resize(2 - level);
      m.chain_time_us.median = 10.0 - level;
      out->push_back(m);
    }
    return Status::Ok();
  }

 private:
  DeviceFacts device_;
};

TEST(LabCaps, TheHistoryStaysAtItsCapWhileTheSliderMoves) {
  gui::Lab lab([](std::unique_ptr<MeasureBackend>* out) {
    *out = std::make_unique<AnySizeBackend>();
    return Status::Ok();
  });
  EXPECT_EQ(lab.history_cap(), kMaxHistoryMeasurements);
  lab.set_history_cap(40);
  double now = 0;
  ASSERT_TRUE(testing_support::pump(lab, &now, [&] { return testing_support::settled(lab); }));
  for (int64_t size = 1000; size < 1000 + 120; ++size) {
    const int before = lab.results_received();
    lab.set_size(size, now);
    lab.release_size(now);
    ASSERT_TRUE(testing_support::pump(lab, &now, [&] { return lab.results_received() > before; }))
        << "no result for size " << size;
    ASSERT_LE(lab.history().size(), 40u);
  }
  EXPECT_EQ(lab.history().size(), 40u);
  EXPECT_EQ(lab.history().back().size, 1119) << "the newest result is kept";
  EXPECT_EQ(lab.current().size(), 2u);
  EXPECT_EQ(lab.session_snapshot().measurements.size(), 40u);
}

// A level refused for lack of GPU memory (gpu_faults.h): the window shows the levels that were
// measured and says which one was not.
class RefusingBackend final : public MeasureBackend {
 public:
  RefusingBackend() { device_.usable = true; }
  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "fake"; }
  Status measure(const MeasureRequest& request, const CancelCheck&,
                 std::vector<Measurement>* out) override {
    Measurement m;
    m.lesson = request.lesson;
    m.size = request.size;
    m.precision = request.precision;
    m.cache = request.cache;
    m.check.passed = true;
    m.launches.resize(2);
    m.chain_time_us.median = 10;
    out->push_back(m);
    return Status::Error(
        "gelu_scale level 1 ran out of GPU memory at 4M elements and was not "
        "measured; the largest size that fits now is 1M elements (the other "
        "levels were measured).");
  }

 private:
  DeviceFacts device_;
};

TEST(LabFaults, ARefusedLevelKeepsTheMeasuredOnesAndSaysWhy) {
  gui::Lab lab([](std::unique_ptr<MeasureBackend>* out) {
    *out = std::make_unique<RefusingBackend>();
    return Status::Ok();
  });
  double now = 0;
  ASSERT_TRUE(testing_support::pump(lab, &now, [&] { return lab.requests_finished() > 0; }));
  EXPECT_NE(lab.last_error().find("level 1 ran out of GPU memory"), std::string::npos)
      << lab.last_error();
  ASSERT_EQ(lab.history().size(), 1u);
  EXPECT_EQ(lab.history()[0].level, 0);
  EXPECT_EQ(lab.current().size(), 1u);
}

}  // namespace
}  // namespace fl
