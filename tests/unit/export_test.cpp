// The exports (app/measure/export.h): the Chrome trace checked by tests/unit/trace_check.h on
// the shipped recording and on synthetic sessions (v2 with records, v1 without), the checker
// itself against broken traces, gzip, atomic writes, and the CSV.
#include "app/measure/export.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "model/session_json.h"
#include "tests/unit/trace_check.h"

#if FUSIONLAB_HAVE_ZLIB
#include <zlib.h>
#endif

namespace fl {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const fs::path kRecording = FUSIONLAB_SHIPPED_RECORDING;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A folder of its own under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("fusionlab_export_test_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

Stats stats(double median) {
  return {median, median * 0.95, median * 1.2, median * 0.98, median * 1.03, 100};
}

// One measurement with a launch per op; when `base_ns` is nonzero, one record per launch that
// starts `gap_ns` after the previous one ends, on `stream` (the last launch on `stream + 1` when
// `two_streams`), with CUPTI-sized absolute timestamps.
Measurement make(const std::string& lesson, int64_t size, int level, std::vector<double> launch_us,
                 uint64_t base_ns, bool counters, bool two_streams = false) {
  Measurement m;
  m.lesson = lesson;
  m.size = size;
  m.level = level;
  m.level_name = level == 0 ? "unfused" : "fused, level \"" + std::to_string(level) + "\"";
  m.precision = Precision::fp32;
  m.cache = CacheMode::cold;
  m.timing_method = base_ns ? "cupti_activity" : "cuda_events";
  m.repetitions = 100;
  m.check = {1e-7, 1e-6, 0, 1e-5, true};
  double chain = 0;
  uint64_t at = base_ns;
  for (size_t k = 0; k < launch_us.size(); ++k) {
    LaunchResult l;
    l.textbook = {"op" + std::to_string(k), size * 4, size * 4, double(size)};
    l.time_us = stats(launch_us[k]);
    l.copy_gbps = 1000 + k;
    if (counters && k != 1)
      l.counters = LaunchCounters{size * 4 + 37 * int64_t(k), size * 4 + 11, size * 9};
    m.launches.push_back(l);
    chain += launch_us[k];
    if (base_ns) {
      KernelRecord r;
      r.launch = static_cast<int>(k);
      r.kernel = "kernel_" + std::to_string(k) + "<float, fl::Op>";
      r.start_ns = at;
      r.end_ns = at + static_cast<uint64_t>(launch_us[k] * 1000 + 0.5);
      r.start_rel_ns = static_cast<int64_t>(r.start_ns - base_ns);
      r.end_rel_ns = static_cast<int64_t>(r.end_ns - base_ns);
      r.stream_id = two_streams && k + 1 == launch_us.size() ? 14 : 13;
      r.correlation_id = 1000 + static_cast<uint32_t>(k);
      r.grid = {{static_cast<int>(size / 256) + 1, 1, 1}};
      r.block = {{256, 1, 1}};
      r.registers_per_thread = 20 + static_cast<int>(k);
      r.static_shared_bytes = 0;
      r.dynamic_shared_bytes = 512 * static_cast<int>(k);
      m.records.push_back(r);
      at = r.end_ns + 1537;  // a gap between launches, as CUPTI records them
    }
  }
  m.chain_time_us = stats(chain + (launch_us.size() - 1) * 1.537);
  m.counters_status = counters ? CountersStatus::measured : CountersStatus::not_measured;
  return m;
}

// A v2 session that exercises the layout: two sizes, levels 0..2, a second stream, a launch
// without counters, a failed check (speedup 0), a point with no level 0 (no speedup), and a
// level 0 measured twice (the nearest earlier one is the baseline).
Session synthetic_session() {
  Session s;
  s.app_version = "0.1.0";
  s.created_utc = "2026-11-22T01:00:00Z";
  s.backend = "live";
  s.device.name = "Test GPU";
  s.device.cc_major = 9;
  const uint64_t t = 1795307715477583721ull;  // beyond 2^53, like CUPTI's
  s.measurements.push_back(make("gelu_scale", 1 << 20, 0, {5.25, 4.125}, t, true));
  s.measurements.push_back(make("gelu_scale", 1 << 20, 1, {4.875}, t + 90000, true));
  s.measurements.push_back(
      make("gelu_scale", 1 << 26, 0, {310.5, 301.25, 12.0}, t + 500000, true, true));
  Measurement wrong = make("gelu_scale", 1 << 26, 1, {155.0}, t + 900000, false);
  wrong.check.passed = false;
  s.measurements.push_back(wrong);
  s.measurements.push_back(make("gelu_scale", 1 << 26, 2, {150.001}, t + 1200000, true));
  s.measurements.push_back(make("relu_scale", 4096, 1, {2.0}, t + 1500000, true));  // no level 0
  s.measurements.push_back(make("gelu_scale", 1 << 20, 0, {5.5, 4.0}, t + 2000000, true));
  s.measurements.push_back(make("gelu_scale", 1 << 20, 1, {4.5}, t + 2100000, false));
  return s;
}

// A schema-1 file as an older build wrote it: no counters, no records.
Session v1_session() {
  Session s = synthetic_session();
  s.measurements.resize(3);
  json j = json::parse(session_to_json(s));
  j["schema_version"] = 1;
  for (json& m : j["measurements"]) {
    m.erase("records");
    m.erase("counters_status");
    m.erase("counters_note");
    for (json& l : m["launches"]) l.erase("counters");
  }
  Session v1;
  EXPECT_TRUE(session_from_json(j.dump(), &v1).ok());
  return v1;
}

std::vector<std::string> recording_files() {
  std::vector<std::string> files;
  if (!fs::exists(kRecording)) return files;
  for (const auto& entry : fs::directory_iterator(kRecording)) {
    // peers.json is the PyTorch peer file beside the sessions, not a session.
    if (entry.path().extension() == ".json" && entry.path().filename() != "peers.json") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

size_t record_count(const Session& s) {
  size_t n = 0;
  for (const Measurement& m : s.measurements) n += m.records.size();
  return n;
}

// The phase records of every launch (a slice each on its SM's thread of the trace).
size_t phase_record_count(const Session& s) {
  size_t n = 0;
  for (const Measurement& m : s.measurements) {
    for (const auto& l : m.launches) n += l.phases ? l.phases->records.size() : 0;
  }
  return n;
}

// ---- the trace -------------------------------------------------------------------------------

TEST(TraceExport, EveryShippedRecordingPassesTheCheckAndStaysSmall) {
  const std::vector<std::string> files = recording_files();
  if (files.empty()) GTEST_SKIP() << "no source tree at " << kRecording;
  Session all;
  size_t biggest = 0;
  for (const std::string& file : files) {
    Session s;
    ASSERT_TRUE(load_session(file, &s).ok()) << file;
    ASSERT_GT(record_count(s), 0u) << file << " should carry raw records";
    const std::string trace = chrome_trace_json(s);
    const std::vector<std::string> problems = check_chrome_trace(trace, s);
    EXPECT_TRUE(problems.empty()) << file << ":\n" << join_problems(problems);
    // Small: compact JSON of one repetition, under 2 KiB per kernel record all told, plus a
    // slice of under 512 bytes per phase record.
    EXPECT_LT(trace.size(), 2048 * record_count(s) + 512 * phase_record_count(s)) << file;
    EXPECT_EQ(trace.find('\n'), std::string::npos) << "the trace should be compact, one line";
    biggest = std::max(biggest, trace.size());
    if (all.measurements.empty()) all = s, all.measurements.clear();
    for (const Measurement& m : s.measurements) all.measurements.push_back(m);
  }
  const std::string trace = chrome_trace_json(all);
  EXPECT_TRUE(check_chrome_trace(trace, all).empty())
      << join_problems(check_chrome_trace(trace, all));
  std::printf(
      "trace sizes: largest single recording %zu bytes; the whole folder (%zu measurements, "
      "%zu records) %zu bytes\n",
      biggest, all.measurements.size(), record_count(all), trace.size());
}

TEST(TraceExport, SyntheticSessionPassesTheCheck) {
  const Session s = synthetic_session();
  const std::string trace = chrome_trace_json(s);
  const std::vector<std::string> problems = check_chrome_trace(trace, s);
  EXPECT_TRUE(problems.empty()) << join_problems(problems);

  const json events = json::parse(trace).at("traceEvents");
  int kernels = 0;
  std::map<int, std::string> processes;                // pid -> name
  std::map<std::pair<int, int>, std::string> threads;  // (pid, tid) -> name
  std::vector<double> speedups;                        // from the measurement slices
  std::set<std::string> counter_tracks;
  for (const json& e : events) {
    if (e["ph"] == "X" && e.value("cat", "") == "kernel") ++kernels;
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name")
      threads[{e["pid"], e["tid"]}] = e["args"]["name"];
    if (e["ph"] == "X" && e.value("cat", "") == "measurement" &&
        e["args"].contains("speedup_vs_level0")) {
      speedups.push_back(e["args"]["speedup_vs_level0"]);
    }
    if (e["ph"] == "C")
      counter_tracks.insert(std::to_string(e["pid"].get<int>()) + " " +
                            e["name"].get<std::string>());
  }
  EXPECT_EQ(kernels, static_cast<int>(record_count(s)));
  // Three runs: gelu_scale at 1M (levels 0, 1), at 64M (levels 0, 1, 2), relu_scale at 4K (1).
  ASSERT_EQ(processes.size(), 3u);
  EXPECT_EQ(processes[1], "gelu_scale · 1M elements · fp32 · cold L2");
  EXPECT_EQ(processes[2], "gelu_scale · 64M elements · fp32 · cold L2");
  EXPECT_EQ(processes[3], "relu_scale · 4K elements · fp32 · cold L2");
  EXPECT_EQ(threads.size(), 2u + 3u + 1u);
  EXPECT_EQ(threads[std::make_pair(2, 2 * 100000 + 1 + 2)], "level 2 · fused, level \"2\"");
  EXPECT_EQ(threads[std::make_pair(1, 1 * 100000 + 1)], "level 0 · unfused");
  // DRAM counter tracks per run and level, where the level has counters.
  EXPECT_TRUE(counter_tracks.count("1 DRAM bytes · level 0"));
  EXPECT_TRUE(counter_tracks.count("2 DRAM bytes · level 2"));
  // Every measurement but relu_scale's (no level 0) has a speedup; the failed check's is 0 and
  // the second 1M level 1 is taken against the second 1M level 0, not the first.
  ASSERT_EQ(speedups.size(), s.measurements.size() - 1);
}

TEST(TraceExport, SpeedupsAreTakenAgainstTheNearestLevel0) {
  const Session s = synthetic_session();
  const json events = json::parse(chrome_trace_json(s)).at("traceEvents");
  std::map<int, double> speedup_of;  // measurement -> speedup
  for (const json& e : events) {
    if (e["ph"] == "X" && e.value("cat", "") == "measurement" &&
        e["args"].contains("speedup_vs_level0")) {
      speedup_of[e["args"]["measurement"]] = e["args"]["speedup_vs_level0"];
    }
  }
  EXPECT_EQ(speedup_of.count(5), 0u) << "relu_scale has no level 0";
  EXPECT_EQ(speedup_of[3], 0.0) << "a failed check has no speedup";
  EXPECT_DOUBLE_EQ(speedup_of[7], speedup(s.measurements[6], s.measurements[7]));
  EXPECT_NE(speedup_of[7], speedup(s.measurements[0], s.measurements[7]));
}

TEST(TraceExport, LevelsOfARunLineUpAndRepeatsFollowWithAVisibleGap) {
  const Session s = synthetic_session();
  const json events = json::parse(chrome_trace_json(s)).at("traceEvents");
  std::map<int, std::pair<double, double>> span;  // measurement -> ts, end
  for (const json& e : events) {
    if (e["ph"] == "X" && e.value("cat", "") == "measurement") {
      span[e["args"]["measurement"]] = {e["ts"].get<double>(),
                                        e["ts"].get<double>() + e["dur"].get<double>()};
      EXPECT_NE(e["args"].value("rebased", std::string()), "") << "the rebasing should be said";
    }
  }
  ASSERT_EQ(span.size(), s.measurements.size());
  // Level 0 and level 1 of gelu_scale 1M, and all three levels at 64M, start at 0 together.
  for (int i : {0, 1, 2, 3, 4, 5}) EXPECT_EQ(span[i].first, 0.0) << "measurement " << i;
  // The second 1M level 0 (6) follows the first (0) on its thread, 10 µs or more after it.
  EXPECT_GE(span[6].first - span[0].second, 10.0 - 1e-9);
  EXPECT_GE(span[7].first - span[1].second, 10.0 - 1e-9);
}

TEST(TraceExport, KernelsAreNamedByTheirOperation) {
  EXPECT_EQ(trace_op_name("gelu"), "gelu");
  EXPECT_EQ(trace_op_name("scale"), "scale");
  EXPECT_EQ(trace_op_name("gelu_scale_fused"), "fused gelu·scale");
  EXPECT_EQ(trace_op_name("scale_mask_softmax_fused"), "fused scale·mask·softmax");
  EXPECT_EQ(trace_op_name("_fused"), "_fused");
  const fs::path file = kRecording / "elementwise_fp32_cold.json";
  if (!fs::exists(file)) GTEST_SKIP() << "no source tree at " << kRecording;
  Session s;
  ASSERT_TRUE(load_session(file.string(), &s).ok());
  std::set<std::string> names;
  std::set<std::string> full_names;
  const json trace = json::parse(chrome_trace_json(s));  // kept: the loop reads into it
  for (const json& e : trace.at("traceEvents")) {
    if (e["ph"] == "X" && e.value("cat", "") == "kernel" && e["args"]["lesson"] == "gelu_scale") {
      names.insert(e["name"].get<std::string>());
      full_names.insert(e["args"]["kernel"].get<std::string>());
      EXPECT_TRUE(e["args"]["grid"].is_array());
      EXPECT_TRUE(e["args"].contains("textbook_bytes_read"));
      EXPECT_TRUE(e["args"].contains("dram_read_bytes"));
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"gelu", "scale", "fused gelu·scale"}));
  EXPECT_TRUE(full_names.count("elementwise_kernel<float, fl::GeluFastOp>"))
      << "the full name is in args";
}

TEST(TraceExport, V1SessionWithoutRecordsGetsSynthesizedSlices) {
  const Session s = v1_session();
  ASSERT_EQ(s.measurements.size(), 3u);
  ASSERT_EQ(record_count(s), 0u);
  const std::string trace = chrome_trace_json(s);
  const std::vector<std::string> problems = check_chrome_trace(trace, s);
  EXPECT_TRUE(problems.empty()) << join_problems(problems);
  int synthesized = 0;
  const json parsed = json::parse(trace);
  for (const json& e : parsed.at("traceEvents")) {
    if (e["ph"] == "X" && e.value("cat", "") != "measurement") {
      EXPECT_TRUE(e["args"]["synthesized"].get<bool>());
      ++synthesized;
    }
    EXPECT_NE(e.value("name", ""), "DRAM bytes") << "v1 has no counters to draw";
  }
  EXPECT_EQ(synthesized, 2 + 1 + 3);  // the launches of the three measurements
}

TEST(TraceExport, EmptySessionIsAValidTrace) {
  Session s;
  const std::string trace = chrome_trace_json(s);
  EXPECT_TRUE(check_chrome_trace(trace, s).empty());
  EXPECT_TRUE(json::parse(trace).at("traceEvents").is_array());
}

// The checker must fail on what it is there to catch.
class BrokenTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    session_ = synthetic_session();
    trace_ = json::parse(chrome_trace_json(session_));
    ASSERT_TRUE(check_chrome_trace(trace_.dump(), session_).empty());
  }
  // The first event matching `pred`.
  json& find(const std::function<bool(const json&)>& pred) {
    for (json& e : trace_["traceEvents"]) {
      if (pred(e)) return e;
    }
    ADD_FAILURE() << "no such event";
    return trace_;
  }
  json& kernel(int measurement, int record) {
    return find([&](const json& e) {
      return e["ph"] == "X" && e.value("cat", "") == "kernel" &&
             e["args"]["measurement"] == measurement && e["args"]["record"] == record;
    });
  }
  std::string problems() { return join_problems(check_chrome_trace(trace_.dump(), session_)); }

  Session session_;
  json trace_;
};

TEST_F(BrokenTrace, AWrongDurationIsCaught) {
  kernel(2, 1)["dur"] = kernel(2, 1)["dur"].get<double>() + 0.001;  // one nanosecond more
  EXPECT_NE(problems().find("dur is not"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, NanosecondsInsteadOfMicrosecondsAreCaught) {
  json& k = kernel(0, 0);
  k["dur"] = k["dur"].get<double>() * 1000;
  EXPECT_NE(problems().find("dur is not"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, AMissingFieldIsCaught) {
  kernel(1, 0).erase("pid");
  EXPECT_NE(problems().find("missing or malformed fields for phase X"), std::string::npos)
      << problems();
  SetUp();
  find([](const json& e) { return e["ph"] == "M" && e["name"] == "thread_name"; })["args"].erase(
      "name");
  EXPECT_NE(problems().find("phase M"), std::string::npos) << problems();
  SetUp();
  find([](const json& e) { return e["ph"] == "C"; })["args"]["read"] = "many";
  EXPECT_NE(problems().find("is not a number"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, TimeGoingBackOnATrackIsCaught) {
  json& events = trace_["traceEvents"];
  events.push_back(kernel(0, 0));  // an early kernel again at the end
  EXPECT_NE(problems().find("ts goes back"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, WrongCountersAreCaught) {
  const json k = kernel(2, 0);
  find([&](const json& e) {
    return e["ph"] == "C" && e["name"] == "DRAM bytes · level 0" && e["pid"] == k["pid"] &&
           e["ts"] == k["ts"];
  })["args"]["read"] = session_.measurements[2].launches[0].counters->dram_read_bytes + 1;
  EXPECT_NE(problems().find("DRAM bytes · level N\" counter"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, AWrongSpeedupIsCaught) {
  find([](const json& e) {
    return e["ph"] == "X" && e.value("cat", "") == "measurement" && e["args"]["measurement"] == 1;
  })["args"]["speedup_vs_level0"] = 1.0;
  EXPECT_NE(problems().find("args.speedup_vs_level0"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, AKernelOnAnotherThreadIsCaught) {
  kernel(1, 0)["tid"] = kernel(0, 0)["tid"];
  EXPECT_NE(problems().find("not on its measurement's thread"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, AKernelNamedByItsFullNameIsCaught) {
  kernel(0, 0)["name"] = session_.measurements[0].records[0].kernel;
  EXPECT_NE(problems().find("not by its operation"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, TwoRunsInOneProcessAreCaught) {
  // Measurement 2 (gelu_scale 64M) moved into the 1M run's process.
  for (json& e : trace_["traceEvents"]) {
    if (e["ph"] == "X" && e["args"]["measurement"] == 2) e["pid"] = 1;
  }
  EXPECT_NE(problems().find("shares process 1 with another run"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, AnUnnamedLevelThreadIsCaught) {
  find([](const json& e) { return e["ph"] == "M" && e["name"] == "thread_name"; })["args"]["name"] =
      "stream 13";
  EXPECT_NE(problems().find("not 'level"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, ADroppedKernelIsCaught) {
  json& events = trace_["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i]["ph"] == "X" && events[i].value("cat", "") == "kernel" &&
        events[i]["args"]["measurement"] == 2) {
      events.erase(i);
      break;
    }
  }
  EXPECT_NE(problems().find("kernel events for 3 records"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, AKernelMovedWithinItsMeasurementIsCaught) {
  json& k = kernel(2, 2);  // the one on stream 14: moving it breaks no track's order
  k["ts"] = k["ts"].get<double>() - 0.5;
  EXPECT_NE(problems().find("offset in the measurement"), std::string::npos) << problems();
}

TEST(TraceCheck, RejectsWhatIsNotATrace) {
  const Session s = synthetic_session();
  EXPECT_FALSE(check_chrome_trace("{\"traceEvents\": [", s).empty());
  EXPECT_FALSE(check_chrome_trace("{\"hello\": 1}", s).empty());
  // A trace of another session: the numbers are not this session's.
  EXPECT_FALSE(check_chrome_trace(chrome_trace_json(v1_session()), s).empty());
}

// ---- gzip and files ------------------------------------------------------------------------

#if FUSIONLAB_HAVE_ZLIB
// Inflates with zlib directly (not through the code under test).
std::string gunzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[4096];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - z.avail_out);
    if (rc == Z_BUF_ERROR) break;
  }
  inflateEnd(&z);
  EXPECT_EQ(rc, Z_STREAM_END) << "not a complete gzip stream";
  return out;
}

TEST(TraceExport, GzipRoundTrip) {
  TempDir dir;
  const Session s = synthetic_session();
  const std::string plain = chrome_trace_json(s);
  ASSERT_TRUE(trace_gzip_available());
  // By the name...
  ASSERT_TRUE(export_trace(s, dir.file("t.json.gz")).ok());
  const std::string gz = read_file(dir.file("t.json.gz"));
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_LT(gz.size(), plain.size());
  EXPECT_EQ(gunzip(gz), plain);
  // ... or by the option.
  TraceOptions options;
  options.gzip = true;
  ASSERT_TRUE(export_trace(s, dir.file("t2.json"), options).ok());
  EXPECT_EQ(gunzip(read_file(dir.file("t2.json"))), plain);
  // Our own inflate agrees, and refuses a cut-off stream.
  std::string back;
  ASSERT_TRUE(gzip_decompress(gz, &back).ok());
  EXPECT_EQ(back, plain);
  EXPECT_FALSE(gzip_decompress(gz.substr(0, gz.size() / 2), &back).ok());
}
#endif

TEST(TraceExport, PlainFileIsTheTraceAndReplacesAnOldOne) {
  TempDir dir;
  const Session s = synthetic_session();
  { std::ofstream(dir.file("t.json")) << "old contents"; }
  ASSERT_TRUE(export_trace(s, dir.file("t.json")).ok());
  EXPECT_EQ(read_file(dir.file("t.json")), chrome_trace_json(s));
  // Nothing but the output is left behind (the temporary file was renamed).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(TraceExport, AMissingFolderIsAnErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.file("no/such/folder/t.json");
  const Status st = export_trace(synthetic_session(), path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(export_csv(synthetic_session(), path).ok());
}

// ---- CSV -------------------------------------------------------------------------------------

// RFC 4180 rows (quoted fields may hold commas and doubled quotes).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        rows.back().back() += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        rows.back().back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\n') {
      rows.emplace_back(1);
    } else {
      rows.back().back() += c;
    }
  }
  if (rows.back().size() == 1 && rows.back()[0].empty()) rows.pop_back();
  return rows;
}

// `cell` is `value` rounded to `decimals` decimals, written without float noise.
void expect_rounded(const std::string& cell, double value, int decimals, const std::string& what) {
  ASSERT_FALSE(cell.empty()) << what;
  EXPECT_NEAR(std::stod(cell), value, 0.5 * std::pow(10.0, -decimals) + 1e-12 * std::fabs(value))
      << what << " = " << cell;
  const size_t dot = cell.find('.');
  if (dot != std::string::npos) {
    EXPECT_LE(cell.size() - dot - 1, static_cast<size_t>(decimals))
        << what << " has float noise: " << cell;
    EXPECT_NE(cell.back(), '0') << what << " keeps trailing zeros: " << cell;
  }
}

void expect_csv_matches(const Session& s) {
  const std::vector<Measurement>& ms = s.measurements;
  const auto rows = parse_csv(measurements_csv(s));
  ASSERT_FALSE(rows.empty());
  const std::vector<std::string>& header = rows[0];
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  // Units are in the names; the columns added are there.
  for (const char* name : {"launch_time_median_us", "launch_time_p20_us", "chain_time_median_us",
                           "textbook_bytes_read", "dram_read_bytes", "dram_write_bytes", "l2_bytes",
                           "launch_gbps", "copy_gbps", "size_unit", "speedup_vs_level0",
                           "launch_pct_of_copy", "gpu", "driver_cuda", "session_created_utc"}) {
    EXPECT_TRUE(col.count(name)) << "no column " << name;
  }
  size_t launches = 0;
  for (const Measurement& m : ms) launches += m.launches.size();
  ASSERT_EQ(rows.size(), launches + 1);
  size_t r = 1;
  for (size_t i = 0; i < ms.size(); ++i) {
    const Measurement& m = ms[i];
    // The level 0 of this point measured nearest before it (else after it).
    int baseline = -1;
    for (size_t j = 0; j < ms.size(); ++j) {
      const Measurement& o = ms[j];
      if (o.level != 0 || o.lesson != m.lesson || o.size != m.size || o.inner != m.inner ||
          o.precision != m.precision || o.cache != m.cache)
        continue;
      if (j <= i)
        baseline = static_cast<int>(j);
      else if (baseline < 0) {
        baseline = static_cast<int>(j);
        break;
      }
    }
    for (size_t k = 0; k < m.launches.size(); ++k, ++r) {
      const auto& row = rows[r];
      ASSERT_EQ(row.size(), header.size()) << "row " << r;
      const LaunchResult& l = m.launches[k];
      EXPECT_EQ(row[col["lesson"]], m.lesson);
      EXPECT_EQ(std::stoll(row[col["size"]]), m.size);
      EXPECT_EQ(std::stoi(row[col["level"]]), m.level);
      EXPECT_EQ(row[col["level_name"]], m.level_name);
      EXPECT_EQ(std::stoul(row[col["launch"]]), k);
      EXPECT_EQ(row[col["kernel"]], l.textbook.kernel);
      // The session's numbers rounded to what was measured: ns for times, 0.01 GB/s.
      expect_rounded(row[col["launch_time_median_us"]], l.time_us.median, 3,
                     "launch_time_median_us");
      expect_rounded(row[col["launch_time_p80_us"]], l.time_us.p80, 3, "launch_time_p80_us");
      expect_rounded(row[col["chain_time_median_us"]], m.chain_time_us.median, 3,
                     "chain_time_median_us");
      expect_rounded(row[col["copy_gbps"]], l.copy_gbps, 2, "copy_gbps");
      EXPECT_EQ(std::stoll(row[col["textbook_bytes_written"]]), l.textbook.bytes_written);
      EXPECT_EQ(row[col["correct"]], m.check.passed ? "yes" : "no");
      if (l.counters) {
        EXPECT_EQ(std::stoll(row[col["dram_read_bytes"]]), l.counters->dram_read_bytes);
        EXPECT_EQ(std::stoll(row[col["dram_write_bytes"]]), l.counters->dram_write_bytes);
        EXPECT_EQ(std::stoll(row[col["l2_bytes"]]), l.counters->l2_bytes);
      } else {
        EXPECT_EQ(row[col["dram_read_bytes"]], "") << "absent counters stay empty, not 0";
      }
      if (l.time_us.median > 0) {
        const double gbps = l.textbook.bytes() / (l.time_us.median * 1e3);
        expect_rounded(row[col["launch_gbps"]], gbps, 2, "launch_gbps");
        if (l.copy_gbps > 0)
          expect_rounded(row[col["launch_pct_of_copy"]], 100 * gbps / l.copy_gbps, 1,
                         "launch_pct_of_copy");
      }
      const double vs = baseline >= 0 ? speedup(ms[baseline], m) : 0;
      if (vs > 0)
        expect_rounded(row[col["speedup_vs_level0"]], vs, 3, "speedup_vs_level0");
      else
        EXPECT_EQ(row[col["speedup_vs_level0"]], "")
            << "row " << r << ": no level 0 or a failed check";
      EXPECT_EQ(row[col["gpu"]], s.device.name);
      EXPECT_EQ(row[col["session_created_utc"]], s.created_utc);
    }
  }
}

TEST(CsvExport, SyntheticSessionRowsAreTheSessionsNumbers) {
  Session s = synthetic_session();
  s.device.driver_version = 12060;
  expect_csv_matches(s);  // level names hold commas and quotes
  const std::string csv = measurements_csv(s);
  EXPECT_EQ(csv.substr(0, measurements_csv_header().size()), measurements_csv_header());
  const auto rows = parse_csv(csv);
  const size_t driver = static_cast<size_t>(
      std::find(rows[0].begin(), rows[0].end(), "driver_cuda") - rows[0].begin());
  ASSERT_LT(driver, rows[0].size());
  EXPECT_EQ(rows[1][driver], "12.6") << "the CUDA driver version as CUDA writes it";
}

TEST(CsvExport, ShippedRecordingRowsAreTheSessionsNumbers) {
  const std::vector<std::string> files = recording_files();
  if (files.empty()) GTEST_SKIP() << "no source tree at " << kRecording;
  for (const std::string& file : files) {
    Session s;
    ASSERT_TRUE(load_session(file, &s).ok()) << file;
    expect_csv_matches(s);
    // No float noise anywhere: the recording holds e.g. 1.1520000000000001.
    const std::string csv = measurements_csv(s);
    EXPECT_EQ(csv.find("0000000"), std::string::npos) << file;
    EXPECT_EQ(csv.find("9999999"), std::string::npos) << file;
  }
}

TEST(CsvExport, NumbersAreRoundedNotPrintedInFull) {
  Session s = synthetic_session();
  s.measurements.resize(1);
  s.measurements[0].launches[0].time_us.median = 2.7840000000000003;
  s.measurements[0].launches[0].copy_gbps = 4335.486755214232;
  s.measurements[0].check.rel_l2_error = 1.234567e-7;
  const auto rows = parse_csv(measurements_csv(s));
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < rows[0].size(); ++i) col[rows[0][i]] = i;
  EXPECT_EQ(rows[1][col["launch_time_median_us"]], "2.784");
  EXPECT_EQ(rows[1][col["copy_gbps"]], "4335.49");
  EXPECT_EQ(rows[1][col["rel_l2_error"]], "1.23e-07");
}

TEST(CsvExport, CellsASpreadsheetWouldRunAreNeutralised) {
  Session s = synthetic_session();
  s.measurements.resize(1);
  Measurement& m = s.measurements[0];
  m.level_name = "=HYPERLINK(\"http://x\",\"y\")";
  m.launches[0].textbook.kernel = "+cmd|' /C calc'!A0";
  m.launches[1].textbook.kernel = "@SUM(A1:A9)";
  m.timing_method = "-2+3";
  s.device.name = "\tTab GPU";
  const auto rows = parse_csv(measurements_csv(s));
  ASSERT_EQ(rows.size(), 3u);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < rows[0].size(); ++i) col[rows[0][i]] = i;
  EXPECT_EQ(rows[1][col["level_name"]], "'=HYPERLINK(\"http://x\",\"y\")");
  EXPECT_EQ(rows[1][col["kernel"]], "'+cmd|' /C calc'!A0");
  EXPECT_EQ(rows[2][col["kernel"]], "'@SUM(A1:A9)");
  EXPECT_EQ(rows[1][col["timing_method"]], "'-2+3");
  EXPECT_EQ(rows[1][col["gpu"]], "'\tTab GPU");
  // Numbers stay numbers, and plain text stays as it was.
  EXPECT_EQ(rows[1][col["lesson"]], "gelu_scale");
  EXPECT_EQ(rows[1][col["size"]], std::to_string(m.size));
}

TEST(CsvExport, FileIsWrittenWhole) {
  TempDir dir;
  const Session s = synthetic_session();
  ASSERT_TRUE(export_csv(s, dir.file("m.csv")).ok());
  EXPECT_EQ(read_file(dir.file("m.csv")), measurements_csv(s));
  EXPECT_EQ(measurements_csv(Session{}), measurements_csv_header() + "\n");
}

}  // namespace
}  // namespace fl
