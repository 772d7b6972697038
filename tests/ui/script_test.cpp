// Scripts as the window reads them (every line checked before the window opens), and the window
// state behind the File menu: comparing with a second recording, opening another one, the
// session and sweep that Save session / Export write, and the screenshot caption's facts.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "app/gui/backend_choice.h"
#include "app/gui/caption.h"
#include "app/gui/lab.h"
#include "app/gui/script.h"
#include "model/session_json.h"
#include "tests/support/lab_pump.h"
#include "tests/support/recorded.h"
#include "viz/speedup_view.h"

namespace fl::gui {
namespace {

namespace fs = std::filesystem;

// ---- scripts

class ScriptFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fusionlab_script_test_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Writes `text` as a script and loads it with --out-dir dir_/out.
  Status load(const std::string& text, Script* out) {
    const std::string path = (dir_ / "test.fls").string();
    std::ofstream(path) << text;
    return load_script(path, (dir_ / "out").string(), out);
  }
  fs::path dir_;
};

std::string shipped(const std::string& file) {
  return find_assets_folder() + "/recordings/" FUSIONLAB_SHIPPED_RECORDING_NAME "/" + file;
}

TEST(ScriptNames, OutputsArePlainNamesWithTheRightExtension) {
  EXPECT_TRUE(plain_output_name("fig-1_speedup.png", {".png"}));
  EXPECT_TRUE(plain_output_name("trace.json.gz", {".json", ".json.gz"}));
  EXPECT_FALSE(plain_output_name("../x.png", {".png"}));
  EXPECT_FALSE(plain_output_name("/tmp/x.png", {".png"}));
  EXPECT_FALSE(plain_output_name("sub/x.png", {".png"}));
  EXPECT_FALSE(plain_output_name("a..b.png", {".png"}));
  EXPECT_FALSE(plain_output_name(".hidden.png", {".png"}));
  EXPECT_FALSE(plain_output_name("x.png", {".csv"}));
  EXPECT_FALSE(plain_output_name(".png", {".png"}));
  EXPECT_FALSE(plain_output_name("sp ace.png", {".png"}));
  EXPECT_FALSE(plain_output_name("back\\slash.png", {".png"}));
}

TEST_F(ScriptFile, EveryCommandParsesAndTheOutDirIsMade) {
  Script s;
  const Status st = load(
      "# every command\n"
      "caption off\n"
      "open " +
          shipped("elementwise_fp32_cold.json") +
          "\n"
          "compare " +
          shipped("elementwise_fp32_warm.json") +
          "\n"
          "lesson gelu_scale\nsize 16M\nlevel top\nlevel 0\nprecision bf16\ncache warm\n"
          "view roofline\nsweep\ncancel-sweep\nwait\nwait 600\ncaption on\n"
          "screenshot a.png\nscreenshot view b.png\nscreenshot view bandwidth c.png\n"
          "export-trace t.json\nexport-trace t.json.gz\nexport-csv s.csv\nsave-session s.json\n"
          "phases on\nphases off\ncompare off\nquit\n",
      &s);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(fs::is_directory(dir_ / "out"));
  ASSERT_EQ(s.commands.size(), 26u);
  EXPECT_EQ(s.commands[1].verb, "open");
  ASSERT_EQ(s.commands[1].paths.size(), 1u);
  EXPECT_EQ(s.commands[15].verb, "screenshot");
  EXPECT_FALSE(s.commands[15].view_only);
  EXPECT_TRUE(s.commands[16].view_only);
  EXPECT_EQ(s.commands[16].view, "");
  EXPECT_EQ(s.commands[16].arg, "b.png");
  EXPECT_TRUE(s.commands[17].view_only);
  EXPECT_EQ(s.commands[17].view, "bandwidth");
  EXPECT_EQ(s.commands[17].line, 19);
}

TEST_F(ScriptFile, AnErrorNamesTheFileAndLine) {
  const std::string file = (dir_ / "test.fls").string();
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"lesson gelu_scale\ndance\n", ":2: unknown command 'dance'"},
      {"lesson nope\n", ":1: no lesson 'nope'"},
      {"\n\nsize lots\n", ":3: "},
      {"level -1\n", ":1: level is 0..1000 or top, got '-1'"},
      // Numbers are checked against the lesson the script chose, as bench --sizes/--levels.
      {"lesson gelu_scale\nlevel 2\n", ":2: gelu_scale has levels 0..1 or top, got '2'"},
      {"level 99999999999999999999\n", ":1: level is 0..1000 or top"},
      {"lesson gelu_scale\nsize 1G\n",
       ":2: gelu_scale takes sizes from 1 to 256M elements, got 1G"},
      {"lesson ffn\nsize 1M\n", ":2: ffn takes sizes from 1 to 64K tokens, got 1M"},
      {"size 1G\n", ":1: size 1G is larger than any lesson takes (at most 256M)"},
      {"size 99999999999G\n",
       ":1: size '99999999999G' is too large: sizes go from 1 to 4294967296G"},
      {"size 0\n", ":1: size '0' is zero: sizes go from 1 to 4294967296G"},
      {"view graph\n", ":1: view is speedup, bandwidth"},
      {"wait 0\n", ":1: wait takes seconds"},
      {"caption maybe\n", ":1: caption is on or off"},
      {"phases maybe\n", ":1: phases is on or off"},
      {"sweep now\n", ":1: 'sweep' takes no argument"},
      {"export-csv\n", ":1: 'export-csv' needs an argument"},
      {"screenshot ../x.png\n", ":1: a screenshot is a .png name inside --out-dir"},
      {"screenshot view graph x.png\n", ":1: view is speedup"},
      {"screenshot large x.png\n", ":1: screenshot takes NAME.png, view NAME.png"},
      {"export-trace /tmp/t.json\n", ":1: a trace is a .json or .json.gz name"},
      {"export-csv sub/s.csv\n", ":1: a CSV is a .csv name"},
      {"save-session s.csv\n", ":1: a session is a .json name"},
      {"open /no/such/recording.json\n", ":1: /no/such/recording.json"},
      {"compare /no/such/folder\n", ":1: /no/such/folder"},
  };
  for (const auto& c : cases) {
    Script s;
    const Status st = load(c.text, &s);
    ASSERT_FALSE(st.ok()) << c.text;
    EXPECT_EQ(st.message().rfind(file + c.message, 0), 0u) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << "one line: " << st.message();
  }
}

