// PyTorch peer files (model/peers.h): the shipped one loads, and every kind of file the app
// cannot use is refused with one line that names the problem (and the file, when read from disk).
#include "model/peers.h"

#include <algorithm>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/catalog.h"

namespace fl {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kAssets = fs::path(FUSIONLAB_SOURCE_DIR) / "assets";

// A small, valid peer file: gelu_scale fp32, torch.compile at 1K and 1M, eager at 1M.
json good_file() {
  auto point = [](int64_t size, double us, bool passed = true) {
    return json{{"size", size},        {"inner", 0},  {"median_us", us},      {"p20_us", us * 0.99},
                {"p80_us", us * 1.01}, {"count", 30}, {"rel_l2_error", 1e-7}, {"passed", passed}};
  };
  return json{{"format", "fusionlab-peers"},
              {"schema_version", 1},
              {"created_utc", "2026-11-23T07:55:00Z"},
              {"device",
               {{"name", "NVIDIA H100 80GB HBM3"},
                {"compute_capability", "9.0"},
                {"sm_count", 132},
                {"driver", "580.159.04"},
                {"copy_gbps", 3042.4}}},
              {"software",
               {{"torch", "2.11.0"}, {"triton", "3.6.0"}, {"cuda", "13.0"}, {"python", "3.12"}}},
              {"timing", "cupti_activity"},
              {"cache", "cold"},
              {"series",
               {{{"lesson", "gelu_scale"},
                 {"precision", "fp32"},
                 {"peer", "eager"},
                 {"label", "PyTorch eager"},
                 {"points", {point(1 << 20, 11.1)}}},
                {{"lesson", "gelu_scale"},
                 {"precision", "fp32"},
                 {"peer", "compile"},
                 {"label", "torch.compile"},
                 {"points", {point(1 << 20, 4.0), point(1024, 1.5), point(4096, 2.0, false)}}}}}};
}

TEST(PeerFile, AGoodFileLoadsSorted) {
  PeerFile f;
  const Status st = peers_from_json(good_file().dump(), &f);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(f.recorded_on(), "NVIDIA H100 80GB HBM3, 2026-11-23");
  EXPECT_EQ(f.torch_version, "2.11.0");
  ASSERT_EQ(f.series.size(), 2u);
  const auto found = f.find("gelu_scale", Precision::fp32);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_TRUE(f.find("gelu_scale", Precision::bf16).empty());
  const PeerSeries& compile = *found[1];
  ASSERT_EQ(compile.points.size(), 3u);
  EXPECT_EQ(compile.points[0].size, 1024);  // sorted by size
  EXPECT_DOUBLE_EQ(peer_median_at(compile, 1024), 1.5);
  EXPECT_DOUBLE_EQ(peer_median_at(compile, 4096), 0.0) << "a point that failed its check";
  EXPECT_DOUBLE_EQ(peer_median_at(compile, 777), 0.0) << "a size the file does not have";
}

TEST(PeerFile, TheShippedFileLoads) {
  const fs::path file = fs::path(FUSIONLAB_SHIPPED_RECORDING) / "peers.json";
  if (!fs::exists(file)) GTEST_SKIP() << "no source tree at " << file;
  PeerFile f;
  const Status st = load_peer_file(file.string(), &f);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(f.device_name, "NVIDIA H100 80GB HBM3");
  // Lessons 1-8 in fp32 and bf16: eager, compile and the CUDA graph; the attention lessons in
  // bf16 (attention also SDPA's three backends); the decode step's eager and CUDA-graph peers.
  // Every check passed.
  EXPECT_EQ(f.series.size(), 8u * 2u * 3u + (3u + 3u) + 3u + 2u);
  for (const Lesson* lesson : lessons()) {
    const bool has = std::any_of(f.series.begin(), f.series.end(), [&](const PeerSeries& s) {
      return s.lesson == lesson->info().id;
    });
    EXPECT_TRUE(has) << "no peer series of " << lesson->info().id;
  }
  for (const PeerSeries& s : f.series) {
    EXPECT_FALSE(s.points.empty()) << s.lesson << " " << s.peer;
    for (const PeerPoint& p : s.points) EXPECT_TRUE(p.passed) << s.lesson << " " << p.size;
  }
  EXPECT_EQ(find_shipped_peer_file(kAssets.string(), "NVIDIA H100 80GB HBM3"), file.string());
}

// Each broken file is refused with one line that says what is wrong.
TEST(PeerFile, BadFilesAreRefusedWithOneLine) {
  struct Case {
    const char* what;
    std::function<void(json&)> damage;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"not a peer file", [](json& j) { j["format"] = "fusionlab-session"; }, "not a peer file"},
      {"a newer version", [](json& j) { j["schema_version"] = 2; }, "version 2"},
      {"no series", [](json& j) { j.erase("series"); }, "\"series\" is missing"},
      {"series not a list", [](json& j) { j["series"] = 3; }, "not a list"},
      {"an unknown peer", [](json& j) { j["series"][0]["peer"] = "jax"; }, "\"jax\" is not eager"},
      {"an unknown precision", [](json& j) { j["series"][0]["precision"] = "fp8"; },
       "\"fp8\" is not fp32 or bf16"},
      {"a negative time", [](json& j) { j["series"][1]["points"][0]["median_us"] = -1; },
       "series[1].points[0].median_us: -1 is out of range"},
      {"a time over an hour", [](json& j) { j["series"][1]["points"][0]["p80_us"] = 1e10; },
       "out of range"},
      {"a size of zero", [](json& j) { j["series"][0]["points"][0]["size"] = 0; }, ".size"},
      {"a fractional count", [](json& j) { j["series"][0]["points"][0]["count"] = 2.5; },
       "not a whole number"},
      {"a line break in a label", [](json& j) { j["series"][0]["label"] = "eager\nrm -rf"; },
       "control character"},
      {"passed missing", [](json& j) { j["series"][0]["points"][0].erase("passed"); }, "passed"},
      {"no device", [](json& j) { j.erase("device"); }, "\"device\" is missing"},
  };
  for (const Case& c : cases) {
    json j = good_file();
    c.damage(j);
    PeerFile f;
    const Status st = peers_from_json(j.dump(), &f);
    ASSERT_FALSE(st.ok()) << c.what;
    EXPECT_NE(st.message().find(c.expected), std::string::npos) << c.what << ": " << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << c.what << ": " << st.message();
  }
  PeerFile f;
  EXPECT_EQ(peers_from_json("{not json", &f).message(), "not JSON");
  EXPECT_EQ(peers_from_json("[1, 2]", &f).message(), "not a JSON object");
}

