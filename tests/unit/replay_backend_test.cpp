// The replay backend over sessions made in memory: which recorded size answers a request, that
// the numbers come back exactly as recorded, the one-sentence refusals, merging files of one GPU
// and refusing a mix of GPUs, cancellation; then loading files (bad ones refused, naming the
// file) and the shipped H100 recording.
#include "app/measure/replay_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "model/session_json.h"
#include "tests/support/recorded.h"

namespace fl {
namespace {

DeviceFacts h200() {
  DeviceFacts d = testing_support::recorded_h200();
  d.memory_bytes = int64_t(141) << 30;
  d.driver_version = 13000;
  d.runtime_version = 13000;
  d.roof_gbps = 4287.4;
  return d;
}

// A recognisable, non-round measurement: every number derives from (size, level, seed), so a
// test can tell which recorded point came back.
Measurement recorded(const std::string& lesson, int64_t size, int level,
                     Precision p = Precision::fp32, CacheMode c = CacheMode::cold,
                     int64_t inner = 0, double seed = 1.0) {
  const double t = 3.25 + 1e-6 * static_cast<double>(size) * (level == 0 ? 2.0 : 1.0) * seed;
  Measurement m = testing_support::recorded_measurement(lesson, size, level, t, p, c, inner);
  m.repetitions = 1000 + level + static_cast<int>(size % 97);
  m.chain_time_us = {t, t * 0.97, t * 1.21, t * 0.99, t * 1.02, m.repetitions};
  m.chain_copy_gbps = 4012.5 + level;
  m.check = {2.9e-8 * (level + 1), 4.7e-7, 0, 1e-5, true};
  LaunchResult l;
  l.textbook = {lesson + "_kernel" + std::to_string(level), size * 4, size * 4, 7.0 * size};
  l.time_us = m.chain_time_us;
  l.copy_gbps = 4100.25;
  m.launches.push_back(l);
  return m;
}

Session session_of(std::vector<Measurement> ms, DeviceFacts device = h200(),
                   std::string created = "2026-11-21T23:43:30Z") {
  Session s;
  s.app_version = "0.1.0";
  s.created_utc = std::move(created);
  s.backend = "live";
  s.device = std::move(device);
  s.measurements = std::move(ms);
  return s;
}

// gelu_scale fp32/cold at 1K, 1M, 16M and 64M, levels 0 and 1.
Session gelu_session() {
  std::vector<Measurement> ms;
  for (int64_t size : {int64_t(1) << 10, int64_t(1) << 20, int64_t(1) << 24, int64_t(1) << 26}) {
    ms.push_back(recorded("gelu_scale", size, 0));
    ms.push_back(recorded("gelu_scale", size, 1));
  }
  return session_of(ms);
}

std::unique_ptr<ReplayBackend> make(std::vector<ReplayBackend::Source> sources) {
  std::unique_ptr<ReplayBackend> backend;
  const Status st = ReplayBackend::create(std::move(sources), &backend);
  EXPECT_TRUE(st.ok()) << st.message();
  return backend;
}

std::unique_ptr<ReplayBackend> make(Session s) {
  return make({{"gelu.json", std::move(s)}});
}

MeasureRequest request(const std::string& lesson, int64_t size, Precision p = Precision::fp32,
                       CacheMode c = CacheMode::cold) {
  MeasureRequest r;
  r.lesson = lesson;
  r.size = size;
  r.precision = p;
  r.cache = c;
  return r;
}

const CancelCheck kNever = [] { return false; };

// Every field, compared through the session schema itself, so fields added later count too.
std::string as_json(const std::vector<Measurement>& ms) {
  Session s = session_of(ms);
  return session_to_json(s);
}

TEST(ReplayBackend, IsKindRecordedWithTheRecordingsDevice) {
  auto backend = make(gelu_session());
  ASSERT_TRUE(backend);
  EXPECT_STREQ(backend->kind(), "recorded");
  EXPECT_EQ(backend->device().name, "NVIDIA H200");
  EXPECT_TRUE(backend->device().usable);
  EXPECT_DOUBLE_EQ(backend->device().roof_gbps, 4287.4);
  EXPECT_EQ(backend->summary().date_text(), "2026-11-21");
  EXPECT_EQ(backend->recorded_sizes("gelu_scale", Precision::fp32, CacheMode::cold),
            (std::vector<int64_t>{1 << 10, 1 << 20, 1 << 24, 1 << 26}));
  EXPECT_TRUE(backend->recorded_sizes("gelu_scale", Precision::bf16, CacheMode::cold).empty());
  EXPECT_TRUE(backend->recorded_sizes("relu_scale", Precision::fp32, CacheMode::cold).empty());
}

TEST(ReplayBackend, ChoosesTheNearestRecordedSizeOnALogScale) {
  auto backend = make(gelu_session());
  const std::vector<std::pair<int64_t, int64_t>> cases = {
      {1, 1 << 10},                 // below the smallest
      {1 << 10, 1 << 10},           // exact
      {31 << 10, 1 << 10},          // 31K: log distance to 1K (4.95) < to 1M (5.05)
      {33 << 10, 1 << 20},          // 33K: nearer 1M on a log scale (not on a linear one)
      {3 << 20, 1 << 20},           // 3M: 1M is 3x away, 16M 5.3x
      {5 << 20, 1 << 24},           // 5M: 16M is 3.2x away, 1M 5x
      {40 << 20, 1 << 26},          // 40M: 64M is 1.6x away, 16M 2.5x
      {int64_t(1) << 30, 1 << 26},  // above the largest
  };
  for (const auto& [asked, expected] : cases) {
    std::vector<Measurement> out;
    ASSERT_TRUE(backend->measure(request("gelu_scale", asked), kNever, &out).ok());
    ASSERT_EQ(out.size(), 2u) << "asked " << asked;
    EXPECT_EQ(out[0].size, expected) << "asked " << asked;
    EXPECT_EQ(out[1].size, expected) << "asked " << asked;
    EXPECT_EQ(out[0].level, 0);
    EXPECT_EQ(out[1].level, 1);
    EXPECT_EQ(nearest_recorded_size(
                  backend->recorded_sizes("gelu_scale", Precision::fp32, CacheMode::cold), asked),
              expected);
  }
  // A tie (2^15 is 2^5 from 1K and from 1M) goes to the smaller size.
  EXPECT_EQ(nearest_recorded_size({1 << 10, 1 << 20}, 1 << 15), 1 << 10);
  EXPECT_EQ(nearest_recorded_size({}, 1 << 15), 0);
}

TEST(ReplayBackend, ReturnsExactlyTheRecordedNumbers) {
  const Session s = gelu_session();
  auto backend = make(s);
  std::vector<Measurement> out;
  ASSERT_TRUE(backend->measure(request("gelu_scale", 17000000), kNever, &out).ok());
  const std::vector<Measurement> expected = {s.measurements[4], s.measurements[5]};  // 16M
  EXPECT_EQ(as_json(out), as_json(expected));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].chain_time_us.median, expected[1].chain_time_us.median);  // bit for bit
  EXPECT_EQ(out[1].launches[0].copy_gbps, 4100.25);
}

