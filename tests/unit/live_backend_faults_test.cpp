// The live backend's messages for a machine without a usable GPU, through the fault switch
// (gpu_faults.h): they are decided before any GPU is touched, so they run here, GPU or not.
// (CUDA build only: the replay-only build has no live backend.)
#include <gtest/gtest.h>
#include <stdlib.h>

#include "app/measure/gpu_faults.h"
#include "app/measure/live_backend.h"

namespace fl {
namespace {

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

TEST(LiveBackendFaults, NoDeviceIsOneSentence) {
  WithFault fault("no-device");
  const DeviceFacts d = query_device();
  EXPECT_FALSE(d.usable);
  EXPECT_EQ(d.unusable_reason, "No NVIDIA GPU was found on this machine.");
  std::unique_ptr<LiveBackend> backend;
  const Status st = LiveBackend::create(interactive_live_options(), &backend);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), d.unusable_reason);
  EXPECT_FALSE(backend);
}

TEST(LiveBackendFaults, AnOldDriverNamesBothVersions) {
  WithFault fault("old-driver");
  const DeviceFacts d = query_device();
  EXPECT_FALSE(d.usable);
  ASSERT_GT(d.runtime_version, 0);
  EXPECT_EQ(d.unusable_reason, old_driver_message(d.driver_version, d.runtime_version));
  EXPECT_NE(d.unusable_reason.find("older than the CUDA " + cuda_version_text(d.runtime_version)),
            std::string::npos)
      << d.unusable_reason;
}

TEST(LiveBackendFaults, AMistypedSwitchStopsTheBackendFromStarting) {
  WithFault fault("kernelfault");
  std::unique_ptr<LiveBackend> backend;
  const Status st = LiveBackend::create(interactive_live_options(), &backend);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("FL_FAULT='kernelfault' is not a fault point"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace fl
