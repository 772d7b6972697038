// Kernel names in CUPTI records are mangled; the results keep the short name a learner reads.
#include <gtest/gtest.h>

#include "app/measure/cupti_tracer.h"

namespace fl {
namespace {

TEST(KernelNames, DemangledShortNames) {
  EXPECT_EQ(short_kernel_name("_Z17flush_read_kernelPKilPi"), "flush_read_kernel");
  EXPECT_EQ(short_kernel_name("_ZN2fl13copy16_kernelEPKiPil"), "copy16_kernel");
  EXPECT_EQ(short_kernel_name("_ZN2fl12_GLOBAL__N_111gelu_kernelIfLi4EEEvPKT_PS2_l"),
            "gelu_kernel<float, 4>");
  EXPECT_EQ(short_kernel_name("_ZN2fl12_GLOBAL__N_118elementwise_kernelIfNS0_2OpEEEvPKT_PS3_lT0_"),
            "elementwise_kernel<float, fl::Op>");
}

TEST(KernelNames, UnmangledNamesPassThrough) {
  EXPECT_EQ(short_kernel_name("my_c_kernel"), "my_c_kernel");
}

}  // namespace
}  // namespace fl
