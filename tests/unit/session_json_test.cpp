#include "model/session_json.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace fl {
namespace {

Session sample_session() {
  Session s;
  s.app_version = "0.1.0";
  s.created_utc = "2026-11-21T12:00:00Z";
  s.backend = "live";
  s.device.usable = true;
  s.device.name = "NVIDIA H100 80GB HBM3";
  s.device.cc_major = 9;
  s.device.sm_count = 132;
  s.device.l2_bytes = 50 << 20;
  s.device.memory_bytes = int64_t(80) << 30;
  s.device.driver_version = 13000;
  s.device.runtime_version = 13000;
  s.device.roof_gbps = 3012.5;
  Measurement m;
  m.lesson = "gelu_scale";
  m.size = 16 << 20;
  m.level = 1;
  m.level_name = "fused";
  m.precision = Precision::bf16;
  m.cache = CacheMode::warm;
  m.timing_method = "cuda_events";
  m.repetitions = 77;
  m.chain_time_us = {45.5, 44.0, 60.25, 45.0, 46.0, 77};
  m.chain_copy_gbps = 2900;
  m.check = {3.5e-8, 1e-6, 0, 1e-5, true};
  LaunchResult l;
  l.textbook = {"gelu_scale_fused", 64 << 20, 64 << 20, 1.5e8};
  l.time_us = m.chain_time_us;
  l.copy_gbps = 2950;
  m.launches.push_back(l);
  s.measurements.push_back(m);
  return s;
}

// A schema-2 session: CUPTI timing, counters on one launch, raw records, copy bandwidths.
Session sample_session_v2() {
  Session s = sample_session();
  s.device.copy_bandwidth = {{1 << 20, CacheMode::cold, 1200.5},
                             {int64_t(1) << 31, CacheMode::warm, 3100}};
  Measurement& m = s.measurements[0];
  m.timing_method = "cupti_activity";
  m.counters_status = CountersStatus::measured;
  m.launches[0].counters = LaunchCounters{67100000, 67200000, 134300000};
  LaunchResult unmeasured = m.launches[0];
  unmeasured.textbook.kernel = "second";
  unmeasured.counters.reset();  // absent must stay absent, not become zeros
  m.launches.push_back(unmeasured);
  KernelRecord r;
  r.launch = 1;
  r.kernel = "gelu_scale_kernel<__nv_bfloat16>";
  r.start_ns = 1763760000123456789ull;  // CUPTI timestamps exceed 2^53: must survive exactly
  r.end_ns = r.start_ns + 45500;
  r.start_rel_ns = 0;
  r.end_rel_ns = 45500;
  r.stream_id = 13;
  r.correlation_id = 4242;
  r.grid = {{8192, 1, 1}};
  r.block = {{256, 1, 1}};
  r.registers_per_thread = 18;
  r.static_shared_bytes = 0;
  r.dynamic_shared_bytes = 1024;
  m.records.push_back(r);
  Measurement denied = m;
  denied.level = 0;
  denied.counters_status = CountersStatus::unavailable;
  denied.counters_note = "GPU performance counters are restricted to administrators.";
  for (auto& l : denied.launches) l.counters.reset();
  denied.records.clear();
  s.measurements.push_back(denied);
  return s;
}

TEST(SessionJson, RoundTripKeepsEveryField) {
  const Session in = sample_session();
  Session out;
  ASSERT_TRUE(session_from_json(session_to_json(in), &out).ok());
  EXPECT_EQ(out.device.name, in.device.name);
  EXPECT_EQ(out.device.cc_major, 9);
  EXPECT_DOUBLE_EQ(out.device.roof_gbps, 3012.5);
  ASSERT_EQ(out.measurements.size(), 1u);
  const Measurement& m = out.measurements[0];
  EXPECT_EQ(m.precision, Precision::bf16);
  EXPECT_EQ(m.cache, CacheMode::warm);
  EXPECT_EQ(m.repetitions, 77);
  EXPECT_DOUBLE_EQ(m.chain_time_us.max, 60.25);
  EXPECT_EQ(m.launches[0].textbook.bytes_read, 64 << 20);
  EXPECT_TRUE(m.check.passed);
  // Serialising again gives the same text: nothing is lost or reinterpreted.
  EXPECT_EQ(session_to_json(out), session_to_json(in));
}

TEST(SessionJson, RefusesBadInputWithOneLine) {
  Session out;
  const std::string good = session_to_json(sample_session());
  const std::string cases[] = {
      "",                                  // empty
      "{not json",                         // malformed
      good.substr(0, good.size() / 2),     // truncated
      "{\"format\": \"something-else\"}",  // not ours
      "[1, 2, 3]",                         // wrong shape
  };
  for (const std::string& text : cases) {
    const Status st = session_from_json(text, &out);
    EXPECT_FALSE(st.ok()) << text.substr(0, 40);
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  }
  for (int version : {0, Session::kSchemaVersion + 1, 99}) {
    nlohmann::json j = nlohmann::json::parse(good);
    j["schema_version"] = version;
    const Status st = session_from_json(j.dump(), &out);
    ASSERT_FALSE(st.ok()) << version;
    EXPECT_NE(st.message().find(std::to_string(version)), std::string::npos) << st.message();
  }
}

TEST(SessionJson, WritesTheCurrentSchemaVersion) {
  const nlohmann::json j = nlohmann::json::parse(session_to_json(sample_session()));
  EXPECT_EQ(j.at("schema_version").get<int>(), Session::kSchemaVersion);
  EXPECT_EQ(j.at("measurements")[0].at("launches")[0].at("variant").get<std::string>(), "");
  EXPECT_TRUE(j.at("measurements")[0].at("launches")[0].at("counters").is_null());
  EXPECT_EQ(j.at("measurements")[0].at("counters_status").get<std::string>(), "not_measured");
}

// Version 3 names each launch's kernel variant; a version-2 recording of a level with variants
// still says which ran, from its kernel records' CUPTI names.
TEST(SessionJson, VariantsRoundTripAndOlderRecordingsNameThemFromTheirRecords) {
  Session in = sample_session();
  Measurement m = in.measurements.at(0);
  m.lesson = "ffn";
  m.size = 16;
  m.inner = 768;
  m.level = 2;
  m.level_name = "fused";
  m.precision = Precision::bf16;
  m.launches.resize(1);
  m.launches[0].textbook.kernel = "ffn_fused";
  m.launches[0].variant = "ffn_small";
  KernelRecord r;
  r.launch = 0;
  r.kernel = "ffn_small_kernel<16>";
  r.start_ns = 1000;
  r.end_ns = 9000;
  r.end_rel_ns = 8000;
  m.records = {r};
  in.measurements = {m};
  Session out;
  ASSERT_TRUE(session_from_json(session_to_json(in), &out).ok());
  ASSERT_EQ(out.measurements.size(), 1u);
  EXPECT_EQ(out.measurements[0].launches.at(0).variant, "ffn_small");

  nlohmann::json j = nlohmann::json::parse(session_to_json(in));
  j["schema_version"] = 2;
  j["measurements"][0]["launches"][0].erase("variant");
  ASSERT_TRUE(session_from_json(j.dump(), &out).ok());
  EXPECT_EQ(out.measurements[0].launches.at(0).variant, "ffn_small");
  j["measurements"][0]["records"][0]["kernel"] = "some_other_kernel<16>";
  ASSERT_TRUE(session_from_json(j.dump(), &out).ok());
  EXPECT_EQ(out.measurements[0].launches.at(0).variant, "");
}

// Peak device memory is kept where known, written only then, and an older recording without it
// still opens (0: not known); a negative or absurd count is refused with one line.
TEST(SessionJson, PeakDeviceMemoryRoundTripsAndOlderRecordingsOpenWithout) {
  Session in = sample_session();
  in.measurements.at(0).peak_device_bytes = 3279945728;  // attention level 0 at T = 4K, bf16
  Session out;
  ASSERT_TRUE(session_from_json(session_to_json(in), &out).ok());
  EXPECT_EQ(out.measurements.at(0).peak_device_bytes, 3279945728);

  nlohmann::json j = nlohmann::json::parse(session_to_json(in));
  ASSERT_TRUE(j["measurements"][0].contains("peak_device_bytes"));
  j["measurements"][0].erase("peak_device_bytes");
  j["schema_version"] = 2;
  ASSERT_TRUE(session_from_json(j.dump(), &out).ok());
  EXPECT_EQ(out.measurements.at(0).peak_device_bytes, 0);
  EXPECT_FALSE(
      nlohmann::json::parse(session_to_json(out))["measurements"][0].contains("peak_device_bytes"))
      << "not known: not written";

  j["measurements"][0]["peak_device_bytes"] = -5;
  const Status bad = session_from_json(j.dump(), &out);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("peak_device_bytes"), std::string::npos) << bad.message();
  EXPECT_EQ(bad.message().find('\n'), std::string::npos);
}

