// GPU faults without a GPU (app/measure/gpu_faults.h): the test-only fault switch, how a CUDA
// error is classified, and each fault's one-sentence message. The GPU tests
// (tests/gpu/faults_gpu_test.cpp) make the live backend go through each of them for real.
#include "app/measure/gpu_faults.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace fl {
namespace {

// FL_FAULT for the length of one test.
class WithFault {
 public:
  explicit WithFault(const char* value) {
    setenv("FL_FAULT", value, 1);
    reset_fault_switch_for_tests();
  }
  ~WithFault() {
    unsetenv("FL_FAULT");
    reset_fault_switch_for_tests();
  }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(FaultSwitch, ParsesEveryPointAndALevel) {
  FaultSwitch sw;
  ASSERT_TRUE(parse_fault_switch("", &sw).ok());
  EXPECT_EQ(sw.point, FaultPoint::none);
  for (const char* name : {"alloc", "launch", "kernel-fault", "sync", "device-lost",
                           "cupti-subscribe", "cupti-busy", "no-device", "old-driver"}) {
    ASSERT_TRUE(parse_fault_switch(name, &sw).ok()) << name;
    EXPECT_STREQ(to_string(sw.point), name);
    EXPECT_EQ(sw.level, -1);
  }
  ASSERT_TRUE(parse_fault_switch("alloc:1", &sw).ok());
  EXPECT_EQ(sw.point, FaultPoint::alloc);
  EXPECT_EQ(sw.level, 1);
}

TEST(FaultSwitch, AMistypedSwitchIsAnErrorNamingThePoints) {
  FaultSwitch sw;
  Status st = parse_fault_switch("kernel_fault", &sw);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(has(st.message(), "FL_FAULT='kernel_fault' is not a fault point")) << st.message();
  EXPECT_TRUE(has(st.message(), "kernel-fault, sync, device-lost")) << st.message();
  st = parse_fault_switch("alloc:x", &sw);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(has(st.message(), "level after ':' is a number")) << st.message();
  st = parse_fault_switch(std::string("\x1b[2J") + std::string(300, 'a'), &sw);
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(has(st.message(), "\x1b")) << "control characters are escaped";
  EXPECT_LT(st.message().size(), 400u) << "long values are shortened";
}

TEST(FaultSwitch, FiresOncePerProcessAtTheChosenLevel) {
  WithFault fault("launch:1");
  EXPECT_FALSE(fault_fires(FaultPoint::alloc, 1)) << "another point";
  EXPECT_FALSE(fault_fires(FaultPoint::launch, 0)) << "another level";
  EXPECT_TRUE(fault_fires(FaultPoint::launch, 1));
  EXPECT_FALSE(fault_fires(FaultPoint::launch, 1)) << "once";
  EXPECT_TRUE(fault_active(FaultPoint::launch));
  EXPECT_FALSE(fault_active(FaultPoint::no_device));
}

TEST(FaultSwitch, NothingFiresWithoutIt) {
  unsetenv("FL_FAULT");
  reset_fault_switch_for_tests();
  EXPECT_FALSE(fault_fires(FaultPoint::kernel_fault, 0));
  EXPECT_FALSE(fault_active(FaultPoint::cupti_busy));
  WithFault bad("no-such-point");
  EXPECT_FALSE(fault_fires(FaultPoint::kernel_fault, 0)) << "a bad value fires nothing";
  FaultSwitch sw;
  EXPECT_FALSE(fault_switch_from_env(&sw).ok()) << "but is reported where it is read";
}

TEST(GpuFaults, ClassifiesCudaErrorsByWhatTheyDoToTheContext) {
  const auto failure = [](const char* name) {
    return std::string("cudaStreamSynchronize(stream_) failed: ") + name +
           " (text) at /src/app/measure/live_backend.cu:612";
  };
  EXPECT_EQ(classify_failure(failure("cudaErrorMemoryAllocation")), FailureKind::out_of_memory);
  EXPECT_EQ(classify_failure(failure("cudaErrorIllegalAddress")), FailureKind::context_lost);
  EXPECT_EQ(classify_failure(failure("cudaErrorLaunchTimeout")), FailureKind::context_lost);
  EXPECT_EQ(classify_failure(failure("cudaErrorLaunchFailure")), FailureKind::context_lost);
  EXPECT_EQ(classify_failure(failure("cudaErrorDevicesUnavailable")), FailureKind::device_lost);
  EXPECT_EQ(classify_failure(failure("cudaErrorUnknown")), FailureKind::device_lost);
  EXPECT_EQ(classify_failure(failure("cudaErrorInvalidConfiguration")), FailureKind::other);
  EXPECT_EQ(classify_failure("gelu_scale takes sizes from 1 to 256M"), FailureKind::other);
  EXPECT_EQ(cuda_error_name_in(failure("cudaErrorIllegalAddress")), "cudaErrorIllegalAddress");
  EXPECT_EQ(cuda_error_name_in("no error here"), "");
}

TEST(GpuFaults, EachFaultHasOneSentence) {
  const std::string oom = level_out_of_memory_message("gelu_scale", 1, int64_t(64) << 20,
                                                      int64_t(16) << 20, "elements");
  EXPECT_EQ(oom,
            "gelu_scale level 1 ran out of GPU memory at 64M elements and was not measured; the "
            "largest size that fits now is 16M elements (the other levels were measured).");
  EXPECT_TRUE(has(level_out_of_memory_message("ffn", 2, 1024, 4096, "tokens"),
                  "another program may have been using the GPU's memory"));
  EXPECT_TRUE(has(level_out_of_memory_message("ffn", 2, 1024, 0, "tokens"), "no size of it fits"));

  const std::string reset =
      context_lost_message("gelu_scale level 1", "cudaErrorIllegalAddress", true, "");
  EXPECT_TRUE(
      has(reset, "a kernel of gelu_scale level 1 faulted on the GPU (cudaErrorIllegalAddress)"))
      << reset;
  EXPECT_TRUE(has(reset, "Fusion Lab reset the GPU and measures again")) << reset;
  const std::string watchdog =
      context_lost_message("ffn level 0", "cudaErrorLaunchTimeout", false, "cudaDeviceReset: x");
  EXPECT_TRUE(has(watchdog, "ran too long and was stopped by the watchdog")) << watchdog;
  EXPECT_TRUE(has(watchdog, "so restart Fusion Lab.")) << watchdog;

  const std::string lost = device_lost_message("gelu_scale level 0", "cudaErrorDevicesUnavailable");
  EXPECT_TRUE(has(lost, "stopped answering while measuring gelu_scale level 0")) << lost;
  EXPECT_TRUE(has(lost, "nvidia-smi and restart Fusion Lab.")) << lost;

  EXPECT_EQ(old_driver_message(12020, 13000),
            "The NVIDIA driver supports CUDA 12.2, older than the CUDA 13.0 runtime this build "
            "uses: install a driver for CUDA 13.0 or later.");
  EXPECT_EQ(old_driver_message(0, 12080),
            "No NVIDIA driver is installed (this build's CUDA 12.8 runtime needs one).");
  EXPECT_EQ(no_device_message(), "No NVIDIA GPU was found on this machine.");
  for (const std::string& m : {oom, reset, watchdog, lost, old_driver_message(12020, 13000)}) {
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.back(), '.') << m;
  }
}

TEST(GpuFaults, RequestFailuresLoseTheirSourceLocations) {
  const std::string m = request_failed_message(
      "gelu_scale level 0",
      "cudaGetLastError() failed: cudaErrorInvalidConfiguration (invalid configuration argument) "
      "at /work/app/measure/live_backend.cu:612");
  EXPECT_EQ(m,
            "gelu_scale level 0 could not be measured: cudaGetLastError() failed: "
            "cudaErrorInvalidConfiguration (invalid configuration argument).");
  EXPECT_EQ(without_source_locations("look at /tmp for files"), "look at /tmp for files");
}

}  // namespace
}  // namespace fl
