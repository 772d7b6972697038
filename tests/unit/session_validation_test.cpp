// The session loader's field validation ("Recordings mean what they say";
// docs/SESSION_FORMAT.md, "What the reader refuses"): every field of a recording is checked
// against the schema and the lesson catalog before anything else sees it, and a refusal is one
// line naming the field by its JSON path and the rule it breaks, never the JSON library's words.
// One test per rule; each asserts the whole message.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "model/caps.h"
#include "model/peers.h"
#include "model/session_json.h"

namespace fl {
namespace {

using nlohmann::json;

json stats(double median, int count) {
  return {{"median", median},     {"min", median * 0.5}, {"max", median * 2},
          {"p20", median * 0.75}, {"p80", median * 1.5}, {"count", count}};
}

// One measurement as `bench --out` writes it: one launch, its counters and its record.
json measurement(const std::string& lesson, int64_t size, int64_t inner, int level) {
  return {{"lesson", lesson},
          {"size", size},
          {"inner", inner},
          {"level", level},
          {"level_name", level == 0 ? "unfused" : "fused"},
          {"precision", "fp32"},
          {"cache", "cold"},
          {"timing_method", "cupti_activity"},
          {"repetitions", 100},
          {"chain_time_us", stats(12.5, 100)},
          {"chain_copy_gbps", 1400.5},
          {"check",
           {{"rel_l2_error", 3.5e-8},
            {"max_abs_error", 4.75e-7},
            {"non_finite", 0},
            {"tolerance", 1e-5},
            {"passed", true}}},
          {"launches",
           {{{"kernel", "op"},
             {"textbook_bytes_read", 4 * size},
             {"textbook_bytes_written", 4 * size},
             {"textbook_flops", 8.0 * size},
             {"time_us", stats(12.5, 100)},
             {"copy_gbps", 1500.25},
             {"counters",
              {{"dram_read_bytes", 4 * size},
               {"dram_write_bytes", 4 * size},
               {"l2_bytes", 12 * size}}}}}},
          {"counters_status", "measured"},
          {"counters_note", ""},
          {"records",
           {{{"launch", 0},
             {"kernel", "op_kernel<float>"},
             {"start_ns", 1763769940123456789ull},
             {"end_ns", 1763769940123469289ull},
             {"start_rel_ns", 0},
             {"end_rel_ns", 12500},
             {"stream", 13},
             {"correlation", 11481},
             {"grid", {4096, 1, 1}},
             {"block", {256, 1, 1}},
             {"registers_per_thread", 19},
             {"static_shared_bytes", 0},
             {"dynamic_shared_bytes", 0}}}}};
}

// gelu_scale at 1M (levels 0 and 1), residual_layernorm at 4096 rows of 768, ffn at 512 tokens.
json good_session() {
  return {{"format", "fusionlab-session"},
          {"schema_version", 2},
          {"app_version", "0.1.0"},
          {"created_utc", "2026-11-23T10:00:00Z"},
          {"backend", "live"},
          {"device",
           {{"name", "NVIDIA H100 80GB HBM3"},
            {"compute_capability", "9.0"},
            {"sm_count", 132},
            {"l2_bytes", 52428800},
            {"memory_bytes", 85030617088},
            {"driver_version", 13000},
            {"runtime_version", 13000},
            {"roof_gbps", 3042.5},
            {"copy_bandwidth", {{{"bytes", 1073741824}, {"cache", "cold"}, {"gbps", 3042.5}}}}}},
          {"measurements",
           {measurement("gelu_scale", 1 << 20, 0, 0), measurement("gelu_scale", 1 << 20, 0, 1),
            measurement("residual_layernorm", 4096, 768, 2), measurement("ffn", 512, 768, 1)}}};
}

// The message that refuses good_session() after `edit`; "" when it loads.
std::string refusal(const std::function<void(json&)>& edit) {
  json j = good_session();
  edit(j);
  Session s;
  const Status st = session_from_json(j.dump(2), &s);
  return st.ok() ? "" : st.message();
}
std::string refusal_of_text(const std::string& text) {
  Session s;
  const Status st = session_from_json(text, &s);
  return st.ok() ? "" : st.message();
}

TEST(SessionValidation, TheGoodSessionLoads) {
  EXPECT_EQ(refusal([](json&) {}), "");
}

TEST(SessionValidation, SizeOfZeroNegativeOrPastTheLessonsLargest) {
  const std::string rule =
      "measurements[1].size: must be between 1 and 268435456 (the largest size of lesson "
      "'gelu_scale', in elements), not ";
  EXPECT_EQ(refusal([](json& j) { j["measurements"][1]["size"] = 0; }), rule + "0");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][1]["size"] = -4096; }), rule + "-4096");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][1]["size"] = 268435457; }), rule + "268435457");
  // Rows: the lesson's own axis and unit.
  EXPECT_EQ(refusal([](json& j) { j["measurements"][2]["size"] = 349526; }),
            "measurements[2].size: must be between 1 and 349525 (the largest size of lesson "
            "'residual_layernorm', in rows), not 349526");
}

