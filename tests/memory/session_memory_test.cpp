// Bounded memory while loading a recording (docs/RELIABILITY.md, "Recordings:
// validated fields and bounded memory"): a recording under the size cap loads with a peak
// resident memory of at most 3x its size, plus the fixed cost of the process.
//
// The test writes large valid recordings and has a child process load each (tests/memory/
// load_probe.cpp: load_session, and load_recording as --replay does). The child reports its
// resident memory when main() began, the fixed cost of the process (the libraries it maps), and
// its peak (VmHWM) after loading; the promise is peak - start <= 3 x the file's size. (wait4's
// ru_maxrss cannot be used: a spawned child's counts the parent's memory from before the exec.)
// Label `memory`; CI runs it (about 15 s on one core).
//
// Two shapes, both valid recordings: many ordinary measurements (what `bench` writes over many
// sizes) written without indentation, the fewest bytes of text per loaded number and so the
// highest ratio; and a few measurements holding very many kernel records, indented as the app
// writes them (the most text per measurement, so the most any one object of the file weighs).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "model/session_json.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

namespace fs = std::filesystem;

// The promise: peak <= kMaxPeakRatio x the file's size above the process's fixed cost.
constexpr double kMaxPeakRatio = 3.0;

Stats times(double median_us, int count) {
  return {median_us, median_us * 0.97, median_us * 1.4, median_us * 0.99, median_us * 1.02, count};
}

// One level of `lesson` at `size` as the live backend records it: the level's launches with
// their textbook traffic from the catalog, times, counters, and `records_per_launch` kernel
// records per launch (one repetition has one each).
Measurement measured(const Lesson& lesson, int64_t size, int level, Precision precision,
                     CacheMode cache, int records_per_launch) {
  const Shape shape = lesson.resolve(Shape(size));
  Measurement m;
  m.lesson = lesson.info().id;
  m.size = size;
  m.inner = shape.inner;
  m.level = level;
  m.level_name = lesson.info().levels[level].name;
  m.precision = precision;
  m.cache = cache;
  m.timing_method = "cupti_activity";
  m.repetitions = 1574;
  m.chain_time_us = times(123.25 + level, m.repetitions);
  m.chain_copy_gbps = 2990.5;
  m.check = {3.6e-8, 4.7e-7, 0, 1e-5, true};
  m.counters_status = CountersStatus::measured;
  uint64_t start = 1763769940123456789ull;
  for (const LaunchTraffic& traffic : lesson.traffic(level, shape, precision)) {
    LaunchResult l;
    l.textbook = traffic;
    l.time_us = times(61.5, m.repetitions);
    l.copy_gbps = 2985.25;
    l.counters = LaunchCounters{traffic.bytes_read + 4096, traffic.bytes_written + 8192,
                                3 * traffic.bytes() + 12288};
    for (int r = 0; r < records_per_launch; ++r) {
      KernelRecord k;
      k.launch = static_cast<int>(m.launches.size());
      k.kernel = traffic.kernel + "_kernel<float, fl::LessonOp>";
      k.start_ns = start;
      k.end_ns = start + 61500;
      k.start_rel_ns = static_cast<int64_t>(start - 1763769940123456789ull);
      k.end_rel_ns = k.start_rel_ns + 61500;
      k.stream_id = 13;
      k.correlation_id = 11481 + static_cast<uint32_t>(r);
      k.grid = {{65536, 1, 1}};
      k.block = {{256, 1, 1}};
      k.registers_per_thread = 19;
      m.records.push_back(k);
      start += 64000;
    }
    m.launches.push_back(l);
  }
  return m;
}

Session empty_session() {
  Session s;
  s.app_version = "0.1.0";
  s.created_utc = "2026-11-23T10:00:00Z";
  s.backend = "live";
  s.device.name = "NVIDIA H100 80GB HBM3";
  s.device.cc_major = 9;
  s.device.sm_count = 132;
  s.device.l2_bytes = 52428800;
  s.device.memory_bytes = 85030617088;
  s.device.driver_version = 13000;
  s.device.runtime_version = 13000;
  s.device.roof_gbps = 3042.5;
  s.device.copy_bandwidth = {{1 << 20, CacheMode::cold, 1450.5},
                             {1 << 30, CacheMode::cold, 3042.5}};
  return s;
}

// Every lesson, level, precision it has and cache mode at sizes 1, 2, 3, ... until the session
// holds `count` measurements: all distinct points, all within the lessons' limits.
Session many_measurements(size_t count) {
  Session s = empty_session();
  for (int64_t size = 1; s.measurements.size() < count; ++size) {
    for (const Lesson* lesson : lessons()) {
      if (size > lesson->info().size_axis.max) continue;
      for (Precision p : lesson->info().precisions) {  // gpt2_decode has bf16 only
        for (CacheMode c : {CacheMode::cold, CacheMode::warm}) {
          for (int level = 0; level < lesson->level_count(); ++level) {
            if (s.measurements.size() < count) {
              s.measurements.push_back(measured(*lesson, size, level, p, c, 1));
            }
          }
        }
      }
    }
  }
  return s;
}