TEST(ReplayBackend, ServesOnlyTheRequestedLevels) {
  std::vector<Measurement> ms;
  for (int level = 0; level < 3; ++level) {
    ms.push_back(
        recorded("residual_layernorm", 16384, level, Precision::fp32, CacheMode::cold, 768));
  }
  ms.push_back(recorded("residual_layernorm", 2, 0, Precision::fp32, CacheMode::cold, 768));
  auto backend = make(session_of(ms));
  MeasureRequest r = request("residual_layernorm", 4);  // inner 0: the lesson's default, 768
  r.levels = {2, 0};
  std::vector<Measurement> out;
  // Size 2 lacks level 2, so 16384 answers although 2 is nearer.
  ASSERT_TRUE(backend->measure(r, kNever, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].size, 16384);
  EXPECT_EQ(out[0].level, 0);
  EXPECT_EQ(out[1].level, 2);

  r.levels = {3};
  out.clear();
  const Status st = backend->measure(r, kNever, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "residual_layernorm level 3 is not in this recording: fp32/cold holds levels 0, 1 and "
            "2 only.");
  EXPECT_TRUE(out.empty());
}

TEST(ReplayBackend, RefusesWhatIsNotRecordedInOneSentence) {
  std::vector<Measurement> ms = gelu_session().measurements;
  ms.push_back(recorded("bias_gelu", 16384, 0, Precision::fp32, CacheMode::cold, 768));
  ms.push_back(recorded("bias_gelu", 16384, 1, Precision::fp32, CacheMode::cold, 768));
  ms.push_back(recorded("bias_gelu", 16384, 0, Precision::bf16, CacheMode::cold, 768));
  ms.push_back(recorded("bias_gelu", 16384, 1, Precision::bf16, CacheMode::cold, 768));
  auto backend = make(session_of(ms));
  std::vector<Measurement> out;

  Status st = backend->measure(request("relu_scale", 1 << 20), kNever, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "relu_scale is not in this recording, which holds bias_gelu and gelu_scale only.");

  st = backend->measure(request("gelu_scale", 1 << 20, Precision::bf16), kNever, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "gelu_scale in bf16/cold is not in this recording: it is recorded in fp32/cold only.");

  st = backend->measure(request("gelu_scale", 1 << 20, Precision::fp32, CacheMode::warm), kNever,
                        &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "gelu_scale in fp32/warm is not in this recording: it is recorded in fp32/cold only.");

  st = backend->measure(request("bias_gelu", 1 << 10, Precision::bf16, CacheMode::warm), kNever,
                        &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "bias_gelu in bf16/warm is not in this recording: it is recorded in fp32/cold and "
            "bf16/cold only.");

  MeasureRequest wide = request("bias_gelu", 16384);
  wide.inner = 1024;
  st = backend->measure(wide, kNever, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "bias_gelu with hidden size C 1024 is not in this recording: it is recorded with "
            "hidden size C 768 only.");

  st = backend->measure(request("gelu_scale", 0), kNever, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(out.empty()) << "a refusal returns nothing";

  // The default row length (768) and an explicit one answer alike.
  wide.inner = 768;
  ASSERT_TRUE(backend->measure(wide, kNever, &out).ok());
  EXPECT_EQ(out.size(), 2u);
}

TEST(ReplayBackend, MergesSessionsOfOneGpuAndLaterFilesReplaceAPoint) {
  Session fp32 = gelu_session();
  std::vector<Measurement> bf16_ms;
  for (int level = 0; level < 2; ++level) {
    bf16_ms.push_back(recorded("gelu_scale", 1 << 20, level, Precision::bf16));
  }
  Session bf16 = session_of(bf16_ms, h200(), "2026-11-23T10:00:00Z");
  bf16.device.roof_gbps = 4281.9;       // measured again: differs a little, still one GPU
  bf16.device.memory_bytes -= 1 << 20;  // ECC settings move it: still one GPU
  // A rerun at 1M fp32, in a later file: it replaces the first file's point there.
  Session rerun = session_of(
      {recorded("gelu_scale", 1 << 20, 0, Precision::fp32, CacheMode::cold, 0, /*seed=*/3.0),
       recorded("gelu_scale", 1 << 20, 1, Precision::fp32, CacheMode::cold, 0, /*seed=*/3.0)});
  auto backend = make({{"fp32.json", fp32}, {"bf16.json", bf16}, {"rerun.json", rerun}});
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->summary().date_text(), "2026-11-21 to 2026-11-23");
  EXPECT_EQ(backend->summary().origins.size(), 3u);
  EXPECT_EQ(backend->summary().series.size(), 2u);
  EXPECT_DOUBLE_EQ(backend->device().roof_gbps, 4287.4) << "the first file's device facts";

  std::vector<Measurement> out;
  ASSERT_TRUE(backend->measure(request("gelu_scale", 1 << 20, Precision::bf16), kNever, &out).ok());
  EXPECT_EQ(as_json(out), as_json(bf16_ms));
  out.clear();
  ASSERT_TRUE(backend->measure(request("gelu_scale", 1 << 20), kNever, &out).ok());
  EXPECT_EQ(as_json(out), as_json(rerun.measurements));
  out.clear();
  ASSERT_TRUE(backend->measure(request("gelu_scale", 1 << 24), kNever, &out).ok());
  EXPECT_EQ(as_json(out), as_json({fp32.measurements[4], fp32.measurements[5]}));
}

