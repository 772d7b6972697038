// The remembered settings (app/gui/settings.h): a round trip through the file, the XDG path, and
// damaged files ignored with a one-line message; --size parsing; the script's window-size.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/gui/script.h"
#include "app/gui/settings.h"

namespace fl::gui {
namespace {

namespace fs = std::filesystem;

class SettingsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fusionlab_settings_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& text) {
    const std::string path = (dir_ / "settings.ini").string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  fs::path dir_;
};

TEST_F(SettingsFile, RoundTripKeepsEveryField) {
  Settings s;
  s.x = -40;
  s.y = 1200;
  s.has_position = true;
  s.width = 1920;
  s.height = 1055;
  s.maximized = true;
  s.lesson = "residual_layernorm";
  s.view = "roofline";
  s.precision = "bf16";
  s.cache = "warm";
  s.show_peers = false;
  s.panels.left_width = 0.27f;
  s.panels.measurement_height = 0.41f;
  s.panels.split = true;
  s.panels.side_by_side = true;
  s.panels.split_fraction = 0.63f;
  s.panels.second_view = "memory";
  s.zoom = 1.3f;
  // Into a folder that does not exist yet: save makes it.
  const std::string path = (dir_ / "new" / "fusionlab" / "settings.ini").string();
  ASSERT_TRUE(save_settings(path, s).ok());
  Settings r;
  bool found = false;
  const Status st = load_settings(path, &r, &found);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(found);
  EXPECT_EQ(r.x, -40);
  EXPECT_EQ(r.y, 1200);
  EXPECT_TRUE(r.has_position);
  EXPECT_EQ(r.width, 1920);
  EXPECT_EQ(r.height, 1055);
  EXPECT_TRUE(r.maximized);
  EXPECT_EQ(r.lesson, "residual_layernorm");
  EXPECT_EQ(r.view, "roofline");
  EXPECT_EQ(r.precision, "bf16");
  EXPECT_EQ(r.cache, "warm");
  EXPECT_FALSE(r.show_peers) << "the PyTorch peers box";
  EXPECT_NEAR(r.panels.left_width, 0.27f, 1e-4);
  EXPECT_NEAR(r.panels.measurement_height, 0.41f, 1e-4);
  EXPECT_TRUE(r.panels.split);
  EXPECT_TRUE(r.panels.side_by_side);
  EXPECT_NEAR(r.panels.split_fraction, 0.63f, 1e-4);
  EXPECT_EQ(r.panels.second_view, "memory");
  EXPECT_NEAR(r.zoom, 1.3f, 1e-4) << "Ctrl+= / Ctrl+-";
  // Written atomically: no temporary file is left beside it.
  int files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

// Ctrl+= / Ctrl+- move the zoom in 10% steps on a grid (no drift after many presses), within
// 50%..300%.
TEST(Zoom, StepsStayOnTheGridAndInRange) {
  EXPECT_NEAR(zoomed(1.0f, 1), 1.1f, 1e-5);
  EXPECT_NEAR(zoomed(1.0f, -1), 0.9f, 1e-5);
  float z = 1.0f;
  for (int i = 0; i < 7; ++i) z = zoomed(z, 1);
  for (int i = 0; i < 7; ++i) z = zoomed(z, -1);
  EXPECT_NEAR(z, 1.0f, 1e-5);
  EXPECT_FLOAT_EQ(zoomed(2.95f, 3), kMaxZoom);
  EXPECT_FLOAT_EQ(zoomed(0.6f, -5), kMinZoom);
  EXPECT_NEAR(zoomed(1.234f, 0), 1.2f, 1e-5);
}

TEST_F(SettingsFile, MissingFileIsNoErrorAndDefaults) {
  Settings r;
  r.lesson = "untouched";
  bool found = true;
  EXPECT_TRUE(load_settings((dir_ / "nothing.ini").string(), &r, &found).ok());
  EXPECT_FALSE(found);
  EXPECT_EQ(r.lesson, "untouched");
}

TEST_F(SettingsFile, UnknownKeysOfANewerVersionAreSkipped) {
  Settings r;
  const Status st = load_settings(write("version = 1\nlesson = ffn\nfuture_key = 7\n"), &r);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(r.lesson, "ffn");
}

// Each damaged file is ignored as a whole: an error naming the file (and the line), and the
// settings stay at their defaults.
TEST_F(SettingsFile, DamagedFilesAreIgnoredWithOneLine) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"version = 1\nwidth = wide\nheight = 700\n", "line 2: width is a whole number of pixels"},
      {"version = 1\nlesson = ../../etc\n", "line 2: lesson is a lesson id"},
      {"version = 1\nthis line has no equals sign\n", "line 2: is not `key = value`"},
      {"version = 1\nleft_width = 7\n", "left_width is a fraction"},
      {"version = 1\nleft_width = nan\n", "left_width is a fraction"},
      {"version = 1\nwidth = 99999999999999999999\nheight = 700\n", "width is a whole number"},
      {"version = 2\n", "version is 1"},
      {"version = 1\nwidth = 1000\n", "width and height come together"},
      {"", "holds no settings"},
      {"\x89PNG\r\n\x1a\n", "line 1: is not `key = value`"},
      {"version = 1\nlesson\x01 = ffn\n", "line 2: holds control characters"},
  };
  for (const auto& c : cases) {
    Settings r;
    const std::string path = write(c.text);
    const Status st = load_settings(path, &r);
    ASSERT_FALSE(st.ok()) << c.text;
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << "one line: " << st.message();
    EXPECT_EQ(r.width, 0);
    EXPECT_TRUE(r.lesson.empty());
  }
}

