// A validity check of a Chrome trace made by fl::chrome_trace_json(session), shared by the CPU
// unit tests (shipped and synthetic sessions) and the GPU tests (a trace of a live run).
//
//   std::vector<std::string> problems = fl::check_chrome_trace(trace_json, session);
//   EXPECT_TRUE(problems.empty()) << fl::join_problems(problems);
//
// It checks the format (the JSON parses; every event has the fields its phase needs: X name, ph,
// ts, dur, pid, tid; C name, ts, pid, numeric args; M name, pid, args.name / args.labels /
// args.sort_index), the layout (one process per measured run: lesson, size, row length,
// precision, cache, named after it; one thread per fusion level, named "level N ..."; each
// measurement a slice on its level's thread, measurements of one thread one after another, its
// kernels nested in it and named by the operation: "gelu", or "fused gelu·scale" for
// "gelu_scale_fused"), the time axis (ts in µs, non-decreasing per X track (pid, tid) and per
// counter track (pid, name)) and that the numbers are the session's: every record once,
// durations = (end_ns - start_ns) / 1000, offsets within a measurement as recorded, the record's
// full kernel name and launch configuration, DRAM bytes = the launch counters (on the kernel's
// args and on its run's "DRAM bytes · level N" counter track), speedups = fl::speedup against a
// level 0 of the same point, synthesized slices (no records) = median launch times back to back.
// Header-only; needs nlohmann_json (fusionlab_measure brings it).
#pragma once

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "model/results.h"

