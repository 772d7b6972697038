// The exports (app/measure/export.h): the Chrome trace checked by tests/unit/trace_check.h on
// the shipped recording and on synthetic sessions (v2 with records, v1 without), the checker
// itself against broken traces, gzip, atomic writes, and the CSV.
#include "app/measure/export.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "app/measure/session_json.h"
#include "tests/unit/trace_check.h"

#if FUSIONLAB_HAVE_ZLIB
#include <zlib.h>
#endif

namespace fl {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const fs::path kRecording = fs::path(__FILE__).parent_path().parent_path().parent_path() /
                            "assets" / "recordings" / "h200-2026-11-22";

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
    path_ = fs::temp_directory_path() / ("fusionlab_export_test_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter_++));
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

Stats stats(double median) { return {median, median * 0.95, median * 1.2, median * 0.98, median * 1.03, 100}; }

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
    if (counters && k != 1) l.counters = LaunchCounters{size * 4 + 37 * int64_t(k), size * 4 + 11, size * 9};
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
  s.measurements.push_back(make("gelu_scale", 1 << 26, 0, {310.5, 301.25, 12.0}, t + 500000, true, true));
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
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

size_t record_count(const Session& s) {
  size_t n = 0;
  for (const Measurement& m : s.measurements) n += m.records.size();
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
    // Small: compact JSON of one repetition, under 2 KiB per kernel record all told.
    EXPECT_LT(trace.size(), 2048 * record_count(s)) << file;
    EXPECT_EQ(trace.find('\n'), std::string::npos) << "the trace should be compact, one line";
    biggest = std::max(biggest, trace.size());
    if (all.measurements.empty()) all = s, all.measurements.clear();
    for (const Measurement& m : s.measurements) all.measurements.push_back(m);
  }
  const std::string trace = chrome_trace_json(all);
  EXPECT_TRUE(check_chrome_trace(trace, all).empty()) << join_problems(check_chrome_trace(trace, all));
  std::printf("trace sizes: largest single recording %zu bytes; the whole folder (%zu measurements, "
              "%zu records) %zu bytes\n",
              biggest, all.measurements.size(), record_count(all), trace.size());
}

TEST(TraceExport, SyntheticSessionPassesTheCheck) {
  const Session s = synthetic_session();
  const std::string trace = chrome_trace_json(s);
  const std::vector<std::string> problems = check_chrome_trace(trace, s);
  EXPECT_TRUE(problems.empty()) << join_problems(problems);

  const json events = json::parse(trace).at("traceEvents");
  int kernels = 0, streams = 0;
  std::vector<double> speedups;
  for (const json& e : events) {
    if (e["ph"] == "X" && e.value("cat", "") == "kernel") ++kernels;
    if (e["ph"] == "M" && e["name"] == "thread_name" &&
        e["args"]["name"].get<std::string>().rfind("stream ", 0) == 0) ++streams;
    if (e["ph"] == "C" && e["name"] == "speedup") speedups.push_back(e["args"]["vs_level0"]);
  }
  EXPECT_EQ(kernels, static_cast<int>(record_count(s)));
  EXPECT_EQ(streams, 2);  // streams 13 and 14 each get a track
  // Every measurement but relu_scale's (no level 0) has a speedup; the failed check's is 0 and
  // the second 1M level 1 is taken against the second 1M level 0, not the first.
  ASSERT_EQ(speedups.size(), s.measurements.size() - 1);
  EXPECT_EQ(speedups[3], 0.0);
  EXPECT_DOUBLE_EQ(speedups.back(), speedup(s.measurements[6], s.measurements[7]));
  EXPECT_NE(speedups.back(), speedup(s.measurements[0], s.measurements[7]));
}

TEST(TraceExport, MeasurementsReadLeftToRightWithAVisibleGap) {
  const Session s = synthetic_session();
  const json events = json::parse(chrome_trace_json(s)).at("traceEvents");
  std::vector<std::pair<double, double>> spans;  // ts, end of each measurement slice
  for (const json& e : events) {
    if (e["ph"] == "X" && e.value("cat", "") == "measurement") {
      spans.emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
      EXPECT_NE(e["args"].value("rebased", std::string()), "") << "the rebasing should be said";
    }
  }
  ASSERT_EQ(spans.size(), s.measurements.size());
  EXPECT_EQ(spans.front().first, 0.0);
  for (size_t i = 1; i < spans.size(); ++i) {
    EXPECT_GE(spans[i].first - spans[i - 1].second, 10.0 - 1e-9) << "gap before measurement " << i;
  }
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
      return e["ph"] == "X" && e.value("cat", "") == "kernel" && e["args"]["measurement"] == measurement &&
             e["args"]["record"] == record;
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
  EXPECT_NE(problems().find("missing or malformed fields for phase X"), std::string::npos) << problems();
  SetUp();
  find([](const json& e) { return e["ph"] == "M" && e["name"] == "thread_name"; })["args"].erase("name");
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
  const double ts = kernel(2, 0)["ts"];
  find([&](const json& e) { return e["ph"] == "C" && e["name"] == "DRAM bytes" && e["ts"] == ts; })
      ["args"]["read"] = session_.measurements[2].launches[0].counters->dram_read_bytes + 1;
  EXPECT_NE(problems().find("\"DRAM bytes\" counter"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, AWrongSpeedupIsCaught) {
  find([](const json& e) { return e["ph"] == "C" && e["name"] == "speedup" &&
                                  e["args"]["vs_level0"] != 1.0; })["args"]["vs_level0"] = 1.0;
  EXPECT_NE(problems().find("speedup counter"), std::string::npos) << problems();
}

TEST_F(BrokenTrace, ADroppedKernelIsCaught) {
  json& events = trace_["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i]["ph"] == "X" && events[i].value("cat", "") == "kernel" && events[i]["args"]["measurement"] == 2) {
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
  EXPECT_FALSE(export_csv(synthetic_session().measurements, path).ok());
}

// ---- CSV -------------------------------------------------------------------------------------

// RFC 4180 rows (quoted fields may hold commas and doubled quotes).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') rows.back().back() += '"', ++i;
      else if (c == '"') quoted = false;
      else rows.back().back() += c;
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

void expect_csv_matches(const std::vector<Measurement>& ms) {
  const auto rows = parse_csv(measurements_csv(ms));
  ASSERT_FALSE(rows.empty());
  const std::vector<std::string>& header = rows[0];
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  // Units are in the names.
  for (const char* name : {"launch_time_median_us", "launch_time_p20_us", "chain_time_median_us",
                           "textbook_bytes_read", "dram_read_bytes", "dram_write_bytes", "l2_bytes",
                           "launch_gbps", "copy_gbps", "size_unit"}) {
    EXPECT_TRUE(col.count(name)) << "no column " << name;
  }
  size_t launches = 0;
  for (const Measurement& m : ms) launches += m.launches.size();
  ASSERT_EQ(rows.size(), launches + 1);
  size_t r = 1;
  for (const Measurement& m : ms) {
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
      // Exactly the session's numbers, not rounded.
      EXPECT_EQ(std::stod(row[col["launch_time_median_us"]]), l.time_us.median);
      EXPECT_EQ(std::stod(row[col["launch_time_p80_us"]]), l.time_us.p80);
      EXPECT_EQ(std::stod(row[col["chain_time_median_us"]]), m.chain_time_us.median);
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
        EXPECT_DOUBLE_EQ(std::stod(row[col["launch_gbps"]]), l.textbook.bytes() / (l.time_us.median * 1e3));
      }
    }
  }
}

TEST(CsvExport, SyntheticSessionRowsAreTheSessionsNumbers) {
  const Session s = synthetic_session();
  expect_csv_matches(s.measurements);  // level names hold commas and quotes
  EXPECT_EQ(measurements_csv(s.measurements).substr(0, measurements_csv_header().size()),
            measurements_csv_header());
}

TEST(CsvExport, ShippedRecordingRowsAreTheSessionsNumbers) {
  const std::vector<std::string> files = recording_files();
  if (files.empty()) GTEST_SKIP() << "no source tree at " << kRecording;
  for (const std::string& file : files) {
    Session s;
    ASSERT_TRUE(load_session(file, &s).ok()) << file;
    expect_csv_matches(s.measurements);
  }
}

TEST(CsvExport, FileIsWrittenWhole) {
  TempDir dir;
  const Session s = synthetic_session();
  ASSERT_TRUE(export_csv(s.measurements, dir.file("m.csv")).ok());
  EXPECT_EQ(read_file(dir.file("m.csv")), measurements_csv(s.measurements));
  EXPECT_EQ(measurements_csv({}), measurements_csv_header() + "\n");
}

}  // namespace
}  // namespace fl