TEST(ScriptRecordings, ARelativePathIsFoundBesideTheAssetsFolder) {
  ASSERT_FALSE(find_assets_folder().empty());
  const fs::path before = fs::current_path();
  fs::current_path(fs::temp_directory_path());  // no assets/ here
  const auto paths = resolve_recording_paths("assets/recordings/" FUSIONLAB_SHIPPED_RECORDING_NAME
                                             "/elementwise_fp32_cold.json,"
                                             "assets/recordings/" FUSIONLAB_SHIPPED_RECORDING_NAME
                                             "/elementwise_bf16_cold.json");
  fs::current_path(before);
  ASSERT_EQ(paths.size(), 2u);
  for (const auto& p : paths) EXPECT_TRUE(fs::is_regular_file(p)) << p;
  // What is nowhere is kept as written, for the loader's message to name it.
  EXPECT_EQ(resolve_recording_paths("no/such.json"), std::vector<std::string>{"no/such.json"});
}

// ---- the Lab behind the File menu

using testing_support::pump;
using testing_support::settled;

// gelu_scale at 1K, 1M and 64M: level 0 in 30 us, level 1 in 15 us.
std::unique_ptr<Lab> lab_over_test_recording() {
  std::vector<Measurement> ms;
  for (int64_t size : {int64_t(1) << 10, int64_t(1) << 20, int64_t(1) << 26}) {
    ms.push_back(testing_support::recorded_measurement("gelu_scale", size, 0, 30));
    ms.push_back(testing_support::recorded_measurement("gelu_scale", size, 1, 15));
  }
  return testing_support::lab_over(testing_support::recorded_session(std::move(ms)));
}

TEST(LabCompare, OverlaysTheSameLessonFromASecondRecordingLabelledWithItsGpuAndDate) {
  auto lab = lab_over_test_recording();
  double now = 0;
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));
  EXPECT_FALSE(lab->compared_series().found);

  // The shipped warm recording: no fp32/cold there, so its fp32/warm series is the one drawn.
  ASSERT_TRUE(lab->compare_with({shipped("elementwise_fp32_warm.json")}).ok());
  ASSERT_NE(lab->comparison(), nullptr);
  const ComparedSeries c = lab->compared_series();
  ASSERT_TRUE(c.found);
  EXPECT_EQ(c.precision, Precision::fp32);
  EXPECT_EQ(c.cache, CacheMode::warm);
  EXPECT_EQ(c.label, "NVIDIA H100 80GB HBM3, " + lab->comparison()->summary.date_text() +
                         " (fp32, warm L2)");
  const auto points =
      viz::speedup_series(lab->comparison()->measurements, "gelu_scale", c.precision, c.cache, 1);
  EXPECT_GE(points.size(), 5u) << "the recording's gelu_scale sizes";
  for (const auto& m : lab->comparison()->measurements) EXPECT_EQ(m.cache, CacheMode::warm);

  // bf16 and fp32 cold together: the chosen fp32/cold wins over bf16.
  ASSERT_TRUE(lab->compare_with(
                     {shipped("elementwise_bf16_cold.json"), shipped("elementwise_fp32_cold.json")})
                  .ok());
  EXPECT_EQ(lab->compared_series().precision, Precision::fp32);
  EXPECT_EQ(lab->compared_series().cache, CacheMode::cold);

  // A bad file: one line naming it, and the comparison before stays.
  const Status bad = lab->compare_with({"/no/such/recording.json"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("/no/such/recording.json"), std::string::npos);
  EXPECT_TRUE(lab->compared_series().found);
  // A lesson the comparison lacks: nothing to overlay.
  ASSERT_TRUE(lab->select_lesson("residual_layernorm", now));
  EXPECT_FALSE(lab->compared_series().found);
  lab->stop_comparing();
  EXPECT_EQ(lab->comparison(), nullptr);
}