namespace fl {
namespace trace_check_detail {

using json = nlohmann::json;

// Collects problems, keeping the first 50 so one systematic error does not flood a test log.
struct Problems {
  std::vector<std::string> list;
  size_t dropped = 0;
  void add(const std::string& text) {
    if (list.size() < 50)
      list.push_back(text);
    else
      ++dropped;
  }
};

inline bool is_int(const json& j, const char* key) {
  return j.contains(key) && j.at(key).is_number_integer();
}
inline bool is_num(const json& j, const char* key) {
  return j.contains(key) && j.at(key).is_number() && std::isfinite(j.at(key).get<double>());
}
inline bool is_str(const json& j, const char* key) {
  return j.contains(key) && j.at(key).is_string();
}
// Two times in µs that stand for the same nanosecond.
inline bool same_us(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::max(1.0, std::fabs(b));
}

inline std::string where(size_t index, const json& e) {
  return "event " + std::to_string(index) + " (" + e.value("ph", std::string("?")) + " '" +
         (e.contains("name") && e.at("name").is_string() ? e.at("name").get<std::string>() : "?") +
         "')";
}

// The phase's required fields. Returns false when the event cannot be used further.
inline bool check_fields(size_t i, const json& e, Problems* p) {
  if (!e.is_object()) {
    p->add("event " + std::to_string(i) + " is not an object");
    return false;
  }
  if (!is_str(e, "ph")) {
    p->add("event " + std::to_string(i) + " has no \"ph\"");
    return false;
  }
  const std::string ph = e.at("ph");
  bool ok = is_str(e, "name") && is_int(e, "pid");
  if (ph == "X") {
    ok = ok && is_num(e, "ts") && is_num(e, "dur") && is_int(e, "tid") &&
         e.at("dur").get<double>() >= 0 && e.at("ts").get<double>() >= 0;
  } else if (ph == "C") {
    ok = ok && is_num(e, "ts") && e.at("ts").get<double>() >= 0 && e.contains("args") &&
         e.at("args").is_object() && !e.at("args").empty();
    if (ok) {
      for (const auto& [key, value] : e.at("args").items()) {
        if (!value.is_number()) {
          p->add(where(i, e) + ": counter arg '" + key + "' is not a number");
          return false;
        }
      }
    }
  } else if (ph == "M") {
    ok = ok && e.contains("args") && e.at("args").is_object();
    if (ok) {
      const std::string name = e.at("name");
      if (name == "process_name" || name == "thread_name")
        ok = is_str(e.at("args"), "name");
      else if (name == "process_labels")
        ok = is_str(e.at("args"), "labels");
      else if (name == "process_sort_index" || name == "thread_sort_index")
        ok = is_int(e.at("args"), "sort_index");
      else
        ok = false;
      if (name.rfind("thread_", 0) == 0) ok = ok && is_int(e, "tid");
    }
  } else {
    p->add(where(i, e) + ": unexpected phase '" + ph + "'");
    return false;
  }
  if (!ok) p->add(where(i, e) + ": missing or malformed fields for phase " + ph + ": " + e.dump());
  return ok;
}

// A counter track's events in file order, to read its value at an instant.
struct CounterTrack {
  std::vector<std::pair<double, json>> points;  // ts, args
  // The args in force at `ts`: the last event at or before it (several at one instant: the
  // last wins, as viewers apply them in order). Null when none.
  const json* at(double ts) const {
    const auto after =
        std::upper_bound(points.begin(), points.end(), ts + 1e-6,
                         [](double t, const auto& point) { return t < point.first; });
    return after == points.begin() ? nullptr : &std::prev(after)->second;
  }
};

// The slice name of an operation: "gelu" as is, "gelu_scale_fused" as "fused gelu·scale".
inline std::string expected_op_name(const std::string& op) {
  const std::string suffix = "_fused";
  if (op.size() <= suffix.size() ||
      op.compare(op.size() - suffix.size(), suffix.size(), suffix) != 0)
    return op;
  std::string out = "fused ";
  for (size_t i = 0; i + suffix.size() < op.size(); ++i)
    out += op[i] == '_' ? std::string("·") : std::string(1, op[i]);
  return out;
}

inline bool same_point(const Measurement& a, const Measurement& b) {
  return a.lesson == b.lesson && a.size == b.size && a.inner == b.inner &&
         a.precision == b.precision && a.cache == b.cache;
}

inline void check_point_args(const std::string& who, const json& args, const Measurement& m,
                             Problems* p) {
  auto mismatch = [&](const char* key) {
    p->add(who + ": args." + key + " differs from the session");
  };
  if (args.value("lesson", std::string()) != m.lesson) mismatch("lesson");
  if (!is_int(args, "size") || args.at("size").get<int64_t>() != m.size) mismatch("size");
  if (!is_int(args, "inner") || args.at("inner").get<int64_t>() != m.inner) mismatch("inner");
  if (!is_int(args, "level") || args.at("level").get<int>() != m.level) mismatch("level");
  if (args.value("level_name", std::string()) != m.level_name) mismatch("level_name");
  if (args.value("precision", std::string()) != to_string(m.precision)) mismatch("precision");
  if (args.value("cache", std::string()) != to_string(m.cache)) mismatch("cache");
}

using CounterTracks = std::map<std::pair<int64_t, std::string>, CounterTrack>;  // (pid, name)

inline void check_kernel(const std::string& who, const json& e, const json& slice,
                         const Measurement& m, const CounterTracks& counters, Problems* p) {
  const json& args = e.at("args");
  const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
  const double slice_ts = slice.at("ts").get<double>(),
               slice_end = slice_ts + slice.at("dur").get<double>();
  if (ts < slice_ts - 1e-6 || ts + dur > slice_end + 1e-6)
    p->add(who + ": lies outside its measurement's slice");
  check_point_args(who, args, m, p);
  if (!is_int(args, "launch") || args.at("launch").get<int>() < 0 ||
      args.at("launch").get<int>() >= static_cast<int>(m.launches.size())) {
    p->add(who + ": args.launch is not a launch of its measurement");
    return;
  }
  const LaunchResult& l = m.launches[args.at("launch").get<int>()];
  if (e.at("pid") != slice.at("pid") || e.at("tid") != slice.at("tid")) {
    p->add(who + ": not on its measurement's thread (pid, tid)");
  }
  if (e.at("name") != expected_op_name(l.textbook.kernel)) {
    p->add(who + ": named '" + e.at("name").get<std::string>() + "', not by its operation '" +
           expected_op_name(l.textbook.kernel) + "'");
  }
  if (args.value("op", std::string()) != l.textbook.kernel)
    p->add(who + ": args.op is not the launch's operation");
  if (!is_int(args, "textbook_bytes_read") ||
      args.at("textbook_bytes_read").get<int64_t>() != l.textbook.bytes_read ||
      !is_int(args, "textbook_bytes_written") ||
      args.at("textbook_bytes_written").get<int64_t>() != l.textbook.bytes_written) {
    p->add(who + ": textbook bytes differ from the session");
  }
  if (l.counters) {
    if (!is_int(args, "dram_read_bytes") ||
        args.at("dram_read_bytes").get<int64_t>() != l.counters->dram_read_bytes ||
        !is_int(args, "dram_write_bytes") ||
        args.at("dram_write_bytes").get<int64_t>() != l.counters->dram_write_bytes ||
        !is_int(args, "l2_bytes") || args.at("l2_bytes").get<int64_t>() != l.counters->l2_bytes) {
      p->add(who + ": DRAM/L2 bytes in args differ from the launch's counters");
    }
    auto track = counters.find(
        {e.at("pid").get<int64_t>(), "DRAM bytes · level " + std::to_string(m.level)});
    const json* value = track == counters.end() ? nullptr : track->second.at(ts);
    if (value == nullptr || !is_int(*value, "read") || !is_int(*value, "write") ||
        value->at("read").get<int64_t>() != l.counters->dram_read_bytes ||
        value->at("write").get<int64_t>() != l.counters->dram_write_bytes) {
      p->add(
          who +
          ": its run's \"DRAM bytes · level N\" counter at its start is not the launch's counters");
    }
  } else if (args.contains("dram_read_bytes")) {
    p->add(who + ": has DRAM bytes but the launch has no counters");
  }
}

// A measurement's phase slices (cat "phase"): for each launch with a phase timeline that has a
// kernel slice, one slice per record, on a thread of its run named after its SM and level ("SM 17
// · level 2 ..."), each thread one SM's, starting the record's offset after the launch's first
// kernel, lasting the record's length, named by the record's phase.
inline void check_phases(const std::string& who, const Measurement& m, const json& slice,
                         const std::vector<const json*>& kernels,
                         const std::vector<const json*>& phases,
                         const std::map<std::pair<int64_t, int64_t>, std::string>& thread_names,
                         std::map<std::pair<int64_t, int64_t>, int>* sm_of_thread, Problems* p) {
  std::map<int, double> launch_ts;  // launch -> its first kernel's ts
  for (const json* k : kernels) {
    const int launch = k->at("args").value("launch", -1);
    const double ts = k->at("ts").get<double>();
    if (!launch_ts.count(launch) || ts < launch_ts[launch]) launch_ts[launch] = ts;
  }
  size_t expected = 0;
  for (size_t l = 0; l < m.launches.size(); ++l) {
    if (m.launches[l].phases && launch_ts.count(static_cast<int>(l)))
      expected += m.launches[l].phases->records.size();
  }
  if (phases.size() != expected) {
    p->add(who + ": " + std::to_string(phases.size()) + " phase slices for " +
           std::to_string(expected) + " phase records");
  }
  std::set<std::pair<int, int64_t>> seen;  // (launch, record)
  for (const json* e : phases) {
    const json& a = e->at("args");
    const int launch = a.value("launch", -1);
    const int64_t k = a.value("phase_record", int64_t(-1));
    if (launch < 0 || launch >= static_cast<int>(m.launches.size()) || !m.launches[launch].phases ||
        k < 0 || k >= static_cast<int64_t>(m.launches[launch].phases->records.size()) ||
        !seen.insert({launch, k}).second || !launch_ts.count(launch)) {
      p->add(who + ": a phase slice names no phase record, or one named twice");
      continue;
    }
    const LaunchPhases& lp = *m.launches[launch].phases;
    const PhaseRecord& r = lp.records[k];
    const std::string pwho =
        who + " launch " + std::to_string(launch) + " phase record " + std::to_string(k);
    if (e->at("name") != lp.names[r.phase]) p->add(pwho + ": not named by its phase");
    if (a.value("sm", -1) != r.sm || a.value("block", int64_t(-1)) != r.block)
      p->add(pwho + ": args.sm or args.block differ from the record");
    if (!same_us(e->at("dur").get<double>(), static_cast<double>(r.end_ns - r.start_ns) / 1000.0))
      p->add(pwho + ": dur is not (end_ns - start_ns) in µs");
    if (!same_us(e->at("ts").get<double>() - launch_ts[launch],
                 static_cast<double>(r.start_ns) / 1000.0))
      p->add(pwho + ": does not start start_ns after its launch's first kernel");
    if (e->at("pid") != slice.at("pid") || e->at("tid") == slice.at("tid"))
      p->add(pwho + ": not on an SM thread of its measurement's process");
    const auto key = std::make_pair(e->at("pid").get<int64_t>(), e->at("tid").get<int64_t>());
    const auto name = thread_names.find(key);
    const std::string want = "SM " + std::to_string(r.sm) + " · level " + std::to_string(m.level);
    if (name == thread_names.end() || name->second.rfind(want, 0) != 0)
      p->add(pwho + ": its thread is not named '" + want + " ...'");
    const auto [it, fresh] = sm_of_thread->emplace(key, r.sm);
    if (!fresh && it->second != r.sm) p->add(pwho + ": its thread holds another SM's phases");
  }
}

}  // namespace trace_check_detail

inline std::vector<std::string> check_chrome_trace(const std::string& trace_json,
                                                   const Session& session) {
  using namespace trace_check_detail;
  Problems p;
  const json trace = json::parse(trace_json, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded()) return {"the trace is not valid JSON"};
  const json* events_ptr = trace.is_array() ? &trace : nullptr;
  if (trace.is_object() && trace.contains("traceEvents")) events_ptr = &trace.at("traceEvents");
  if (events_ptr == nullptr || !events_ptr->is_array()) return {"no traceEvents array"};
  const json& events = *events_ptr;

  // Format and the time axis.
  std::map<std::pair<int64_t, int64_t>, double> last_x;             // (pid, tid) -> ts
  std::map<std::pair<int64_t, std::string>, double> last_c;         // (pid, name) -> ts
  CounterTracks counters;                                           // by (pid, name)
  std::map<int64_t, std::string> process_names;                     // pid -> name
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;  // (pid, tid) -> name
  std::map<size_t, const json*> slices;                     // measurement index -> its slice
  std::map<size_t, std::vector<const json*>> kernels;       // measurement index -> kernels
  std::map<size_t, std::vector<const json*>> phases;        // measurement index -> phase slices
  std::map<std::pair<int64_t, int64_t>, int> sm_of_thread;  // (pid, tid) -> SM, phase threads
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!check_fields(i, e, &p)) continue;
    const std::string ph = e.at("ph");
    if (ph == "M") {
      const std::string name = e.at("name");
      const json& margs = e.at("args");
      if (name == "process_name") process_names[e.at("pid").get<int64_t>()] = margs.at("name");
      if (name == "thread_name") {
        thread_names[{e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()}] = margs.at("name");
        if (e.at("tid") == e.at("pid"))
          p.add(where(i, e) +
                ": a thread whose tid is its pid (Perfetto calls it \"main thread\")");
      }
      continue;
    }
    const double ts = e.at("ts").get<double>();
    const int64_t pid = e.at("pid").get<int64_t>();
    if (ph == "X") {
      const auto key = std::make_pair(pid, e.at("tid").get<int64_t>());
      if (last_x.count(key) && ts < last_x[key]) p.add(where(i, e) + ": ts goes back on its track");
      last_x[key] = ts;
      const json args = e.value("args", json::object());
      const std::string cat = e.value("cat", std::string());
      if (!is_int(args, "measurement") || args.at("measurement").get<int64_t>() < 0 ||
          args.at("measurement").get<size_t>() >= session.measurements.size()) {
        p.add(where(i, e) + ": args.measurement does not name a measurement of the session");
        continue;
      }
      const size_t m = args.at("measurement").get<size_t>();
      if (cat == "measurement") {
        if (slices.count(m))
          p.add(where(i, e) + ": a second slice for measurement " + std::to_string(m));
        slices[m] = &e;
      } else if (cat.rfind("kernel", 0) == 0) {
        kernels[m].push_back(&e);
      } else if (cat == "phase") {
        phases[m].push_back(&e);
      } else {
        p.add(where(i, e) + ": unknown category '" + cat + "'");
      }
    } else {  // C
      const auto key = std::make_pair(pid, e.at("name").get<std::string>());
      if (last_c.count(key) && ts < last_c[key])
        p.add(where(i, e) + ": ts goes back on its counter track");
      last_c[key] = ts;
      counters[{pid, e.at("name").get<std::string>()}].points.emplace_back(ts, e.at("args"));
    }
  }

  // The layout: one process per run (point), one thread per level of it, measurements of one
  // thread one after another in session order.
  std::map<int64_t, size_t> run_of_pid;                     // pid -> first measurement of its run
  std::map<std::pair<int64_t, int>, int64_t> tid_of_level;  // (pid, level) -> tid
  std::map<std::pair<int64_t, int64_t>, double>
      thread_end;  // (pid, tid) -> end of its last measurement
  // The numbers are the session's.
  for (size_t i = 0; i < session.measurements.size(); ++i) {
    const Measurement& m = session.measurements[i];
    const std::string who = "measurement " + std::to_string(i) + " (" + m.lesson + " size " +
                            std::to_string(m.size) + " level " + std::to_string(m.level) + ")";
    if (!slices.count(i)) {
      p.add(who + ": no measurement slice");
      continue;
    }
    const json& slice = *slices[i];
    const json args = slice.value("args", json::object());
    const double slice_ts = slice.at("ts").get<double>();
    const int64_t pid = slice.at("pid").get<int64_t>(), tid = slice.at("tid").get<int64_t>();
    if (!run_of_pid.count(pid)) {
      for (const auto& [other_pid, first] : run_of_pid) {
        if (same_point(session.measurements[first], m))
          p.add(who + ": its run is split over processes " + std::to_string(other_pid) + " and " +
                std::to_string(pid));
      }
      run_of_pid[pid] = i;
      const std::string title = process_names.count(pid) ? process_names[pid] : std::string();
      if (title.empty()) {
        p.add(who + ": its process " + std::to_string(pid) + " has no name");
      } else if (title.find(m.lesson) == std::string::npos ||
                 title.find(to_string(m.precision)) == std::string::npos ||
                 title.find(to_string(m.cache)) == std::string::npos) {
        p.add(who + ": its process is named '" + title +
              "', without its lesson, precision and cache");
      }
    } else if (!same_point(session.measurements[run_of_pid[pid]], m)) {
      p.add(who + ": shares process " + std::to_string(pid) + " with another run");
    }
    const auto level_key = std::make_pair(pid, m.level);
    if (tid_of_level.count(level_key) && tid_of_level[level_key] != tid)
      p.add(who + ": its level is on two threads");
    for (const auto& [key, other_tid] : tid_of_level) {
      if (key.first == pid && key.second != m.level && other_tid == tid)
        p.add(who + ": two levels share a thread");
    }
    tid_of_level[level_key] = tid;
    const auto thread_key = std::make_pair(pid, tid);
    const std::string thread =
        thread_names.count(thread_key) ? thread_names[thread_key] : std::string();
    if (thread.rfind("level " + std::to_string(m.level), 0) != 0) {
      p.add(who + ": its thread is named '" + thread + "', not 'level " + std::to_string(m.level) +
            " ...'");
    }
    if (thread_end.count(thread_key) && slice_ts <= thread_end[thread_key]) {
      p.add(who + ": does not start after the previous measurement of its level ends");
    }
    thread_end[thread_key] = slice_ts + slice.at("dur").get<double>();
    check_point_args(who, args, m, &p);
    if (args.value("synthesized", !m.records.empty()) != m.records.empty()) {
      p.add(who + ": args.synthesized should be " + (m.records.empty() ? "true" : "false"));
    }

    // Speedup over level 0 at the same point, when the session has one.
    bool has_level0 = false;
    for (const Measurement& other : session.measurements) {
      has_level0 = has_level0 || (other.level == 0 && same_point(other, m));
    }
    if (is_int(args, "speedup_baseline_measurement")) {
      const int64_t b = args.at("speedup_baseline_measurement").get<int64_t>();
      if (b < 0 || b >= static_cast<int64_t>(session.measurements.size()) ||
          session.measurements[b].level != 0 || !same_point(session.measurements[b], m)) {
        p.add(who + ": the speedup baseline is not a level 0 of the same point");
      } else {
        const double expected = speedup(session.measurements[b], m);
        if (!is_num(args, "speedup_vs_level0") ||
            std::fabs(args.at("speedup_vs_level0").get<double>() - expected) >
                1e-12 * std::max(1.0, expected)) {
          p.add(who + ": args.speedup_vs_level0 is not fl::speedup = " + std::to_string(expected));
        }
      }
    } else if (has_level0) {
      p.add(who + ": the session has a level 0 at this point but the trace gives no speedup");
    }

    const std::vector<const json*>& ks = kernels[i];
    check_phases(who, m, slice, ks, phases[i], thread_names, &sm_of_thread, &p);
    if (!m.records.empty()) {
      if (ks.size() != m.records.size()) {
        p.add(who + ": " + std::to_string(ks.size()) + " kernel events for " +
              std::to_string(m.records.size()) + " records");
      }
      uint64_t base = m.records.front().start_ns;
      for (const KernelRecord& r : m.records) base = std::min(base, r.start_ns);
      std::set<int64_t> seen;
      for (const json* k : ks) {
        const json& ka = k->at("args");
        if (!is_int(ka, "record") || ka.at("record").get<int64_t>() < 0 ||
            ka.at("record").get<size_t>() >= m.records.size() ||
            !seen.insert(ka.at("record").get<int64_t>()).second) {
          p.add(who + ": a kernel event names no record, or one named twice");
          continue;
        }
        const KernelRecord& r = m.records[ka.at("record").get<size_t>()];
        const std::string kwho = who + " record " + ka.at("record").dump();
        if (ka.value("synthesized", true)) p.add(kwho + ": marked synthesized");
        if (ka.value("kernel", std::string()) != r.kernel)
          p.add(kwho + ": args.kernel is not the record's full kernel name");
        if (!same_us(k->at("dur").get<double>(),
                     static_cast<double>(r.end_ns - r.start_ns) / 1000.0)) {
          p.add(kwho + ": dur is not (end_ns - start_ns) in µs");
        }
        if (!same_us(k->at("ts").get<double>() - slice_ts,
                     static_cast<double>(r.start_ns - base) / 1000.0)) {
          p.add(kwho + ": its offset in the measurement is not the recorded one in µs");
        }
        if (ka.value("launch", -1) != r.launch ||
            ka.value("correlation_id", -1LL) != r.correlation_id ||
            ka.value("stream", -1LL) != r.stream_id || ka.value("grid", json()) != json(r.grid) ||
            ka.value("block", json()) != json(r.block) ||
            ka.value("registers_per_thread", -1) != r.registers_per_thread ||
            ka.value("static_shared_bytes", -1) != r.static_shared_bytes ||
            ka.value("dynamic_shared_bytes", -1) != r.dynamic_shared_bytes) {
          p.add(kwho +
                ": launch, correlation id, stream, grid, block, registers or shared memory differ");
        }
        check_kernel(kwho, *k, slice, m, counters, &p);
      }
    } else {
      // Synthesized from median launch times, back to back, in launch order.
      std::vector<size_t> timed;
      for (size_t k = 0; k < m.launches.size(); ++k) {
        if (std::llround(m.launches[k].time_us.median * 1000.0) > 0) timed.push_back(k);
      }
      if (ks.size() != timed.size()) {
        p.add(who + ": " + std::to_string(ks.size()) + " synthesized kernels for " +
              std::to_string(timed.size()) + " timed launches");
        continue;
      }
      double at = slice_ts;
      for (size_t j = 0; j < ks.size(); ++j) {
        const json& k = *ks[j];
        const std::string kwho = who + " synthesized kernel " + std::to_string(j);
        const LaunchResult& l = m.launches[timed[j]];
        if (k.at("args").value("launch", -1) != static_cast<int>(timed[j]))
          p.add(kwho + ": not in launch order");
        if (!k.at("args").value("synthesized", false)) p.add(kwho + ": not marked synthesized");
        if (std::fabs(k.at("dur").get<double>() - l.time_us.median) > 0.0005 + 1e-9) {
          p.add(kwho + ": dur is not the launch's median time in µs");
        }
        if (!same_us(k.at("ts").get<double>(), at))
          p.add(kwho + ": not back to back with the one before");
        at = k.at("ts").get<double>() + k.at("dur").get<double>();
        check_kernel(kwho, k, slice, m, counters, &p);
      }
    }
  }
  if (p.dropped > 0) p.list.push_back("... and " + std::to_string(p.dropped) + " more problems");
  return p.list;
}

inline std::string join_problems(const std::vector<std::string>& problems) {
  std::ostringstream out;
  for (const std::string& line : problems) out << line << "\n";
  return out.str();
}

}  // namespace fl