TEST(ReplayBackend, KeepsEveryRecordOfAPointWithinOneFile) {
  // Two records of one level at one point in one file (e.g. a timing and a counter phase): both
  // come back, in recorded order.
  Session s = gelu_session();
  Measurement second = recorded("gelu_scale", 1 << 24, 1);
  second.timing_method = "second record";
  s.measurements.push_back(second);
  auto backend = make(s);
  std::vector<Measurement> out;
  ASSERT_TRUE(backend->measure(request("gelu_scale", 1 << 24), kNever, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].level, 0);
  EXPECT_EQ(out[1].timing_method, "cuda_events");
  EXPECT_EQ(out[2].timing_method, "second record");
}

TEST(ReplayBackend, RefusesToMixGpus) {
  DeviceFacts h100 = h200();
  h100.name = "NVIDIA H100 80GB HBM3";
  h100.l2_bytes = 50 << 20;
  std::unique_ptr<ReplayBackend> backend;
  Status st = ReplayBackend::create(
      {{"h200.json", gelu_session()}, {"h100.json", session_of(gelu_session().measurements, h100)}},
      &backend);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "h200.json was recorded on NVIDIA H200 but h100.json on NVIDIA H100 80GB HBM3: replay "
            "the recordings of one GPU at a time.");
  EXPECT_FALSE(backend);

  DeviceFacts slice = h200();
  slice.sm_count = 66;
  st = ReplayBackend::create(
      {{"a.json", gelu_session()}, {"b.json", session_of(gelu_session().measurements, slice)}},
      &backend);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("a.json and b.json were recorded on two different NVIDIA H200 "
                              "configurations (132 SMs"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
}

