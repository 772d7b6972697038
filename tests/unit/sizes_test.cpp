#include "model/sizes.h"

#include <gtest/gtest.h>

#include "kernels/catalog.h"

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

TEST(Sizes, ASuffixThatOverflowsIsAnErrorNamingTheRange) {
  int64_t n = 7;
  for (const char* big : {"99999999999G", "4294967297G", "4398046511105M", "4611686018427387905",
                          "99999999999999999999999"}) {
    const Status st = parse_size(big, &n);
    ASSERT_FALSE(st.ok()) << big;
    EXPECT_EQ(st.message(), "size '" + std::string(big) +
                                "' is too large: sizes go from 1 to 4294967296G (each lesson has "
                                "its own maximum)");
    EXPECT_EQ(n, 7) << "untouched on failure";
  }
  ASSERT_TRUE(parse_size("4294967296G", &n).ok());  // the largest: 2^62, no wrap-around
  EXPECT_EQ(n, int64_t(1) << 62);
  EXPECT_EQ(parse_size("0K", &n).message(), "size '0K' is zero: sizes go from 1 to 4294967296G");
}

TEST(Sizes, ARefusalQuotesTheInputOnOneShortLine) {
  int64_t n = 0;
  const Status st = parse_size("12\n\x1b[2J" + std::string(500, 'x'), &n);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\x1b'), std::string::npos) << st.message();
  EXPECT_LT(st.message().size(), 200u) << st.message();
}

TEST(Sizes, ChecksASizeAgainstTheLesson) {
  const Lesson* gelu = find_lesson("gelu_scale");
  ASSERT_NE(gelu, nullptr);
  EXPECT_TRUE(check_lesson_size(gelu->info(), 256 << 20).ok());
  EXPECT_EQ(check_lesson_size(gelu->info(), int64_t(1) << 30).message(),
            "gelu_scale takes sizes from 1 to 256M elements, got 1G");
  EXPECT_FALSE(check_lesson_size(gelu->info(), 0).ok());
}

TEST(Sizes, ParsesLevelLists) {
  std::vector<int> v = {9};
  ASSERT_TRUE(parse_level_list("all", &v).ok());
  EXPECT_TRUE(v.empty());
  ASSERT_TRUE(parse_level_list("0,2,1", &v).ok());
  EXPECT_EQ(v, (std::vector<int>{0, 2, 1}));
  for (const char* bad :
       {"", ",", "-1", "1001", "4294967296", "99999999999999999999", "1x", "top"}) {
    const Status st = parse_level_list(bad, &v);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.message().rfind("--levels takes 'all' or numbers like 0,1; got ", 0), 0u)
        << st.message();
  }
}

TEST(Sizes, ParsesLists) {
  std::vector<int64_t> v;
  ASSERT_TRUE(parse_size_list("1K,1M,16M", &v).ok());
  EXPECT_EQ(v, (std::vector<int64_t>{1024, 1 << 20, 16 << 20}));
  EXPECT_FALSE(parse_size_list("1K,,oops", &v).ok());
}

TEST(Sizes, RefusesASizeListedTwice) {
  std::vector<int64_t> v;
  const Status st = parse_size_list("1M,4K,1024K", &v);  // 1024K is 1M
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "size 1M is listed twice in '1M,4K,1024K'; each size is measured once");
  EXPECT_TRUE(parse_size_list("1K,1000", &v).ok());  // 1024 and 1000 differ
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