TEST(PeerFile, AFileOnDiskIsNamedInTheMessage) {
  const fs::path dir = fs::temp_directory_path() / ("fusionlab-peers-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "broken-peers.json";
  std::ofstream(file) << "{\"format\": \"fusionlab-peers\"";
  PeerFile f;
  const Status st = load_peer_file(file.string(), &f);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("broken-peers.json"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not JSON"), std::string::npos) << st.message();
  const Status missing = load_peer_file((dir / "none.json").string(), &f);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("none.json"), std::string::npos) << missing.message();
  fs::remove_all(dir);
}

// Beside several recordings: the one of the named GPU, else the newest folder's.
TEST(PeerFile, TheShippedFileOfThisGpuIsPreferred) {
  const fs::path assets =
      fs::temp_directory_path() / ("fusionlab-assets-" + std::to_string(getpid()));
  for (const auto& [folder, gpu] :
       {std::pair<const char*, const char*>{"a100-2026-01-01", "NVIDIA A100"},
        {"h100-2026-11-23", "NVIDIA H100 80GB HBM3"}}) {
    fs::create_directories(assets / "recordings" / folder);
    json j = good_file();
    j["device"]["name"] = gpu;
    std::ofstream(assets / "recordings" / folder / "peers.json") << j.dump();
  }
  EXPECT_EQ(
      fs::path(find_shipped_peer_file(assets.string(), "NVIDIA A100")).parent_path().filename(),
      "a100-2026-01-01");
  EXPECT_EQ(
      fs::path(find_shipped_peer_file(assets.string(), "Tesla V100")).parent_path().filename(),
      "h100-2026-11-23");
  EXPECT_EQ(find_shipped_peer_file((assets / "none").string(), ""), "");
  fs::remove_all(assets);
}

}  // namespace
}  // namespace fl