TEST(SessionValidation, NumbersTooLargeForTheirType) {
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["size"] = 1e30; }),
            "measurements[0].size: 1e+30 is too large for a 64-bit size");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["chain_time_us"]["count"] = 4294967296; }),
            "measurements[0].chain_time_us.count: 4294967296 is too large for a 32-bit count");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["level"] = int64_t(1) << 31; }),
            "measurements[0].level: 2147483648 is too large for a 32-bit level");
  EXPECT_EQ(refusal([](json& j) {
              j["measurements"][0]["records"][0]["end_ns"] = 18446744073709551616.0;
            }),
            "measurements[0].records[0].end_ns: 1.8446744073709552e+19 is too large for a 64-bit "
            "timestamp");
  EXPECT_EQ(refusal([](json& j) { j["schema_version"] = int64_t(4294967298); }),
            "schema_version: 4294967298 is too large for a 32-bit version");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["repetitions"] = 2.5; }),
            "measurements[0].repetitions: must be a whole number, not 2.5");
}

TEST(SessionValidation, LevelsOutsideTheLesson) {
  EXPECT_EQ(refusal([](json& j) { j["measurements"][3]["level"] = 7; }),
            "measurements[3].level: level 7 is outside lesson 'ffn' (levels 0-2)");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][1]["level"] = 2; }),
            "measurements[1].level: level 2 is outside lesson 'gelu_scale' (levels 0-1)");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][1]["level"] = -1; }),
            "measurements[1].level: must be 0 or more, not -1");
}

TEST(SessionValidation, RowLengthsAgainstTheLesson) {
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["inner"] = 768; }),
            "measurements[0].inner: must be 0 (lesson 'gelu_scale' has no row length), not 768");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][2]["inner"] = 0; }),
            "measurements[2].inner: must be between 1 and 16384 (the largest hidden size C of "
            "lesson 'residual_layernorm'), not 0");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][3]["inner"] = 4096; }),
            "measurements[3].inner: must be between 1 and 2048 (the largest hidden size C of "
            "lesson 'ffn'), not 4096");
}

// A lesson this build does not know is kept when it is named like a lesson (a newer build's
// recording: replay serves the lessons it knows), within bounds that stand in for its catalog
// entry; anything else is an unknown lesson.
TEST(SessionValidation, UnknownLessons) {
  EXPECT_EQ(refusal([](json& j) { j["measurements"][2]["lesson"] = "attention_next_year"; }), "");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][2]["lesson"] = "Foo Bar"; }),
            "measurements[2].lesson: unknown lesson 'Foo Bar', and not a lesson id a newer build "
            "could know (lowercase letters, digits and _, at most 64)");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][2]["lesson"] = std::string(65, 'a'); }),
            "measurements[2].lesson: unknown lesson 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...', "
            "and not a lesson id a newer build could know (lowercase letters, digits and _, at "
            "most 64)");
  EXPECT_EQ(refusal([](json& j) {
              j["measurements"][2]["lesson"] = "attention_next_year";
              j["measurements"][2]["level"] = 64;
            }),
            "measurements[2].level: must be between 0 and 63 (lesson 'attention_next_year' is not "
            "in this build's catalog), not 64");
  EXPECT_EQ(refusal([](json& j) {
              j["measurements"][2]["lesson"] = "attention_next_year";
              j["measurements"][2]["size"] = (int64_t(1) << 40) + 1;
            }),
            "measurements[2].size: must be between 1 and 1099511627776 (2^40: lesson "
            "'attention_next_year' is not in this build's catalog), not 1099511627777");
}

