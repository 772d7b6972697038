#include "app/measure/session_json.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
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
      "",                                      // empty
      "{not json",                             // malformed
      good.substr(0, good.size() / 2),         // truncated
      "{\"format\": \"something-else\"}",      // not ours
      "[1, 2, 3]",                             // wrong shape
  };
  for (const std::string& text : cases) {
    const Status st = session_from_json(text, &out);
    EXPECT_FALSE(st.ok()) << text.substr(0, 40);
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  }
  std::string wrong_version = good;
  wrong_version.replace(wrong_version.find("\"schema_version\": 1"), 19, "\"schema_version\": 99");
  const Status st = session_from_json(wrong_version, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("99"), std::string::npos);
}

TEST(SessionJson, SaveIsAtomicAndLoadNamesTheFile) {
  const std::string path = ::testing::TempDir() + "/session_test.json";
  ASSERT_TRUE(save_session(sample_session(), path).ok());
  Session loaded;
  ASSERT_TRUE(load_session(path, &loaded).ok());
  EXPECT_EQ(loaded.measurements.size(), 1u);

  std::ofstream(path) << "{\"format\": \"fusionlab-session\", \"schema_version\": 1";
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
