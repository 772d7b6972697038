// Phase timelines through the model, the session file, the trace export and replay (CPU only):
// the records a kernel's stamps leave (kernels/phases.h) as LaunchResult::phases.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "app/measure/export.h"
#include "app/measure/replay_backend.h"
#include "model/session_json.h"
#include "tests/support/recorded.h"
#include "tests/unit/trace_check.h"

namespace fl {
namespace {

using json = nlohmann::json;
using testing_support::recorded_measurement;
using testing_support::recorded_session;
using testing_support::sample_phases;

const std::vector<std::string> kNames = {"weights in", "up-projection", "grid barrier",
                                         "down-projection"};

// ffn level 2 at 16 tokens with one launch whose kernel recorded 12 blocks on 8 SMs.
Measurement ffn_with_phases() {
  Measurement m = recorded_measurement("ffn", 16, 2, 10.0, Precision::bf16, CacheMode::cold, 768);
  LaunchResult l;
  l.textbook = {"ffn_fused", 1 << 20, 1 << 14, 1e8};
  l.time_us.median = 10.0;
  l.phases = sample_phases(12, 8, kNames);
  m.launches.push_back(l);
  return m;
}

// ---- the model -------------------------------------------------------------------------------

TEST(PhaseRecords, NormalizedFromTheFirstStampSortedBySmWithUndeclaredPhasesNamed) {
  LaunchPhases p;
  p.names = {"load"};
  const uint64_t t0 = 1795307715477583721ull;  // %globaltimer's nanoseconds
  p.records = {{t0 + 500, t0 + 900, 3, 7, 1, 0, 0},
               {t0 + 100, t0 + 400, 3, 7, 0, 0, 0},
               {t0 + 50, t0 + 600, 0, 2, 0, 0, 0},
               {t0 + 10, t0 + 5, 1, 1, 0, 0, 0},  // ends before it starts: dropped
               {t0, t0 + 9, 1, 1, 64, 0, 0}};     // a phase past the names' bound: dropped
  normalize_phase_records(&p);
  ASSERT_EQ(p.records.size(), 3u);
  EXPECT_EQ(p.lost, 2);
  EXPECT_EQ(p.records[0].sm, 2);
  EXPECT_EQ(p.records[0].start_ns, 0u);  // the earliest kept stamp
  EXPECT_EQ(p.records[1].start_ns, 50u);
  EXPECT_EQ(p.records[2].start_ns, 450u);
  ASSERT_EQ(p.names.size(), 2u);
  EXPECT_EQ(p.names[1], "phase 1");
}

TEST(PhaseRecords, OverlappingBlocksOfAnSmTakeSeparateSlotsAndABlockKeepsItsSlot) {
  const LaunchPhases p = sample_phases(12, 8, kNames);
  const std::vector<PhaseLane> lanes = phase_lanes(p);
  ASSERT_EQ(lanes.size(), p.records.size());
  std::map<uint32_t, std::set<int>> slots_of_block;
  for (size_t k = 0; k < lanes.size(); ++k) {
    EXPECT_EQ(lanes[k].sm, p.records[k].sm);
    slots_of_block[p.records[k].block].insert(lanes[k].slot);
  }
  for (const auto& [block, slots] : slots_of_block) {
    ASSERT_EQ(slots.size(), 1u) << "block " << block;
    // Blocks 8..11 share SMs 0..3 with blocks 0..3 and overlap them: the second slot.
    EXPECT_EQ(*slots.begin(), block >= 8 ? 1 : 0) << "block " << block;
  }
  // One after another on one SM: one slot.
  LaunchPhases seq;
  seq.names = {"task"};
  seq.records = {{0, 100, 0, 5, 0, 0, 0}, {100, 200, 1, 5, 0, 1, 30}, {250, 300, 2, 5, 0, 2, 0}};
  for (const PhaseLane& lane : phase_lanes(seq)) EXPECT_EQ(lane.slot, 0);
}

// ---- the session file ------------------------------------------------------------------------

TEST(PhaseSession, RoundTripsEveryField) {
  Measurement m = ffn_with_phases();
  m.launches[0].phases->lost = 3;
  m.launches[0].phases->records[5].arg = 4000000000u;
  m.launches[0].phases->records[5].wait_ns = 123456;
  const Session s = recorded_session({m});
  Session back;
  const Status st = session_from_json(session_to_json(s), &back);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(back.measurements.size(), 1u);
  ASSERT_TRUE(back.measurements[0].launches[0].phases);
  const LaunchPhases& a = *m.launches[0].phases;
  const LaunchPhases& b = *back.measurements[0].launches[0].phases;
  EXPECT_EQ(b.names, a.names);
  EXPECT_EQ(b.lost, 3);
  EXPECT_DOUBLE_EQ(b.time_on_us, a.time_on_us);
  EXPECT_DOUBLE_EQ(b.time_off_us, a.time_off_us);
  ASSERT_EQ(b.records.size(), a.records.size());
  for (size_t k = 0; k < a.records.size(); ++k) {
    EXPECT_EQ(b.records[k].start_ns, a.records[k].start_ns);
    EXPECT_EQ(b.records[k].end_ns, a.records[k].end_ns);
    EXPECT_EQ(b.records[k].block, a.records[k].block);
    EXPECT_EQ(b.records[k].sm, a.records[k].sm);
    EXPECT_EQ(b.records[k].phase, a.records[k].phase);
    EXPECT_EQ(b.records[k].arg, a.records[k].arg);
    EXPECT_EQ(b.records[k].wait_ns, a.records[k].wait_ns);
  }
  EXPECT_EQ(session_to_json(back), session_to_json(s));
}

TEST(PhaseSession, ALaunchWithoutPhasesHasNoneAndOlderVersionsStillOpen) {
  Measurement m = ffn_with_phases();
  m.launches[0].phases.reset();
  json j = json::parse(session_to_json(recorded_session({m})));
  EXPECT_FALSE(j["measurements"][0]["launches"][0].contains("phases"));
  for (int version : {2, 3}) {
    j["schema_version"] = version;
    Session back;
    const Status st = session_from_json(j.dump(), &back);
    ASSERT_TRUE(st.ok()) << version << ": " << st.message();
    EXPECT_FALSE(back.measurements[0].launches[0].phases);
  }
}

TEST(PhaseSession, AVersion2FileCarriesNoPhases) {
  json j = json::parse(session_to_json(recorded_session({ffn_with_phases()})));
  j["schema_version"] = 2;
  Session back;
  ASSERT_TRUE(session_from_json(j.dump(), &back).ok());
  EXPECT_FALSE(back.measurements[0].launches[0].phases);
}

// The file with one change made by `edit` to the first launch's phases; the refusal's message.
std::string refusal(const std::function<void(json&)>& edit) {
  json j = json::parse(session_to_json(recorded_session({ffn_with_phases()})));
  edit(j["measurements"][0]["launches"][0]["phases"]);
  Session out;
  const Status st = session_from_json(j.dump(), &out);
  return st.ok() ? std::string("accepted") : st.message();
}

TEST(PhaseSession, RefusesWhatNoEngineWrites) {
  const std::string at = "measurements[0].launches[0].phases";
  EXPECT_EQ(refusal([](json& p) { p["records"][2]["phase"] = 4; }),
            at + ".records[2].phase: names phase 4, but the launch names 4");
  EXPECT_EQ(refusal([](json& p) {
              p["records"][0]["end_ns"] = 0;
              p["records"][0]["start_ns"] = 9;
            }),
            at + ".records[0]: ends before it starts (end_ns 0 < start_ns 9)");
  EXPECT_EQ(refusal([](json& p) { p["records"][1]["sm"] = 70000; }),
            at + ".records[1].sm: 70000 is too large for a 16-bit SM index");
  EXPECT_EQ(refusal([](json& p) { p["names"][1] = 7; }),
            at + ".names[1]: must be a string, not a number");
  EXPECT_EQ(refusal([](json& p) { p["names"][0] = "a\nb"; }),
            at + ".names[0]: holds a control character: 'a?b'");
  EXPECT_EQ(refusal([](json& p) { p.erase("time_on_us"); }), at + ".time_on_us is missing");
  EXPECT_EQ(refusal([](json& p) { p["lost"] = -1; }), at + ".lost: must be 0 or more, not -1");
  EXPECT_EQ(refusal([](json& p) { p["records"][0]["start_ns"] = 7200000000000ull; }),
            at + ".records[0].start_ns: must be between 0 and 3600000000000 (an hour), not "
                 "7200000000000");
  EXPECT_EQ(refusal([](json& p) {
              p["names"] = json::array();
              p["names"].push_back(json::array());
            }),
            at + ".names[0]: must be a string, not an array");
}

TEST(PhaseSession, BoundsTheNamesAndTheRecordsOfALaunch) {
  EXPECT_EQ(refusal([](json& p) {
              for (int i = 0; i < 61; ++i) p["names"].push_back("n" + std::to_string(i));
            }),
            "measurements[0].launches[0].phases.names[64]: more than 64 phase names (a kernel "
            "declares at most that many)");
  EXPECT_EQ(refusal([](json& p) {
              const json one = p["records"][0];
              while (p["records"].size() <= LaunchPhases::kMaxRecords) p["records"].push_back(one);
            }),
            "measurements[0].launches[0].phases.records[65536]: more than 65536 phase records in "
            "one launch (the live engine keeps at most that many)");
  // At the bound itself, the file opens.
  EXPECT_EQ(refusal([](json& p) {
              const json one = p["records"][0];
              while (p["records"].size() < LaunchPhases::kMaxRecords) p["records"].push_back(one);
            }),
            "accepted");
}

// ---- the trace -------------------------------------------------------------------------------

TEST(PhaseTrace, OneThreadPerSmUnderTheRunsProcessAndTheCheckPasses) {
  Measurement level0 =
      recorded_measurement("ffn", 16, 0, 20.0, Precision::bf16, CacheMode::cold, 768);
  LaunchResult up;
  up.textbook = {"gemm_up", 1 << 20, 1 << 14, 1e8};
  up.time_us.median = 20.0;
  level0.launches.push_back(up);
  const Session s = recorded_session({level0, ffn_with_phases()});
  const std::string trace = chrome_trace_json(s);
  const std::vector<std::string> problems = check_chrome_trace(trace, s);
  EXPECT_TRUE(problems.empty()) << join_problems(problems);

  std::map<int64_t, std::string> threads;  // tid -> name
  std::map<int64_t, std::set<int>> sms_of_thread;
  int phase_slices = 0;
  const json parsed = json::parse(trace);
  for (const json& e : parsed.at("traceEvents")) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "X" && e["cat"] == "phase") {
      ++phase_slices;
      EXPECT_EQ(e["pid"], 1);  // the run's process (ffn at 16 tokens)
      sms_of_thread[e["tid"]].insert(e["args"]["sm"].get<int>());
    }
  }
  EXPECT_EQ(phase_slices, 12 * 4);
  // 8 SMs, and SMs 0-3 held two overlapping blocks: a second row each.
  EXPECT_EQ(sms_of_thread.size(), 8u + 4u);
  std::set<std::string> names;
  for (const auto& [tid, sms] : sms_of_thread) {
    EXPECT_EQ(sms.size(), 1u);
    names.insert(threads[tid]);
  }
  EXPECT_TRUE(names.count("SM 0 · level 2"));
  EXPECT_TRUE(names.count("SM 0 · level 2 · block row 2"));
  EXPECT_TRUE(names.count("SM 7 · level 2"));
}