TEST_F(SettingsFile, OversizedFileIsIgnored) {
  std::string big = "version = 1\n";
  while (big.size() <= static_cast<size_t>(kMaxSettingsBytes)) big += "# padding padding padding\n";
  Settings r;
  const Status st = load_settings(write(big), &r);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("over the 64 KiB"), std::string::npos) << st.message();
}

TEST_F(SettingsFile, AFolderInsteadOfAFileIsIgnored) {
  const fs::path folder = dir_ / "settings.ini";
  fs::create_directories(folder);
  Settings r;
  const Status st = load_settings(folder.string(), &r);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos);
}

TEST(SettingsPath, FollowsXdgConfigHomeThenHome) {
  const char* old_xdg = std::getenv("XDG_CONFIG_HOME");
  const char* old_home = std::getenv("HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "", saved_home = old_home ? old_home : "";
  setenv("XDG_CONFIG_HOME", "/tmp/xdg-here", 1);
  setenv("HOME", "/home/learner", 1);
  EXPECT_EQ(settings_path(), "/tmp/xdg-here/fusionlab/settings.ini");
  setenv("XDG_CONFIG_HOME", "relative/is/ignored", 1);  // the XDG spec: only absolute paths
  EXPECT_EQ(settings_path(), "/home/learner/.config/fusionlab/settings.ini");
  unsetenv("XDG_CONFIG_HOME");
  EXPECT_EQ(settings_path(), "/home/learner/.config/fusionlab/settings.ini");
  unsetenv("HOME");
  EXPECT_EQ(settings_path(), "");
  if (old_xdg) setenv("XDG_CONFIG_HOME", saved_xdg.c_str(), 1);
  if (old_home) setenv("HOME", saved_home.c_str(), 1);
}

TEST(WindowSize, ParsesWidthByHeight) {
  int w = 0, h = 0;
  std::string why;
  EXPECT_TRUE(parse_window_size("1920x1080", &w, &h, &why));
  EXPECT_EQ(w, 1920);
  EXPECT_EQ(h, 1080);
  EXPECT_TRUE(parse_window_size("1024X768", &w, &h, &why));
  EXPECT_EQ(w, 1024);
  EXPECT_EQ(h, 768);
  for (const char* bad : {"", "1920", "1920x", "x1080", "1920x1080x3", "-5x100", "wide x tall",
                          "1920*1080", "1920x 1080"}) {
    EXPECT_FALSE(parse_window_size(bad, &w, &h, &why)) << bad;
    EXPECT_NE(why.find("WIDTHxHEIGHT"), std::string::npos) << bad << ": " << why;
  }
  EXPECT_FALSE(parse_window_size("100x100", &w, &h, &why));
  EXPECT_NE(why.find("from 640x480 to 16384x16384"), std::string::npos) << why;
  EXPECT_FALSE(parse_window_size("20000x1000", &w, &h, &why));
}

TEST(WindowSize, ScriptCommandTakesTwoNumbersOrWxH) {
  const fs::path dir = fs::temp_directory_path() / "fusionlab_settings_test_script";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "sizes.fls").string();
  std::ofstream(path) << "window-size 1920 1080\nwindow-size 1024x768\n";
  Script script;
  const Status st = load_script(path, (dir / "out").string(), &script);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(script.commands.size(), 2u);
  EXPECT_EQ(script.commands[0].width, 1920);
  EXPECT_EQ(script.commands[0].height, 1080);
  EXPECT_EQ(script.commands[1].width, 1024);
  EXPECT_EQ(script.commands[1].height, 768);
  std::ofstream(path) << "lesson gelu_scale\nwindow-size 10 10\n";
  const Status bad = load_script(path, (dir / "out").string(), &script);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("sizes.fls:2: window-size takes W H"), std::string::npos)
      << bad.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fl::gui