TEST(ReplayBackend, RefusesARecordingWithNoMeasurements) {
  std::unique_ptr<ReplayBackend> backend;
  Status st = ReplayBackend::create({{"empty.json", session_of({})}}, &backend);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "empty.json: no measurements to replay");
  st = ReplayBackend::create({}, &backend);
  EXPECT_FALSE(st.ok());
}

TEST(ReplayBackend, HonoursCancellation) {
  auto backend = make(gelu_session());
  std::vector<Measurement> out;
  const Status st = backend->measure(
      request("gelu_scale", 1 << 20), [] { return true; }, &out);
  EXPECT_TRUE(st.ok()) << "cancelled work returns Ok with what it has";
  EXPECT_TRUE(out.empty());
  // Cancelled between levels: partial, in order.
  int calls = 0;
  ASSERT_TRUE(backend
                  ->measure(
                      request("gelu_scale", 1 << 20), [&] { return ++calls > 2; }, &out)
                  .ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].level, 0);
}

TEST(ReplayBackend, AnUnknownLessonIsServedAtItsOnlyRecordedRowLength) {
  // A lesson this build's catalog does not know (a newer recording): inner 0 means the one row
  // length it was recorded with.
  auto backend =
      make(session_of({recorded("future_lesson", 4096, 0, Precision::fp32, CacheMode::cold, 512),
                       recorded("future_lesson", 4096, 1, Precision::fp32, CacheMode::cold, 512)}));
  std::vector<Measurement> out;
  ASSERT_TRUE(backend->measure(request("future_lesson", 5000), kNever, &out).ok());
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(backend->recorded_sizes("future_lesson", Precision::fp32, CacheMode::cold),
            std::vector<int64_t>{4096});
}

// ---- files ----------------------------------------------------------------------------------

class ReplayFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("fl_replay_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(ReplayFiles, LoadsFilesAndFolders) {
  const std::string good = session_to_json(gelu_session());
  write("a.json", good);
  write("notes.txt", "not a session, not read");
  std::unique_ptr<ReplayBackend> backend;
  Status st = load_recording({dir_.string()}, &backend);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(backend->summary().origins.size(), 1u);
  EXPECT_EQ(backend->summary().origins[0], (dir_ / "a.json").string());
  std::vector<Measurement> out;
  ASSERT_TRUE(backend->measure(request("gelu_scale", 1 << 24), kNever, &out).ok());
  // Every number as recorded; the provenance now names the recording they came from.
  std::vector<Measurement> expected = {gelu_session().measurements[4],
                                       gelu_session().measurements[5]};
  for (Measurement& m : expected) {
    m.provenance = {gelu_session().device.name, gelu_session().device.driver_version,
                    gelu_session().created_utc, gelu_session().app_version,
                    dir_.filename().string() + "/a.json"};
  }
  EXPECT_EQ(as_json(out), as_json(expected)) << "a round trip through the file keeps every number";
}

TEST_F(ReplayFiles, RefusesBadFilesNamingTheFile) {
  const std::string good = session_to_json(gelu_session());
  const std::string wrong_version =
      std::regex_replace(good, std::regex("\"schema_version\": *[0-9]+"), "\"schema_version\": 99");
  ASSERT_NE(wrong_version, good);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {write("malformed.json", "{\"format\": \"fusionlab-session\", oops}"), "not valid JSON"},
      {write("truncated.json", good.substr(0, good.size() / 2)), "not valid JSON"},
      {write("version.json", wrong_version), "schema version 99 is not supported"},
      {write("other.json", "{\"hello\": 1}"), "not a Fusion Lab session"},
      {write("empty.json", session_to_json(session_of({}))), "no measurements to replay"},
      {(dir_ / "missing.json").string(), "cannot open"},
  };
  for (const auto& [path, problem] : bad) {
    std::unique_ptr<ReplayBackend> backend;
    const Status st = load_recording({path}, &backend);
    ASSERT_FALSE(st.ok()) << path;
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(problem), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
    EXPECT_FALSE(backend);
  }
  // One bad file among good ones refuses the lot, naming the bad one.
  std::unique_ptr<ReplayBackend> backend;
  const Status st = load_recording({write("good.json", good), bad[1].first}, &backend);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("truncated.json"), std::string::npos) << st.message();

  const std::filesystem::path empty_dir = dir_ / "empty_folder";
  std::filesystem::create_directories(empty_dir);
  EXPECT_FALSE(load_recording({empty_dir.string()}, &backend).ok());
  EXPECT_FALSE(load_recording({"/dev/zero"}, &backend).ok()) << "never read forever";
  EXPECT_FALSE(load_recording({}, &backend).ok());
}