TEST(SessionJson, RoundTripKeepsCountersRecordsAndCopyBandwidth) {
  const Session in = sample_session_v2();
  Session out;
  const Status st = session_from_json(session_to_json(in), &out);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(out.device.copy_bandwidth.size(), 2u);
  EXPECT_EQ(out.device.copy_bandwidth[1].bytes, int64_t(1) << 31);
  EXPECT_EQ(out.device.copy_bandwidth[1].cache, CacheMode::warm);
  EXPECT_DOUBLE_EQ(out.device.copy_bandwidth[0].gbps, 1200.5);
  ASSERT_EQ(out.measurements.size(), 2u);
  const Measurement& m = out.measurements[0];
  EXPECT_EQ(m.timing_method, "cupti_activity");
  EXPECT_EQ(m.counters_status, CountersStatus::measured);
  ASSERT_EQ(m.launches.size(), 2u);
  ASSERT_TRUE(m.launches[0].counters.has_value());
  EXPECT_EQ(m.launches[0].counters->dram_read_bytes, 67100000);
  EXPECT_EQ(m.launches[0].counters->dram_write_bytes, 67200000);
  EXPECT_EQ(m.launches[0].counters->l2_bytes, 134300000);
  EXPECT_FALSE(m.launches[1].counters.has_value());
  EXPECT_FALSE(m.counters_total().has_value()) << "a total needs every launch's counters";
  ASSERT_EQ(m.records.size(), 1u);
  const KernelRecord& r = m.records[0];
  EXPECT_EQ(r.launch, 1);
  EXPECT_EQ(r.kernel, "gelu_scale_kernel<__nv_bfloat16>");
  EXPECT_EQ(r.start_ns, 1763760000123456789ull);
  EXPECT_EQ(r.end_rel_ns, 45500);
  EXPECT_EQ(r.stream_id, 13u);
  EXPECT_EQ(r.correlation_id, 4242u);
  EXPECT_EQ(r.grid[0], 8192);
  EXPECT_EQ(r.block[0], 256);
  EXPECT_EQ(r.registers_per_thread, 18);
  EXPECT_EQ(r.dynamic_shared_bytes, 1024);
  const Measurement& denied = out.measurements[1];
  EXPECT_EQ(denied.counters_status, CountersStatus::unavailable);
  EXPECT_EQ(denied.counters_note, "GPU performance counters are restricted to administrators.");
  EXPECT_EQ(session_to_json(out), session_to_json(in));
}

