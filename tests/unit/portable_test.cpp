// The portable kernels' series (model/portable.h): --choose-as is read and checked, sessions
// keep what their kernels were chosen as, and a recording's portable/ folder loads as one series
// of one GPU, or is refused with one line naming the file.
#include "model/portable.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "model/session_json.h"

namespace fl {
namespace {

namespace fs = std::filesystem;

Session portable_session(const std::string& gpu, int chosen_as_cc, const std::string& lesson) {
  Session s;
  s.app_version = "0.1.0";
  s.created_utc = "2026-11-26T12:30:00Z";
  s.backend = "live";
  s.device.usable = true;
  s.device.name = gpu;
  s.device.cc_major = 9;
  s.device.sm_count = 132;
  for (int level = 0; level < 3; ++level) {
    Measurement m;
    m.lesson = lesson;
    m.size = 16;
    m.inner = 768;
    m.level = level;
    m.level_name = level == 0 ? "unfused" : "fused";
    m.precision = Precision::bf16;
    m.timing_method = "cupti_activity";
    m.repetitions = 50;
    m.chain_time_us = {10.0 - level, 9, 11, 9.5, 10.5, 50};
    m.check = {1e-3, 1e-3, 0, 2e-2, true};
    m.chosen_as_cc = chosen_as_cc;
    LaunchResult l;
    l.textbook = {"ffn_fused", 1 << 20, 1 << 14, 1e6};
    l.time_us = m.chain_time_us;
    m.launches.push_back(l);
    s.measurements.push_back(m);
  }
  return s;
}

class PortableFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("fl_portable_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void save(const std::string& name, const Session& s) {
    fs::create_directories(root_ / "portable");
    ASSERT_TRUE(save_session(s, (root_ / "portable" / name).string()).ok());
  }
  fs::path root_;
};

TEST(Portable, ChooseAsReadsACapabilityInEachSpellingAndRefusesTheRest) {
  int cc = 0;
  for (const char* text : {"8.6", "86", "sm_86"}) {
    ASSERT_TRUE(parse_choose_as(text, &cc).ok()) << text;
    EXPECT_EQ(cc, 86) << text;
  }
  ASSERT_TRUE(parse_choose_as("7.0", &cc).ok());
  EXPECT_EQ(cc, 70);
  for (const char* text : {"", "ampere", "8.", "8.66", "6.1", "61", "sm_", "-86", "12345"}) {
    const Status st = parse_choose_as(text, &cc);
    EXPECT_FALSE(st.ok()) << text;
    EXPECT_EQ(st.message().rfind("--choose-as", 0), 0u) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
}

TEST(Portable, KernelsAreChosenOnlyAsOnTheSameOrAnOlderGpu) {
  EXPECT_EQ(choose_as_refusal(0, 90), "");
  EXPECT_EQ(choose_as_refusal(86, 90), "");
  EXPECT_EQ(choose_as_refusal(90, 90), "");
  EXPECT_EQ(choose_as_refusal(90, 86),
            "kernels can be chosen as on this GPU (8.6) or an older one, not as on 9.0: they run "
            "here");
  EXPECT_NE(choose_as_refusal(60, 90), "");
}

TEST(Portable, SessionsKeepWhatTheKernelsWereChosenAs) {
  const Session in = portable_session("NVIDIA H100 80GB HBM3", 86, "ffn");
  Session out;
  const Status read = session_from_json(session_to_json(in), &out);
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(out.measurements.at(0).chosen_as_cc, 86);
  // Written only when set: an ordinary measurement's file has no such field.
  Session plain = in;
  for (Measurement& m : plain.measurements) m.chosen_as_cc = 0;
  EXPECT_EQ(session_to_json(plain).find("chosen_as_cc"), std::string::npos);
  // And a value older than Volta is refused with the field's path.
  std::string text = session_to_json(in);
  text.replace(text.find("\"chosen_as_cc\": 86"), 18, "\"chosen_as_cc\": 12");
  const Status st = session_from_json(text, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("chosen_as_cc"), std::string::npos) << st.message();
}

TEST_F(PortableFolder, ARecordingWithoutOneHasAnEmptySeries) {
  PortableSeries series;
  series.chosen_as_cc = 80;
  ASSERT_TRUE(load_portable_series(root_.string(), &series).ok());
  EXPECT_TRUE(series.empty());
  EXPECT_EQ(series.chosen_as_cc, 0);
}

TEST_F(PortableFolder, ItsFilesLoadAsOneSeries) {
  save("a_ffn.json", portable_session("NVIDIA H100 80GB HBM3", 86, "ffn"));
  save("b_ln.json", portable_session("NVIDIA H100 80GB HBM3", 86, "layernorm_linear"));
  PortableSeries series;
  ASSERT_TRUE(load_portable_series(root_.string(), &series).ok());
  EXPECT_EQ(series.measurements.size(), 6u);
  EXPECT_EQ(series.chosen_as_cc, 86);
  EXPECT_EQ(series.gpu, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(series.date, "2026-11-26");
  EXPECT_TRUE(series.has("ffn", Precision::bf16, CacheMode::cold));
  EXPECT_TRUE(series.has("layernorm_linear", Precision::bf16, CacheMode::cold));
  EXPECT_FALSE(series.has("ffn", Precision::fp32, CacheMode::cold));
  EXPECT_EQ(series.label(),
            "portable kernels (as on compute capability 8.6), measured on an NVIDIA H100 80GB "
            "HBM3");
}

TEST_F(PortableFolder, MixedOrOrdinaryFilesAreRefusedNamingTheFile) {
  save("a.json", portable_session("NVIDIA H100 80GB HBM3", 86, "ffn"));
  save("b.json", portable_session("NVIDIA H100 80GB HBM3", 0, "ffn"));
  PortableSeries series;
  Status st = load_portable_series(root_.string(), &series);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("b.json"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("bench --choose-as"), std::string::npos) << st.message();
  EXPECT_TRUE(series.empty());  // nothing half-loaded

  save("b.json", portable_session("NVIDIA H100 80GB HBM3", 80, "ffn"));
  st = load_portable_series(root_.string(), &series);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("8.0 beside 8.6"), std::string::npos) << st.message();

  save("b.json", portable_session("NVIDIA H200", 86, "ffn"));
  st = load_portable_series(root_.string(), &series);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("of one GPU"), std::string::npos) << st.message();

  fs::remove(root_ / "portable" / "b.json");
  std::FILE* f = std::fopen((root_ / "portable" / "c.json").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{not json", f);
  std::fclose(f);
  st = load_portable_series(root_.string(), &series);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("c.json"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
}

TEST_F(PortableFolder, TheNewestShippedRecordingWithOneIsFound) {
  const fs::path assets = root_ / "assets";
  fs::create_directories(assets / "recordings" / "h100-2026-11-23");
  EXPECT_EQ(find_shipped_portable_recording(assets.string()), "");
  fs::create_directories(assets / "recordings" / "h100-2026-11-24" / "portable");
  fs::create_directories(assets / "recordings" / "h100-2026-11-27");
  EXPECT_EQ(find_shipped_portable_recording(assets.string()),
            (assets / "recordings" / "h100-2026-11-24").string());
}

}  // namespace
}  // namespace fl