TEST(PhaseTrace, TheCheckCatchesAPhaseOnAnotherSmsThread) {
  const Session s = recorded_session({ffn_with_phases()});
  json trace = json::parse(chrome_trace_json(s));
  int64_t other_tid = -1;
  for (json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "phase") continue;
    if (other_tid < 0 && e["args"]["sm"] == 1) other_tid = e["tid"];
  }
  for (json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "phase" && e["args"]["sm"] == 2) {
      e["tid"] = other_tid;
      break;
    }
  }
  const std::vector<std::string> problems = check_chrome_trace(trace.dump(), s);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(join_problems(problems).find("SM 2 · level 2"), std::string::npos)
      << join_problems(problems);
}

// ---- replay ----------------------------------------------------------------------------------

TEST(PhaseReplay, ARecordingServesItsPhaseTimelinesWithoutAGpu) {
  const Session s = recorded_session({ffn_with_phases()});
  Session loaded;
  ASSERT_TRUE(session_from_json(session_to_json(s), &loaded).ok());
  std::unique_ptr<ReplayBackend> backend;
  ASSERT_TRUE(ReplayBackend::create({{"ffn.json", loaded}}, &backend).ok());
  MeasureRequest r;
  r.lesson = "ffn";
  r.size = 16;
  r.inner = 768;
  r.precision = Precision::bf16;
  r.phases = true;
  std::vector<Measurement> out;
  const Status st = backend->measure(
      r, [] { return false; }, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].launches[0].phases);
  EXPECT_EQ(out[0].launches[0].phases->records.size(), 12u * 4u);
  EXPECT_EQ(out[0].launches[0].phases->names, kNames);
}

