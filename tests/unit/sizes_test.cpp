#include "app/measure/sizes.h"

#include <gtest/gtest.h>

namespace fl {
namespace {

TEST(Sizes, ParsesBinarySuffixesAndPlainNumbers) {
  int64_t n = 0;
  ASSERT_TRUE(parse_size("1K", &n).ok());
  EXPECT_EQ(n, 1024);
  ASSERT_TRUE(parse_size("16M", &n).ok());
  EXPECT_EQ(n, 16 * 1024 * 1024);
  ASSERT_TRUE(parse_size("1G", &n).ok());
  EXPECT_EQ(n, int64_t(1) << 30);
  ASSERT_TRUE(parse_size("1000003", &n).ok());
  EXPECT_EQ(n, 1000003);
}

TEST(Sizes, RejectsNonsenseWithAMessage) {
  int64_t n = 0;
  for (const char* bad : {"", "K", "12Q", "-5", "1.5M", "0", "99999999999999999999"}) {
    const Status st = parse_size(bad, &n);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_FALSE(st.message().empty()) << bad;
  }
}

TEST(Sizes, ParsesLists) {
  std::vector<int64_t> v;
  ASSERT_TRUE(parse_size_list("1K,1M,16M", &v).ok());
  EXPECT_EQ(v, (std::vector<int64_t>{1024, 1 << 20, 16 << 20}));
  EXPECT_FALSE(parse_size_list("1K,,oops", &v).ok());
}

TEST(Sizes, FormatsRoundTrip) {
  EXPECT_EQ(format_size(1024), "1K");
  EXPECT_EQ(format_size(64 << 20), "64M");
  EXPECT_EQ(format_size(1000003), "1000003");
  EXPECT_EQ(format_bytes(64.0 * 1024 * 1024), "64.0 MiB");
  EXPECT_EQ(format_bytes(512), "512 B");
}

}  // namespace
}  // namespace fl