TEST_F(ReplayFiles, RefusesAnOversizedFileWithoutReadingIt) {
  const std::string path = (dir_ / "huge.json").string();
  { std::ofstream(path) << "{"; }
  std::filesystem::resize_file(path, (int64_t(256) << 20) + 1);  // sparse: no disk used
  std::unique_ptr<ReplayBackend> backend;
  const Status st = load_recording({path}, &backend);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("256 MiB"), std::string::npos) << st.message();
}

// A folder of recordings is capped as a whole, from the files' sizes before any is read: at most
// 1000 session files, adding up to at most 256 MiB (each file alone is capped at 256 MiB too).
TEST_F(ReplayFiles, CapsAFolderAsAWhole) {
  const std::filesystem::path many = dir_ / "many";
  std::filesystem::create_directories(many);
  const std::string good = session_to_json(gelu_session());
  for (size_t i = 0; i <= kMaxRecordingFiles; ++i) {
    std::ofstream((many / ("s" + std::to_string(i) + ".json")).string()) << good;
  }
  std::unique_ptr<ReplayBackend> backend;
  Status st = load_recording({many.string()}, &backend);
  EXPECT_EQ(st.message(),
            many.string() + ": more than 1000 session files, the limit for a folder of recordings");
  std::filesystem::remove(many / "s0.json");
  st = load_recording({many.string()}, &backend);
  EXPECT_TRUE(st.ok()) << "1000 files are within the cap: " << st.message();

  // Two files of 200 MiB (sparse: no disk used), each under the cap of one file.
  const std::filesystem::path big = dir_ / "big";
  std::filesystem::create_directories(big);
  for (const char* name : {"a.json", "b.json"}) {
    std::ofstream((big / name).string()) << "{";
    std::filesystem::resize_file(big / name, int64_t(200) << 20);
  }
  st = load_recording({big.string()}, &backend);
  EXPECT_EQ(st.message(), big.string() +
                              ": its session files add up to more than 256 MiB, the limit for a "
                              "folder of recordings");
  // Named one by one, they are one recording too.
  st = load_recording({(big / "a.json").string(), (big / "b.json").string()}, &backend);
  EXPECT_EQ(st.message(),
            "the session files given add up to 400.0 MiB, more than 256 MiB, the limit for one "
            "recording");
  // A single file over 256 MiB is refused by its own check, which names it.
  std::filesystem::remove(big / "b.json");
  std::filesystem::resize_file(big / "a.json", (int64_t(256) << 20) + 1);
  st = load_recording({big.string()}, &backend);
  EXPECT_NE(st.message().find("a.json: larger than 256 MiB"), std::string::npos) << st.message();
}

TEST(ShippedRecording, LoadsAndServesTheH100Measurements) {
  const std::filesystem::path folder = FUSIONLAB_SHIPPED_RECORDING;
  if (!std::filesystem::exists(folder)) GTEST_SKIP() << "no source tree at " << folder;
  std::unique_ptr<ReplayBackend> backend;
  const Status st = load_recording({folder.string()}, &backend);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(backend->device().name, "NVIDIA H100 80GB HBM3");
  // (its files from the folder's date on: a lesson re-recorded later makes it a span)
  EXPECT_EQ(backend->summary().date_text().rfind(FUSIONLAB_SHIPPED_DATE, 0), 0u)
      << backend->summary().date_text();
  std::vector<int64_t> grid;  // 1K, 4K, ... 64M: the gpu-check.sh size grid
  for (int64_t n = 1 << 10; n <= (int64_t(1) << 26); n *= 4) grid.push_back(n);
  EXPECT_EQ(backend->recorded_sizes("gelu_scale", Precision::fp32, CacheMode::cold), grid);
  std::vector<Measurement> out;
  ASSERT_TRUE(backend->measure(request("gelu_scale", 1 << 24), kNever, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_GT(speedup(out[0], out[1]), 1.5) << "the recorded fused kernel beats the chain at 16M";
  // Row-wise lessons at their default row length.
  out.clear();
  ASSERT_TRUE(backend->measure(request("scale_mask_softmax", 196608), kNever, &out).ok());
  EXPECT_EQ(out.size(), 3u);
}

}  // namespace
}  // namespace fl