// ---- the example recording (docs/examples/phases-h100.json, an H100 with `bench --phases`) -----

TEST(PhaseExample, TheExampleRecordingReplaysItsPhasesAndItsTraceHasAThreadPerSm) {
  const std::string path =
      (std::filesystem::path(FUSIONLAB_SOURCE_DIR) / "docs" / "examples" / "phases-h100.json")
          .string();
  Session s;
  const Status loaded = load_session(path, &s);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  // ffn at 16 and layernorm_linear at 16 and 256 tokens have level-2 phase timelines.
  std::set<std::string> with_phases;
  std::set<std::tuple<int, int, int>> sm_threads;  // (measurement, sm, slot)
  for (size_t i = 0; i < s.measurements.size(); ++i) {
    const Measurement& m = s.measurements[i];
    for (const LaunchResult& l : m.launches) {
      if (!l.phases) continue;
      EXPECT_EQ(m.level, 2);
      EXPECT_FALSE(l.phases->records.empty());
      EXPECT_GT(l.phases->time_on_us, 0);
      with_phases.insert(m.lesson + " " + std::to_string(m.size));
      for (const PhaseLane& lane : phase_lanes(*l.phases))
        sm_threads.insert({static_cast<int>(i), lane.sm, lane.slot});
    }
  }
  EXPECT_EQ(with_phases,
            (std::set<std::string>{"ffn 16", "layernorm_linear 16", "layernorm_linear 256"}));
  const std::string trace = chrome_trace_json(s);
  const std::vector<std::string> problems = check_chrome_trace(trace, s);
  EXPECT_TRUE(problems.empty()) << join_problems(problems);
  const json parsed = json::parse(trace);
  size_t named_sm_threads = 0;
  for (const json& e : parsed.at("traceEvents")) {
    if (e["ph"] == "M" && e["name"] == "thread_name" &&
        e["args"]["name"].get<std::string>().rfind("SM ", 0) == 0)
      ++named_sm_threads;
  }
  EXPECT_EQ(named_sm_threads, sm_threads.size());
  // Replayed, without a GPU: the level-2 measurement comes back with its phases.
  std::unique_ptr<ReplayBackend> backend;
  ASSERT_TRUE(ReplayBackend::create({{path, s}}, &backend).ok());
  MeasureRequest r;
  r.lesson = "layernorm_linear";
  r.size = 256;
  r.precision = Precision::bf16;
  r.levels = {2};
  std::vector<Measurement> out;
  ASSERT_TRUE(backend
                  ->measure(
                      r, [] { return false; }, &out)
                  .ok());
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].launches[0].phases);
  EXPECT_EQ(out[0].launches[0].phases->names.size(), 5u);
}

}  // namespace
}  // namespace fl