TEST(SessionValidation, NegativeCountsAndRepetitions) {
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["repetitions"] = -1; }),
            "measurements[0].repetitions: must be 0 or more, not -1");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["chain_time_us"]["count"] = -3; }),
            "measurements[0].chain_time_us.count: must be 0 or more, not -3");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["launches"][0]["time_us"]["count"] = -3; }),
            "measurements[0].launches[0].time_us.count: must be 0 or more, not -3");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["check"]["non_finite"] = -2; }),
            "measurements[0].check.non_finite: must be 0 or more, not -2");
  EXPECT_EQ(
      refusal([](json& j) { j["measurements"][0]["records"][0]["registers_per_thread"] = -1; }),
      "measurements[0].records[0].registers_per_thread: must be 0 or more, not -1");
}

TEST(SessionValidation, NegativeOrImpossibleDeviceFacts) {
  EXPECT_EQ(refusal([](json& j) { j["device"]["sm_count"] = -132; }),
            "device.sm_count: must be 0 or more, not -132");
  EXPECT_EQ(refusal([](json& j) { j["device"]["l2_bytes"] = -1; }),
            "device.l2_bytes: must be 0 or more, not -1");
  EXPECT_EQ(refusal([](json& j) { j["device"]["memory_bytes"] = -1; }),
            "device.memory_bytes: must be 0 or more, not -1");
  EXPECT_EQ(refusal([](json& j) { j["device"]["driver_version"] = -13000; }),
            "device.driver_version: must be 0 or more, not -13000");
  EXPECT_EQ(refusal([](json& j) { j["device"]["roof_gbps"] = -5; }),
            "device.roof_gbps: must be a bandwidth from 0 to 1000000 GB/s, not -5");
  EXPECT_EQ(refusal([](json& j) { j["device"]["compute_capability"] = "-1.-1"; }),
            "device.compute_capability: must be MAJOR.MINOR like \"9.0\", not '-1.-1'");
  EXPECT_EQ(refusal([](json& j) { j["device"]["copy_bandwidth"][0]["bytes"] = -1; }),
            "device.copy_bandwidth[0].bytes: must be between 0 and 1099511627776 (1 TiB), not -1");
}

TEST(SessionValidation, CopyReferencesAreCapped) {
  // The live engine keeps at most kMaxCopyReferences (model/caps.h); a file with more is
  // refused before it grows the loader's memory further.
  EXPECT_EQ(refusal([](json& j) {
              json& copies = j["device"]["copy_bandwidth"];
              const json one = copies[0];
              for (size_t i = copies.size(); i <= kMaxCopyReferences; ++i) copies.push_back(one);
            }),
            "device.copy_bandwidth: more than 2048 entries (the live engine keeps at most that "
            "many)");
}

TEST(SessionValidation, RepeatedMeasurements) {
  EXPECT_EQ(refusal([](json& j) { j["measurements"].push_back(j["measurements"][1]); }),
            "measurements[4]: repeats measurements[1] (same lesson, size, row length, level, "
            "precision and cache)");
  // Another cache mode, row length or precision is another point.
  EXPECT_EQ(refusal([](json& j) {
              json warm = j["measurements"][1];
              warm["cache"] = "warm";
              j["measurements"].push_back(warm);
              json wider = j["measurements"][2];
              wider["inner"] = 1024;
              j["measurements"].push_back(wider);
            }),
            "");
}

TEST(SessionValidation, MissingRepeatedAndMistypedFields) {
  EXPECT_EQ(refusal([](json& j) { j["measurements"][2].erase("size"); }),
            "measurements[2].size is missing");
  EXPECT_EQ(refusal([](json& j) { j["device"].erase("sm_count"); }), "device.sm_count is missing");
  EXPECT_EQ(refusal([](json& j) { j.erase("measurements"); }), "measurements is missing");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["size"] = "1M"; }),
            "measurements[0].size: must be a whole number, not a string");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["size"] = json::object(); }),
            "measurements[0].size: must be a whole number, not an object");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["lesson"] = json::array(); }),
            "measurements[0].lesson: must be a string, not an array");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["launches"] = json::object(); }),
            "measurements[0].launches: must be an array, not an object");
  EXPECT_EQ(refusal([](json& j) { j["measurements"] = nullptr; }),
            "measurements: must be an array, not null");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][1] = 5; }),
            "measurements[1]: must be an object, not a number");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["precision"] = "fp16"; }),
            "measurements[0].precision: must be fp32 or bf16, not 'fp16'");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["check"]["passed"] = 1; }),
            "measurements[0].check.passed: must be true or false, not 1");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["lesson"] = "gelu\nscale"; }),
            "measurements[0].lesson: holds a control character: 'gelu?scale'");
  // A key twice in one object (nlohmann's tree would keep the last one silently).
  std::string text = good_session().dump(2);
  const std::string size = "\"size\": 1048576,";
  text.replace(text.find(size), size.size(), size + " \"size\": 2048,");
  EXPECT_EQ(refusal_of_text(text), "measurements[0].size: appears twice in one object");
  std::string twice = good_session().dump();
  twice.insert(twice.size() - 1, ", \"device\": 7");  // after the good one
  EXPECT_EQ(refusal_of_text(twice), "device: appears twice in one object");
  // Keys this build does not read are skipped, whatever they hold.
  EXPECT_EQ(refusal([](json& j) {
              j["measurements"][0]["future_field"] = {{"deep", {1, 2}}};
            }),
            "");
}

