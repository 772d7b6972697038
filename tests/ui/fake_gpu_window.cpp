// The window over a fake GPU, for screenshots of the measured state on machines without one
// (CI). The fake answers every request with plausible made-up numbers from the lesson's traffic
// model, after a short pause, so the window goes through the same states as with a real GPU:
// starting, ready, measuring, a result.
//
// The test-only fault switch (app/measure/gpu_faults.h) works here too, so the window's side of
// a GPU fault runs without a GPU: FL_FAULT=kernel-fault fails the first request with the
// sentence the live backend gives after resetting the GPU, then measures again; FL_FAULT=
// device-lost loses the fake GPU for good at the first request (the engine turns unavailable).
//
// usage: fusionlab_ui_fake_gpu [--screenshot OUT.png] [--lesson ID] [--then-sizes 1K,1M,256M]
//                              [--sweep] [--frame-stats]
//   --lesson: start on this lesson; --then-sizes: measure these too before the picture.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "app/gui/window.h"
#include "app/measure/gpu_faults.h"
#include "model/sizes.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

class FakeGpu final : public MeasureBackend {
 public:
  FakeGpu() {
    device_.usable = true;
    device_.name = "Fake GPU (test data)";
    device_.cc_major = 9;
    device_.cc_minor = 0;
    device_.sm_count = 132;
    device_.l2_bytes = int64_t(50) << 20;
    device_.memory_bytes = int64_t(80) << 30;
    device_.driver_version = 13000;
    device_.runtime_version = 12080;
  }
  const DeviceFacts& device() const override { return device_; }
  const char* kind() const override { return "fake (tests)"; }
  std::string lost_reason() const override { return lost_reason_; }

  Status measure(const MeasureRequest& request, const CancelCheck& cancelled,
                 std::vector<Measurement>* out) override {
    const Lesson* lesson = find_lesson(request.lesson);
    if (!lesson) return Status::Error("unknown lesson " + request.lesson);
    const std::string where = request.lesson + " level 0";
    if (fault_fires(FaultPoint::kernel_fault, 0)) {
      std::printf("fake GPU: kernel fault injected\n");
      return Status::Error(context_lost_message(where, "cudaErrorIllegalAddress", true, ""));
    }
    if (fault_fires(FaultPoint::device_lost, 0)) {
      std::printf("fake GPU: device lost injected\n");
      lost_reason_ = device_lost_message(where, "cudaErrorDevicesUnavailable");
      return Status::Error(lost_reason_);
    }
    for (int i = 0; i < 10; ++i) {  // "work" that a newer request can interrupt
      if (cancelled()) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    const Shape shape = lesson->resolve(Shape(request.size, request.inner));
    for (int level = 0; level < lesson->level_count(); ++level) {
      Measurement m;
      m.lesson = request.lesson;
      m.size = request.size;
      m.level = level;
      m.level_name = lesson->info().levels[level].name;
      m.precision = request.precision;
      m.cache = request.cache;
      m.timing_method = "fake";
      m.repetitions = 20;
      double chain = 0;
      for (const LaunchTraffic& t : lesson->traffic(level, shape, request.precision)) {
        LaunchResult launch;
        launch.textbook = t;
        // 2800 GB/s on textbook bytes plus 2.5 us per launch: roughly an H100's shape.
        launch.time_us.median = t.bytes() / 2800e3 + 2.5;
        launch.time_us.min = launch.time_us.p20 = launch.time_us.median * 0.98;
        launch.time_us.max = launch.time_us.p80 = launch.time_us.median * 1.03;
        launch.copy_gbps = 3000;
        chain += launch.time_us.median;
        m.launches.push_back(launch);
      }
      m.chain_time_us.median = chain + 1.5 * (m.launches.size() - 1);  // gaps between launches
      m.chain_time_us.count = m.repetitions;
      m.chain_copy_gbps = 3000;
      m.check.rel_l2_error = 3.1e-8;
      m.check.tolerance = 1e-5;
      m.check.passed = true;
      out->push_back(m);
    }
    return Status::Ok();
  }

 private:
  DeviceFacts device_;
  std::string lost_reason_;
};

}  // namespace
}  // namespace fl

int main(int argc, char** argv) {
  fl::GuiOptions options;
  fl::WindowScript script;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--screenshot" && has_value) {
      options.screenshot_path = argv[++i];
    } else if (arg == "--sweep") {
      script.sweep = true;
    } else if (arg == "--frame-stats") {
      options.frame_stats = true;
    } else if (arg == "--lesson" && has_value) {
      script.lesson = argv[++i];
    } else if (arg == "--then-sizes" && has_value) {
      const fl::Status st = fl::parse_size_list(argv[++i], &script.then_sizes);
      if (!st.ok()) {
        std::fprintf(stderr, "fusionlab_ui_fake_gpu: %s\n", st.message().c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: %s [--screenshot OUT.png] [--lesson ID] [--then-sizes 1K,1M] [--sweep] "
                   "[--frame-stats]\n",
                   argv[0]);
      return 2;
    }
  }
  return fl::run_window(
      options,
      [](std::unique_ptr<fl::MeasureBackend>* out) {
        *out = std::make_unique<fl::FakeGpu>();
        return fl::Status::Ok();
      },
      script);
}