TEST(LabOpen, SwitchesToAnotherRecordingOrKeepsTheOldOneOnAnError) {
  auto lab = lab_over_test_recording();
  double now = 0;
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));
  ASSERT_FALSE(lab->history().empty());
  const int generation = lab->backend_generation();

  const Status bad = lab->open_recording({"/no/such/recording.json"}, "test", now);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(lab->backend_generation(), generation);
  ASSERT_NE(lab->replay(), nullptr);
  EXPECT_EQ(lab->replay()->why, "chosen in a test");

  ASSERT_TRUE(
      lab->open_recording({shipped("elementwise_bf16_cold.json")}, "opened in a test", now).ok());
  EXPECT_EQ(lab->backend_generation(), generation + 1);
  EXPECT_TRUE(lab->history().empty()) << "a new recording starts a new history";
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab) && lab->replay(); }));
  EXPECT_EQ(lab->replay()->why, "opened in a test");
  EXPECT_EQ(lab->precision(), Precision::bf16) << "the only precision recorded there";
  ASSERT_FALSE(lab->current().empty()) << lab->last_error();
  EXPECT_EQ(lab->current()[0].precision, Precision::bf16);
}

TEST(LabSession, SnapshotAndSweepHoldWhatWasMeasured) {
  auto lab = lab_over_test_recording();
  double now = 0;
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));
  lab->start_sweep();
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));

  const Session s = lab->session_snapshot();
  EXPECT_EQ(s.device.name, "NVIDIA H200");
  EXPECT_EQ(s.backend, "recorded");
  EXPECT_EQ(s.measurements.size(), lab->history().size());
  EXPECT_EQ(s.measurements.size(), 6u) << "three sizes, two levels";
  Session back;
  ASSERT_TRUE(session_from_json(session_to_json(s), &back).ok());
  EXPECT_EQ(back.measurements.size(), 6u);

  const auto sweep = lab->sweep_measurements();
  ASSERT_EQ(sweep.size(), 6u);
  for (size_t i = 1; i < sweep.size(); ++i) {
    EXPECT_TRUE(sweep[i - 1].size < sweep[i].size ||
                (sweep[i - 1].size == sweep[i].size && sweep[i - 1].level < sweep[i].level));
  }
  lab->set_cache(CacheMode::warm, now);  // not recorded: another sweep, empty
  EXPECT_TRUE(lab->sweep_measurements().empty());
}

TEST(Caption, NamesGpuLessonSizeLevelCacheDateAndTheComparison) {
  auto lab = lab_over_test_recording();
  double now = 0;
  ASSERT_TRUE(pump(*lab, &now, [&] { return settled(*lab); }));
  auto pieces = caption_pieces(*lab, "2030-01-01 12:00");
  std::string all;
  for (const auto& p : pieces) all += p + "|";
  EXPECT_NE(all.find("NVIDIA H200 (recorded)"), std::string::npos) << all;
  EXPECT_NE(all.find("gelu_scale, 64M elements"), std::string::npos) << all;
  EXPECT_NE(all.find("level 1 of 1: "), std::string::npos) << all;
  EXPECT_NE(all.find("fp32, cold L2"), std::string::npos) << all;
  EXPECT_NE(all.find("recorded 2026-11-21"), std::string::npos) << all;
  EXPECT_EQ(all.find("2030"), std::string::npos) << "a replay is dated by its recording";
  EXPECT_EQ(all.find("compared"), std::string::npos);
  ASSERT_TRUE(lab->compare_with({shipped("elementwise_fp32_warm.json")}).ok());
  pieces = caption_pieces(*lab, "2030-01-01 12:00");
  EXPECT_EQ(pieces.back(), "compared with " + lab->compared_series().label);
}

}  // namespace
}  // namespace fl::gui
