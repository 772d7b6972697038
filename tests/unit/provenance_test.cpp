// Provenance that survives: replay the shipped H100 recording, save the session as the window's
// Ctrl+S does (created today, backend "recorded"), reopen it: the original date and GPU are what
// the replay reports, and every measurement comes back byte for byte. Older files (the shipped
// ones have no provenance) get their session's facts; a mix of sources says so.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "app/measure/export.h"
#include "app/measure/replay_backend.h"
#include "model/session_json.h"

#ifndef FUSIONLAB_SOURCE_DIR
#error "FUSIONLAB_SOURCE_DIR must name the source tree"
#endif

namespace fl {
namespace {

namespace fs = std::filesystem;

// The shipped recording (cmake/ShippedRecording.cmake), its folder name and its UTC date.
const std::string kShipped = FUSIONLAB_SHIPPED_RECORDING;
const std::string kShippedName = FUSIONLAB_SHIPPED_RECORDING_NAME;
const std::string kShippedDate = FUSIONLAB_SHIPPED_DATE;
// A schema-2 session (no per-measurement provenance), kept as a fuzz seed.
const std::string kOlderSession =
    std::string(FUSIONLAB_SOURCE_DIR) + "/tests/fuzz/corpus/session/gemm_bf16_cold.json";

// Every recorded point of `backend`, as the window's history holds them after a full replay.
std::vector<Measurement> replay_everything(ReplayBackend& backend) {
  std::vector<Measurement> out;
  for (const RecordedSeries& s : backend.summary().series) {
    for (int64_t size : s.sizes) {
      MeasureRequest r;
      r.lesson = s.lesson;
      r.size = size;
      r.precision = s.precision;
      r.cache = s.cache;
      r.inner = s.inner;
      std::vector<Measurement> ms;
      EXPECT_TRUE(backend
                      .measure(
                          r, [] { return false; }, &ms)
                      .ok());
      out.insert(out.end(), ms.begin(), ms.end());
    }
  }
  return out;
}

// The window's session of a replay (Lab::session_snapshot), saved on another day.
Session saved_from_replay(const ReplayBackend& backend, std::vector<Measurement> ms) {
  Session s;
  s.app_version = "0.2.0";
  s.created_utc = "2026-11-26T04:30:00Z";
  s.backend = "recorded";
  s.device = backend.device();
  s.measurements = std::move(ms);
  return s;
}

std::string measurements_text(std::vector<Measurement> ms) {
  Session s;
  s.measurements = std::move(ms);
  return session_to_json(s);
}

class TempFolder {
 public:
  TempFolder()
      : path_(fs::temp_directory_path() /
              ("fusionlab_provenance_test_" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

TEST(Provenance, OlderFilesGetTheirSessionsFacts) {
  Session s;
  ASSERT_TRUE(load_session(kOlderSession, &s).ok());
  ASSERT_FALSE(s.measurements.empty());
  for (const Measurement& m : s.measurements) {
    EXPECT_EQ(m.provenance.gpu, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(m.provenance.driver_version, 13000);
    EXPECT_EQ(m.provenance.measured_utc, s.created_utc);
    EXPECT_EQ(m.provenance.date(), "2026-11-23");
    EXPECT_EQ(m.provenance.source, "live");  // bench measured it live and saved it there
  }
}

TEST(Provenance, ReplaySaveReopenKeepsTheOriginalDateGpuAndBytes) {
  std::unique_ptr<ReplayBackend> first;
  ASSERT_TRUE(load_recording({kShipped}, &first).ok());
  // The shipped folder's files span its own date and may span the days after it (a lesson
  // re-recorded later on the same GPU kind); each measurement keeps its own file's date.
  const std::string shipped_dates = first->summary().date_text();
  EXPECT_EQ(shipped_dates.rfind(kShippedDate, 0), 0u) << shipped_dates;
  const std::string last_date = first->summary().last_utc.substr(0, 10);
  const std::vector<Measurement> replayed = replay_everything(*first);
  ASSERT_GT(replayed.size(), 100u);
  for (const Measurement& m : replayed) {
    ASSERT_GE(m.provenance.date(), kShippedDate);
    ASSERT_LE(m.provenance.date(), last_date);
    // A replayed measurement names the recording it came from, not this machine's path.
    ASSERT_EQ(m.provenance.source.rfind(kShippedName + "/", 0), 0u) << m.provenance.source;
  }

  TempFolder dir;
  const std::string saved_path = dir.file("saved.json");
  ASSERT_TRUE(save_session(saved_from_replay(*first, replayed), saved_path).ok());
  std::unique_ptr<ReplayBackend> reopened;
  ASSERT_TRUE(load_recording({saved_path}, &reopened).ok());
  // What the banner and the GPU panel show: the recording's date and GPU, not the save's.
  EXPECT_EQ(reopened->summary().date_text(), shipped_dates);
  EXPECT_EQ(reopened->summary().device.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(reopened->summary().device.driver_version, 13000);
  const std::vector<Measurement> again = replay_everything(*reopened);
  ASSERT_EQ(again.size(), replayed.size());
  EXPECT_EQ(measurements_text(again), measurements_text(replayed));

  // Saved once more from the reopened replay: still byte-equal, still the original source.
  const std::string twice = dir.file("twice.json");
  ASSERT_TRUE(save_session(saved_from_replay(*reopened, again), twice).ok());
  Session reloaded;
  ASSERT_TRUE(load_session(twice, &reloaded).ok());
  EXPECT_EQ(measurements_text(reloaded.measurements), measurements_text(replayed));

  // The trace's title and the CSV carry the measurement's own date and GPU.
  const Session saved = saved_from_replay(*reopened, again);
  const std::string trace = chrome_trace_json(saved);
  EXPECT_NE(trace.find("measured NVIDIA H100 80GB HBM3, " + kShippedDate), std::string::npos);
  // The first row's last columns: its own measured_utc and source; session_created_utc is the
  // save's.
  const std::string csv = measurements_csv(saved);
  const std::string row = csv.substr(csv.find('\n') + 1, csv.find('\n', csv.find('\n') + 1));
  EXPECT_NE(row.find(",2026-11-26T04:30:00Z,"), std::string::npos) << row;
  EXPECT_NE(row.find("," + kShippedDate + "T"), std::string::npos) << row;
  EXPECT_NE(row.find("," + kShippedName + "/"), std::string::npos) << row;
}

TEST(Provenance, ASessionThatMixesSourcesSaysSo) {
  Session s;
  ASSERT_TRUE(load_session(kShipped + "/elementwise_fp32_cold.json", &s).ok());
  EXPECT_EQ(provenance_text(s.measurements), "NVIDIA H100 80GB HBM3, " + kShippedDate);
  Measurement live = s.measurements.front();
  live.provenance = {"NVIDIA H200", 13000, "2026-11-26T04:31:00Z", "0.2.0", "live"};
  s.measurements.push_back(live);
  const std::string text = provenance_text(s.measurements);
  EXPECT_EQ(text.rfind("mixed: ", 0), 0u) << text;
  EXPECT_NE(text.find("NVIDIA H200 2026-11-26 live (1)"), std::string::npos) << text;
}

}  // namespace
}  // namespace fl
