// The one parser per kind of name (app/measure/choices.h): what each accepts, and the line that
// every command-line and script message about a wrong name is made of.
#include "app/measure/choices.h"

#include <gtest/gtest.h>

#include <string>

namespace fl {
namespace {

TEST(Choices, TimerNamesRoundTrip) {
  for (Timer t : {Timer::cupti, Timer::events}) {
    Timer back = t == Timer::cupti ? Timer::events : Timer::cupti;
    ASSERT_TRUE(parse_timer(to_string(t), &back)) << to_string(t);
    EXPECT_EQ(back, t);
  }
  Timer unchanged = Timer::events;
  for (const char* bad : {"", "CUPTI", "event", "cupti ", "nvtx"}) {
    EXPECT_FALSE(parse_timer(bad, &unchanged)) << bad;
    EXPECT_EQ(unchanged, Timer::events) << "a refused name leaves the value alone";
  }
}

TEST(Choices, ViewNamesAreTheSixViewsInTabOrder) {
  EXPECT_EQ(view_names(), (std::vector<std::string>{"flow", "speedup", "bandwidth", "timeline",
                                                    "memory", "roofline"}));
  for (const std::string& v : view_names()) EXPECT_TRUE(is_view_name(v)) << v;
  for (const char* bad : {"", "graph", "Speedup", "flow ", "speedup,timeline"}) {
    EXPECT_FALSE(is_view_name(bad)) << bad;
  }
}

TEST(Choices, TheListedChoicesAreTheAcceptedOnes) {
  // Every view the message lists is one, and the message lists them all.
  const std::string listed = kViewChoices;
  for (const std::string& v : view_names()) EXPECT_NE(listed.find(v), std::string::npos) << v;
  Precision p;
  EXPECT_TRUE(parse_precision("fp32", &p) && parse_precision("bf16", &p));
  EXPECT_EQ(std::string(kPrecisionChoices), "fp32 or bf16");
  CacheMode c;
  EXPECT_TRUE(parse_cache_mode("cold", &c) && parse_cache_mode("warm", &c));
  EXPECT_EQ(std::string(kCacheChoices), "cold or warm");
  EXPECT_EQ(std::string(kTimerChoices),
            std::string(to_string(Timer::cupti)) + " or " + to_string(Timer::events));
}

TEST(Choices, NotAChoiceIsOneLineNamingWhatWasGiven) {
  EXPECT_EQ(not_a_choice("cache", kCacheChoices), "cache is cold or warm");
  const std::string got = "fp64";
  EXPECT_EQ(not_a_choice("--precision", kPrecisionChoices, &got),
            "--precision is fp32 or bf16, got 'fp64'");
  // An untrusted value is shortened and kept on one line.
  const std::string long_one = std::string(500, 'x') + "\nsecond line";
  const std::string line = not_a_choice("--timer", kTimerChoices, &long_one);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_LT(line.size(), 200u) << line;
}

}  // namespace
}  // namespace fl