TEST(SessionJson, ANoteWithLineBreaksLoadsOnOneLine) {
  // A counters note quotes CUPTI or CUDA messages, which may hold a line break: a recording the
  // app saved must load, with the note on one line (names with control characters are refused).
  Session in = sample_session_v2();
  in.measurements[1].counters_note = "The counter phase failed:\nCUPTI_ERROR_UNKNOWN\t(999)";
  Session out;
  const Status st = session_from_json(session_to_json(in), &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out.measurements[1].counters_note,
            "The counter phase failed: CUPTI_ERROR_UNKNOWN (999)");
  in.device.name = "NVIDIA\nH200";
  const Status refused = session_from_json(session_to_json(in), &out);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.message().find('\n'), std::string::npos) << refused.message();
}

TEST(SessionJson, ReadsVersion1WithoutCounters) {
  // A version-1 file as `bench --out` wrote it before the counter phase: no copy_bandwidth,
  // counters, counters_status or records.
  nlohmann::json j = nlohmann::json::parse(session_to_json(sample_session()));
  j["schema_version"] = 1;
  j["device"].erase("copy_bandwidth");
  for (auto& m : j["measurements"]) {
    m.erase("counters_status");
    m.erase("counters_note");
    m.erase("records");
    for (auto& l : m["launches"]) l.erase("counters");
  }
  Session out;
  const Status st = session_from_json(j.dump(), &out);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(out.measurements.size(), 1u);
  EXPECT_EQ(out.measurements[0].counters_status, CountersStatus::not_measured);
  EXPECT_FALSE(out.measurements[0].launches[0].counters.has_value());
  EXPECT_TRUE(out.measurements[0].records.empty());
  EXPECT_TRUE(out.device.copy_bandwidth.empty());
  EXPECT_DOUBLE_EQ(out.measurements[0].chain_time_us.median, 45.5);
  // Saved again, it becomes a version-2 file with the same measurements.
  Session again;
  ASSERT_TRUE(session_from_json(session_to_json(out), &again).ok());
  EXPECT_EQ(again.measurements[0].repetitions, 77);
}