TEST(SessionValidation, TimesBytesAndRecords) {
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["launches"][0]["time_us"]["median"] = -1; }),
            "measurements[0].launches[0].time_us.median: must be a time from 0 to 3600000000 us "
            "(an hour), not -1");
  EXPECT_EQ(refusal([](json& j) {
              j["measurements"][0]["launches"][0]["textbook_bytes_read"] = (int64_t(1) << 40) + 1;
            }),
            "measurements[0].launches[0].textbook_bytes_read: must be between 0 and "
            "1099511627776 (1 TiB), not 1099511627777");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["records"][0]["launch"] = 7; }),
            "measurements[0].records[0].launch: names launch 7, but the measurement has 1 launch");
  EXPECT_EQ(refusal([](json& j) {
              j["measurements"][0]["records"][0]["grid"] = {1, 2};
            }),
            "measurements[0].records[0].grid: must hold 3 whole numbers, not 2");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["records"][0]["stream"] = 1073741825; }),
            "measurements[0].records[0].stream: must be between 0 and 1073741824 (2^30), not "
            "1073741825");
  EXPECT_EQ(refusal([](json& j) { j["measurements"][0]["records"][0]["end_ns"] = 5; }),
            "measurements[0].records[0]: ends before it starts (end_ns 5 < start_ns "
            "1763769940123456789)");
}

// Which refusal wins: not JSON, then not a session, then the version, then the first field in
// the file that breaks a rule. The JSON library's own words never show.
TEST(SessionValidation, OrderOfRefusalsAndNoLibraryWords) {
  const std::string not_json = refusal_of_text("{\"format\": \"fusionlab-session\", oops}");
  EXPECT_EQ(not_json, "not valid JSON at byte 33 (truncated or corrupted?)");  // the 'o'
  EXPECT_EQ(refusal_of_text("[1, 2, 3]"),
            "not a Fusion Lab session (no \"format\": \"fusionlab-session\")");
  EXPECT_EQ(refusal([](json& j) {
              j["schema_version"] = 99;
              j["measurements"][0]["size"] = 0;
            }),
            "schema version 99 is not supported (this build reads versions 1 to 3)");
  EXPECT_EQ(refusal([](json& j) { j.erase("schema_version"); }), "schema_version is missing");
  EXPECT_EQ(refusal([](json& j) {
              j["measurements"][3]["level"] = 9;
              j["measurements"][0]["size"] = 0;
            }),
            "measurements[0].size: must be between 1 and 268435456 (the largest size of lesson "
            "'gelu_scale', in elements), not 0");
  // A version-2 field that is missing counts where it is, before or after another refusal.
  EXPECT_EQ(refusal([](json& j) {
              j["measurements"][0].erase("records");
              j["measurements"][3]["level"] = 9;
            }),
            "measurements[0].records is missing");
  for (const std::string& message :
       {not_json, refusal([](json& j) { j["device"] = "H100"; }),
        refusal([](json& j) { j["measurements"][0]["check"] = json::array(); })}) {
    EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
    EXPECT_EQ(message.find("type must be"), std::string::npos) << message;
  }
}

// A version-1 file predates counters and records: missing they are fine, and present they are
// dropped.
TEST(SessionValidation, Version1IgnoresVersion2Fields) {
  json j = good_session();
  j["schema_version"] = 1;
  j["measurements"][0].erase("records");
  j["measurements"][0].erase("counters_status");
  Session s;
  const Status st = session_from_json(j.dump(), &s);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(s.device.copy_bandwidth.empty());
  EXPECT_TRUE(s.measurements[1].records.empty());
  EXPECT_FALSE(s.measurements[1].launches[0].counters.has_value());
  EXPECT_EQ(s.measurements[1].counters_status, CountersStatus::not_measured);
}