// `count` measurements of gelu_scale's unfused level, each with `records` records per launch.
Session many_records(size_t count, int records) {
  Session s = empty_session();
  const Lesson& gelu = *find_lesson("gelu_scale");
  for (size_t i = 0; i < count; ++i) {
    s.measurements.push_back(measured(gelu, (int64_t(1) << 20) + static_cast<int64_t>(i), 0,
                                      Precision::fp32, CacheMode::cold, records));
  }
  return s;
}

// Writes `session` to `path` (`indent` as session_to_json takes it) and returns the file's size.
int64_t write_recording(const Session& session, const fs::path& path, int indent) {
  const std::string text = session_to_json(session, indent);
  std::ofstream(path, std::ios::binary) << text;
  return static_cast<int64_t>(fs::file_size(path));
}

struct ProbeRun {
  int exit_status = -1;
  size_t measurements = 0;
  int64_t start_bytes = 0;  // the child's resident memory when main() began
  int64_t peak_bytes = 0;   // its peak
};

// `text` in single quotes for sh.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the probe (`mode`: "session" or "recording") on `path` in a child process.
ProbeRun run_probe(const std::string& mode, const fs::path& path) {
  const std::string command =
      quoted(FUSIONLAB_LOAD_PROBE) + " " + mode + " " + quoted(path.string());
  ProbeRun run;
  FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr) return run;
  long start_kib = -1, peak_kib = -1;
  if (std::fscanf(out, "measurements %zu start_kib %ld peak_kib %ld", &run.measurements, &start_kib,
                  &peak_kib) != 3) {
    peak_kib = -1;
  }
  const int status = ::pclose(out);
  run.exit_status = WIFEXITED(status) && peak_kib > 0 ? WEXITSTATUS(status) : -1;
  run.start_bytes = int64_t(start_kib) * 1024;
  run.peak_bytes = int64_t(peak_kib) * 1024;
  return run;
}

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

class LoadMemory : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine are not the loader's";
#endif
    // FL_MEMORY_KEEP_DIR=FOLDER keeps the recordings there (to measure other loaders on them).
    const char* keep = std::getenv("FL_MEMORY_KEEP_DIR");
    keep_ = keep != nullptr && *keep != '\0';
    dir_ = keep_ ? fs::path(keep)
                 : fs::path(::testing::TempDir()) / ("fl_memory_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!keep_) fs::remove_all(dir_, ec);
  }

  // Loads `path` (`measurements` of them) both ways in a child and checks its peak against the
  // promise.
  void expect_bounded(const fs::path& path, int64_t file_bytes, size_t measurements) {
    for (const char* mode : {"session", "recording"}) {
      const ProbeRun run = run_probe(mode, path);
      ASSERT_EQ(run.exit_status, 0) << mode << " " << path << " did not load";
      // The recording's count is its series' sizes x levels, an upper bound.
      if (mode == std::string("session")) EXPECT_EQ(run.measurements, measurements);
      EXPECT_GE(run.measurements, measurements) << mode;
      const double ratio =
          static_cast<double>(run.peak_bytes - run.start_bytes) / static_cast<double>(file_bytes);
      std::printf(
          "%-9s %s: file %.1f MiB; RSS %.1f MiB at start, peak %.1f MiB: %.2fx the file "
          "above the start\n",
          mode, path.filename().c_str(), mib(file_bytes), mib(run.start_bytes), mib(run.peak_bytes),
          ratio);
      std::fflush(stdout);
      EXPECT_LE(ratio, kMaxPeakRatio) << mode << ": " << path;
    }
  }

  fs::path dir_;
  bool keep_ = false;
};

TEST_F(LoadMemory, ManyMeasurementsLoadWithin3xTheFileSize) {
  const fs::path path = dir_ / "many_measurements.json";
  const int64_t bytes = write_recording(many_measurements(32000), path, -1);
  ASSERT_GT(bytes, int64_t(48) << 20) << "the recording is meant to be large";
  ASSERT_LT(bytes, kMaxSessionFileBytes);
  expect_bounded(path, bytes, 32000);
}

TEST_F(LoadMemory, ManyRecordsLoadWithin3xTheFileSize) {
  const fs::path path = dir_ / "many_records.json";
  const int64_t bytes = write_recording(many_records(4, 25000), path, 2);
  ASSERT_GT(bytes, int64_t(32) << 20) << "the recording is meant to be large";
  expect_bounded(path, bytes, 4);
}

}  // namespace
}  // namespace fl