TEST(SessionJson, Version2RefusesMissingOrBadCounterFields) {
  const std::string good = session_to_json(sample_session_v2());
  Session out;
  auto refused = [&](const std::function<void(nlohmann::json&)>& spoil) {
    nlohmann::json j = nlohmann::json::parse(good);
    spoil(j);
    const Status st = session_from_json(j.dump(), &out);
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
    return !st.ok();
  };
  EXPECT_TRUE(refused([](nlohmann::json& j) { j["measurements"][0].erase("records"); }));
  EXPECT_TRUE(refused([](nlohmann::json& j) { j["measurements"][0].erase("counters_status"); }));
  EXPECT_TRUE(
      refused([](nlohmann::json& j) { j["measurements"][0]["counters_status"] = "maybe"; }));
  EXPECT_TRUE(
      refused([](nlohmann::json& j) { j["measurements"][0]["launches"][0].erase("counters"); }));
  EXPECT_TRUE(refused([](nlohmann::json& j) { j["measurements"][0]["records"][0]["launch"] = 7; }));
  EXPECT_TRUE(refused([](nlohmann::json& j) { j["measurements"][0]["records"][0]["grid"] = {1}; }));
  EXPECT_TRUE(refused([](nlohmann::json& j) { j["device"].erase("copy_bandwidth"); }));
  EXPECT_FALSE(refused([](nlohmann::json&) {}));
}

TEST(SessionJson, SaveIsAtomicAndLoadNamesTheFile) {
  const std::string path = ::testing::TempDir() + "/session_test.json";
  ASSERT_TRUE(save_session(sample_session(), path).ok());
  Session loaded;
  ASSERT_TRUE(load_session(path, &loaded).ok());
  EXPECT_EQ(loaded.measurements.size(), 1u);

  std::ofstream(path) << "{\"format\": \"fusionlab-session\", \"schema_version\": 2";
  const Status st = load_session(path, &loaded);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind(path, 0), 0u) << st.message();  // starts with the file name
  EXPECT_FALSE(load_session(path + ".missing", &loaded).ok());
  std::remove(path.c_str());
}

TEST(SessionJson, FailedWriteLeavesExistingFileIntact) {
  const std::string dir = ::testing::TempDir() + "/no-such-dir-fl/";
  EXPECT_FALSE(write_file_atomically(dir + "x.json", "{}").ok());
}

}  // namespace
}  // namespace fl