// The writer builds the text one measurement at a time: it must be exactly what nlohmann writes
// for the whole document, at every indent.
TEST(SessionValidation, StreamedWriterMatchesNlohmann) {
  Session s;
  ASSERT_TRUE(session_from_json(good_session().dump(), &s).ok());
  for (int indent : {-1, 0, 1, 2, 4}) {
    const std::string text = session_to_json(s, indent);
    EXPECT_EQ(text, json::parse(text).dump(indent) + "\n") << "indent " << indent;
  }
  s.measurements.clear();
  EXPECT_EQ(json::parse(session_to_json(s)).at("measurements"), json::array());
}

// A session the loader would refuse is never written.
TEST(SessionValidation, SaveRefusesWhatLoadWouldRefuse) {
  Session s;
  ASSERT_TRUE(session_from_json(good_session().dump(), &s).ok());
  s.measurements.push_back(s.measurements[0]);  // bench --sizes 1M,1M
  const std::string path = ::testing::TempDir() + "/fl_repeat_test.json";
  std::remove(path.c_str());
  const Status st = save_session(s, path);
  EXPECT_EQ(st.message(), path +
                              ": not saved, it would not load: measurements[4]: repeats "
                              "measurements[0] (same lesson, size, row length, level, precision "
                              "and cache)");
  EXPECT_FALSE(std::ifstream(path).good()) << "nothing was written";
  s.measurements.pop_back();
  EXPECT_TRUE(save_session(s, path).ok());
  std::remove(path.c_str());
}

// The peer file's reader applies the same catalog rules to its series and points.
TEST(PeerValidation, CatalogRulesAndRepeats) {
  const auto point = [](int64_t size, int64_t inner) {
    return json{{"size", size},  {"inner", inner}, {"median_us", 4.0},     {"p20_us", 3.9},
                {"p80_us", 4.1}, {"count", 30},    {"rel_l2_error", 1e-7}, {"passed", true}};
  };
  const auto series = [](const std::string& lesson, const std::string& peer, json points) {
    return json{{"lesson", lesson},
                {"precision", "fp32"},
                {"peer", peer},
                {"label", peer},
                {"points", std::move(points)}};
  };
  const auto refused = [](const json& all_series) {
    const json file = {{"format", "fusionlab-peers"},
                       {"schema_version", 1},
                       {"created_utc", "2026-11-23T07:55:00Z"},
                       {"device",
                        {{"name", "NVIDIA H100 80GB HBM3"},
                         {"compute_capability", "9.0"},
                         {"driver", "580.159.04"},
                         {"copy_gbps", 3042.4}}},
                       {"software", {{"torch", "2.11.0"}, {"triton", "3.6.0"}, {"cuda", "13.0"}}},
                       {"timing", "cupti_activity"},
                       {"series", all_series}};
    PeerFile f;
    const Status st = peers_from_json(file.dump(), &f);
    return st.ok() ? std::string() : st.message();
  };
  EXPECT_EQ(refused(json::array({series("gelu_scale", "eager", json::array({point(1 << 20, 0)}))})),
            "");
  EXPECT_EQ(
      refused(json::array({series("gelu_scale", "eager", json::array({point(268435457, 0)}))})),
      "series[0].points[0].size: must be between 1 and 268435456 (the largest size of "
      "lesson 'gelu_scale', in elements), not 268435457");
  EXPECT_EQ(refused(json::array({series("ffn", "eager", json::array({point(512, 0)}))})),
            "series[0].points[0].inner: must be between 1 and 2048 (the largest hidden size C of "
            "lesson 'ffn'), not 0");
  EXPECT_EQ(refused(json::array({series("Foo Bar", "eager", json::array({point(512, 0)}))})),
            "series[0].lesson: unknown lesson 'Foo Bar', and not a lesson id a newer build could "
            "know (lowercase letters, digits and _, at most 64)");
  EXPECT_EQ(refused(json::array(
                {series("gelu_scale", "eager", json::array({point(1024, 0), point(1024, 0)}))})),
            "series[0].points[1]: repeats series[0].points[0] (same size and row length)");
  EXPECT_EQ(refused(json::array({series("gelu_scale", "eager", json::array({point(1024, 0)})),
                                 series("gelu_scale", "eager", json::array({point(2048, 0)}))})),
            "series[1]: repeats series[0] (same lesson, precision and peer)");
}

}  // namespace
}  // namespace fl
