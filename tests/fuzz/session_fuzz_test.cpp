// Fuzz test of the session loader, the parser of untrusted recordings (docs/SESSION_FORMAT.md).
//
// Seeds: every recording shipped in the shipped recording (assets/recordings/) and a few small
// hand-made sessions (schema 1 and 2, a failed check, a lesson this build does not know, no
// measurements). Each mutant mixes byte-level damage (bit flips, truncation, inserted and deleted
// bytes) with structural edits made on the parsed JSON (keys deleted, values of another type,
// extreme numbers, empty or repeated arrays, very long strings) and written back.
//
// The product rule: a bad recording gets one clear line, never a crash. So for every mutant
// session_from_json returns a Status without throwing; a refusal says something, on one line;
// and a session that loads survives everything a loaded recording goes through in the app:
// the replay backend (built from it, asked what the window and the compare overlay ask), the
// trace and CSV exports, and saving it again, which must read back to the same session.
// Built with AddressSanitizer and UndefinedBehaviorSanitizer over the loader, the replay backend
// and the exports (tests/fuzz/CMakeLists.txt), so undefined behaviour fails the test too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "app/measure/export.h"
#include "app/measure/replay_backend.h"
#include "model/session_json.h"
#include "tests/fuzz/fuzz_common.h"

namespace fl {
namespace {

namespace fs = std::filesystem;
using fuzz::below;
using fuzz::chance;
using fuzz::pick;
using nlohmann::json;

// Mutants per seed in CI (FL_FUZZ_ITERATIONS overrides): 17 seeds x 60 = 1020 mutants, about
// 5 s under the sanitizers in a Release build on one core.
constexpr int kDefaultIterations = 60;

// ---- seeds ----------------------------------------------------------------------------------

struct Seed {
  std::string name;
  std::string text;
};

json stats(double median, int count) {
  return {{"median", median},     {"min", median * 0.9}, {"max", median * 1.5},
          {"p20", median * 0.95}, {"p80", median * 1.1}, {"count", count}};
}

json launch(const std::string& kernel, int64_t bytes_read, int64_t bytes_written, double time_us,
            json counters) {
  return {{"kernel", kernel},
          {"textbook_bytes_read", bytes_read},
          {"textbook_bytes_written", bytes_written},
          {"textbook_flops", 2.0 * bytes_read},
          {"time_us", stats(time_us, 100)},
          {"copy_gbps", 1500.25},
          {"counters", std::move(counters)}};
}

json record(int launch_index, uint64_t start_ns, uint64_t duration_ns, uint32_t stream) {
  return {{"launch", launch_index},
          {"kernel", "elementwise_kernel<float, fl::GeluScaleOp>"},
          {"start_ns", start_ns},
          {"end_ns", start_ns + duration_ns},
          {"start_rel_ns", 0},
          {"end_rel_ns", duration_ns},
          {"stream", stream},
          {"correlation", 11481},
          {"grid", {65536, 1, 1}},
          {"block", {256, 1, 1}},
          {"registers_per_thread", 19},
          {"static_shared_bytes", 0},
          {"dynamic_shared_bytes", 1024}};
}

// A launch's phase timeline (version 3): two blocks on two SMs through two phases, one record a
// persistent kernel's task with an argument and a wait.
json phases() {
  json records = json::array();
  for (int b = 0; b < 2; ++b) {
    for (int p = 0; p < 2; ++p) {
      records.push_back({{"start_ns", 1000 * p + 10 * b},
                         {"end_ns", 1000 * p + 10 * b + 900},
                         {"block", b},
                         {"sm", 3 + b},
                         {"phase", p},
                         {"arg", b == 1 && p == 1 ? 17 : 0},
                         {"wait_ns", b == 1 && p == 1 ? 250 : 0}});
    }
  }
  return {{"names", {"weights in", "grid barrier"}},
          {"records", std::move(records)},
          {"lost", 0},
          {"time_off_us", 12.5},
          {"time_on_us", 12.75}};
}

json measurement(const std::string& lesson, int64_t size, int64_t inner, int level) {
  const json counters = {
      {"dram_read_bytes", 4 * size}, {"dram_write_bytes", 4 * size}, {"l2_bytes", 12 * size}};
  json launches = json::array({launch("op_a", 4 * size, 4 * size, 12.5, counters)});
  if (level > 0) launches[0]["phases"] = phases();
  if (level == 0) launches.push_back(launch("op_b", 4 * size, 4 * size, 11.0, nullptr));
  json records = json::array({record(0, 1763769940123456789ull, 12500, 13)});
  if (level == 0) records.push_back(record(1, 1763769940123470000ull, 11000, 13));
  return {{"lesson", lesson},
          {"size", size},
          {"inner", inner},
          {"level", level},
          {"level_name", level == 0 ? "unfused" : "fused"},
          {"precision", "fp32"},
          {"cache", "cold"},
          {"timing_method", "cupti_activity"},
          {"repetitions", 100},
          {"chain_time_us", stats(level == 0 ? 24.0 : 12.5, 100)},
          {"chain_copy_gbps", 1400.5},
          {"check",
           {{"rel_l2_error", 3.6e-8},
            {"max_abs_error", 4.7e-7},
            {"non_finite", 0},
            {"tolerance", 1e-5},
            {"passed", true}}},
          {"launches", std::move(launches)},
          {"counters_status", level == 0 ? "failed" : "measured"},
          {"counters_note", level == 0 ? "the counter phase hit an error" : ""},
          {"records", std::move(records)}};
}

json session(json measurements) {
  return {{"format", "fusionlab-session"},
          {"schema_version", 3},
          {"app_version", "0.1.0"},
          {"created_utc", "2026-11-22T00:05:40Z"},
          {"backend", "live"},
          {"device",
           {{"name", "NVIDIA H200"},
            {"compute_capability", "9.0"},
            {"sm_count", 132},
            {"l2_bytes", 62914560},
            {"memory_bytes", 150110011392},
            {"driver_version", 13000},
            {"runtime_version", 13000},
            {"roof_gbps", 4315.0},
            {"copy_bandwidth",
             {{{"bytes", 536870912}, {"cache", "cold"}, {"gbps", 4290.2}},
              {{"bytes", 2147483648}, {"cache", "warm"}, {"gbps", 4315.0}}}}}},
          {"measurements", std::move(measurements)}};
}

// Small sessions that reach the corners the shipped recording does not: schema 1, a failed
// check (no times), a lesson unknown to this build, rows of several lengths, nothing at all.
std::vector<Seed> hand_made_seeds() {
  std::vector<Seed> seeds;
  seeds.push_back({"tiny_v3", session({measurement("gelu_scale", 1 << 20, 0, 0),
                                       measurement("gelu_scale", 1 << 20, 0, 1),
                                       measurement("gelu_scale", 64 << 20, 0, 1)})
                                  .dump(2)});

  json v1 = session({measurement("relu_scale", 4096, 0, 0), measurement("relu_scale", 4096, 0, 1)});
  v1["schema_version"] = 1;
  v1["device"].erase("copy_bandwidth");
  for (json& m : v1["measurements"]) {
    m.erase("counters_status");
    m.erase("counters_note");
    m.erase("records");
    for (json& l : m["launches"]) l.erase("counters");
  }
  seeds.push_back({"tiny_v1", v1.dump(2)});

  json failed =
      session({measurement("bias_gelu", 256, 768, 0), measurement("bias_gelu", 256, 768, 1)});
  json& wrong = failed["measurements"][1];
  wrong["check"]["passed"] = false;
  wrong["check"]["rel_l2_error"] = 0.5;
  wrong["chain_time_us"] = stats(0, 0);
  for (json& l : wrong["launches"]) l["time_us"] = stats(0, 0);
  wrong["counters_status"] = "not_measured";
  wrong["records"] = json::array();
  wrong["timing_method"] = "cuda_events";
  seeds.push_back({"failed_check", failed.dump()});

  seeds.push_back(
      {"rows_and_unknown_lesson", session({measurement("residual_layernorm", 2, 768, 0),
                                           measurement("residual_layernorm", 2, 1024, 0),
                                           measurement("residual_layernorm", 262144, 768, 2),
                                           measurement("attention_next_year", 100, 64, 0),
                                           measurement("attention_next_year", 100, 64, 3)})
                                      .dump(1)});

  seeds.push_back({"no_measurements", session(json::array()).dump()});
  return seeds;
}

std::vector<Seed> all_seeds() {
  std::vector<Seed> seeds;
  const fs::path folder = FUSIONLAB_SHIPPED_RECORDING;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().extension() == ".json" && entry.path().filename() != "peers.json") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    seeds.push_back({file.stem().string(), fuzz::read_file(file)});
  }
  for (Seed& seed : hand_made_seeds()) seeds.push_back(std::move(seed));
  return seeds;
}

// ---- structural mutations -------------------------------------------------------------------

// JSON punctuation, keywords and numbers for byte-level insertions.
const std::vector<std::string>& json_dictionary() {
  static const std::vector<std::string> tokens = {"{",
                                                  "}",
                                                  "[",
                                                  "]",
                                                  "\"",
                                                  ",",
                                                  ":",
                                                  "null",
                                                  "true",
                                                  "false",
                                                  "-",
                                                  "0",
                                                  "-1",
                                                  "1e308",
                                                  "1e999",
                                                  "-1e999",
                                                  "18446744073709551616",
                                                  "9223372036854775808",
                                                  "-9223372036854775809",
                                                  "4294967296",
                                                  "2147483648",
                                                  "1.5",
                                                  "5e-324",
                                                  "\\u0000",
                                                  "\\ud800",
                                                  "\\udc00",
                                                  "\\\"",
                                                  "\"schema_version\": 1,",
                                                  "\"measurements\": [],",
                                                  "\"size\": -1,",
                                                  "NaN",
                                                  "Infinity",
                                                  "\xEF\xBB\xBF",
                                                  "\xC3\x28",
                                                  "\xF0\x9F\x98\x80",
                                                  "\t",
                                                  "\r\n",
                                                  "/*",
                                                  "//"};
  return tokens;
}

std::vector<json> extreme_numbers() {
  return {json(0), json(-1), json(1), json(3), json(1e308), json(-1e308),
          json(std::numeric_limits<double>::max()),
          json(5e-324),  // the smallest denormal
          json(-5e-324),
          json(2.2250738585072009e-308),  // the largest denormal
          json(-0.0), json(0.5), json(1.5), json(2.5e9), json(-2.5e9), json(1e19),
          json(9.2233720368547758e18),  // 2^63 as a double
          json(-9.3e18), json(std::numeric_limits<int64_t>::max()),
          json(std::numeric_limits<int64_t>::min()), json(std::numeric_limits<uint64_t>::max()),
          json(uint64_t(1) << 63), json(int64_t(2147483647)), json(int64_t(2147483648)),
          json(int64_t(-2147483649)), json(int64_t(4294967295)), json(int64_t(4294967296)),
          json(int64_t(1) << 53), json(int64_t(1) << 62),
          // The loader's bounds (session_json.cpp) and just past them: the largest values that
          // load are the ones that test the sums made from them.
          json(int64_t(1) << 40), json((int64_t(1) << 40) + 1), json(3600e6), json(3600e6 + 1),
          json(int64_t(1) << 30), json((int64_t(1) << 30) + 1), json(int64_t(3600) * 1000000000),
          json(int64_t(3600) * 1000000000 + 1)};
}

std::string long_string(std::mt19937_64& rng) {
  const size_t length = size_t(1) << (6 + below(rng, 12));  // 64 B to 128 KiB
  std::string s(length, 'A');
  if (chance(rng, 30)) s[below(rng, length)] = '\n';
  return s;
}

std::vector<std::string> odd_strings() {
  return {"",
          "x",
          "cold",
          "warm",
          "fp32",
          "bf16",
          "fp16",
          "measured",
          "pending",
          "not_measured",
          "unavailable",
          "failed",
          "cupti_activity",
          "cuda_events",
          "gelu_scale",
          "residual_layernorm",
          "ffn",
          "no_such_lesson",
          "9.0",
          "8.6",
          "99999999999999999999.0",
          "-1.-1",
          "9",
          "9.0.0",
          ".",
          "2147483648.2147483648",
          "0x9.0",
          " 9 . 0",
          "1e308",
          "-1",
          "a\nb",
          "tab\there",
          std::string("nul\0byte", 8),
          "\xC3\xA9\xE6\xBC\xA2",
          "2026-11-22T00:05:40Z",
          "fusionlab-session",
          "live",
          "recorded"};
}

json odd_value(std::mt19937_64& rng) {
  switch (below(rng, 6)) {
    case 0:
      return nullptr;
    case 1:
      return chance(rng, 50);
    case 2:
      return pick(rng, extreme_numbers());
    case 3:
      return chance(rng, 20) ? json(long_string(rng)) : json(pick(rng, odd_strings()));
    case 4:
      return chance(rng, 50) ? json::array() : json::array({pick(rng, extreme_numbers()), nullptr});
    default:
      return chance(rng, 50) ? json::object() : json{{"median", 1}, {"unexpected", "key"}};
  }
}

// The same value as another JSON type: number <-> string <-> array <-> object <-> null <-> bool.
json other_type(const json& v, std::mt19937_64& rng) {
  for (;;) {
    json out;
    switch (below(rng, 6)) {
      case 0:
        out = nullptr;
        break;
      case 1:
        out = v.is_boolean() ? !v.get<bool>() : chance(rng, 50);
        break;
      case 2:
        if (v.is_string()) {
          const json parsed = json::parse(v.get<std::string>(), nullptr, false);
          out = parsed.is_number() ? parsed : json(0);
        } else {
          out = pick(rng, extreme_numbers());
        }
        break;
      case 3:
        out = v.is_string() ? json(v.get<std::string>() + "x") : json(v.dump());
        break;
      case 4:
        out = json::array({v});
        break;
      default:
        out = json{{"value", v}};
        break;
    }
    if (out.type() != v.type() || v.is_boolean()) return out;
  }
}

// One node of the document: its value, its JSON pointer, and where it sits in its parent.
struct Node {
  json* value;
  std::string pointer;
  json* parent;
  std::string key;  // in an object parent
  size_t index;     // in an array parent
};

void collect(json* j, const std::string& pointer, json* parent, const std::string& key,
             size_t index, std::vector<Node>* out) {
  out->push_back({j, pointer, parent, key, index});
  if (j->is_object()) {
    for (auto& item : j->items()) {
      collect(&item.value(), pointer + "/" + item.key(), j, item.key(), 0, out);
    }
  } else if (j->is_array()) {
    for (size_t i = 0; i < j->size(); ++i) {
      collect(&(*j)[i], pointer + "/" + std::to_string(i), j, "", i, out);
    }
  }
}

// The fields the loader and everything after it read most carefully, so a mutation aims at one
// of them half of the time rather than at whatever node a uniform draw lands on.
const std::vector<std::string>& interesting_keys() {
  static const std::vector<std::string> keys = {"schema_version",
                                                "format",
                                                "measurements",
                                                "device",
                                                "compute_capability",
                                                "sm_count",
                                                "l2_bytes",
                                                "copy_bandwidth",
                                                "bytes",
                                                "lesson",
                                                "size",
                                                "inner",
                                                "level",
                                                "precision",
                                                "cache",
                                                "repetitions",
                                                "chain_time_us",
                                                "median",
                                                "count",
                                                "check",
                                                "passed",
                                                "launches",
                                                "textbook_bytes_read",
                                                "textbook_bytes_written",
                                                "textbook_flops",
                                                "time_us",
                                                "counters",
                                                "dram_read_bytes",
                                                "l2_bytes",
                                                "counters_status",
                                                "records",
                                                "launch",
                                                "start_ns",
                                                "end_ns",
                                                "start_rel_ns",
                                                "end_rel_ns",
                                                "stream",
                                                "correlation",
                                                "grid",
                                                "block",
                                                "registers_per_thread",
                                                "created_utc",
                                                "kernel"};
  return keys;
}

// One edit of the document. What it does depends on the node's type and is mostly one that
// keeps the file loadable (a number stays a number, an array an array), so that many mutants
// get past the loader and reach replay and export with odd values (about one in seven does; the
// loader refuses most extreme numbers); the rest delete, retype or transplant nodes, which the
// loader must refuse cleanly.
void mutate_structure(json* doc, std::mt19937_64& rng, std::string* log) {
  std::vector<Node> nodes;
  collect(doc, "", nullptr, "", 0, &nodes);
  const Node* target = &nodes[below(rng, nodes.size())];
  if (chance(rng, 60)) {
    const std::string& key = pick(rng, interesting_keys());
    std::vector<const Node*> named;
    for (const Node& n : nodes) {
      if (n.parent != nullptr && n.parent->is_object() && n.key == key) named.push_back(&n);
    }
    if (!named.empty()) target = named[below(rng, named.size())];
  }
  json& v = *target->value;
  const std::string where = target->pointer.empty() ? "/" : target->pointer;
  const unsigned roll = static_cast<unsigned>(below(rng, 100));
  if (roll < 8 && target->parent != nullptr) {  // delete
    *log += "delete " + where + "; ";
    if (target->parent->is_object()) {
      target->parent->erase(target->key);
    } else {
      target->parent->erase(target->index);
    }
    return;
  }
  if (roll < 16) {  // the same value as another type
    *log += "retype " + where + "; ";
    v = other_type(v, rng);
    return;
  }
  if (roll < 22) {  // copy another node's value here
    const Node& from = nodes[below(rng, nodes.size())];
    *log += "copy " + (from.pointer.empty() ? "/" : from.pointer) + " to " + where + "; ";
    json copy = *from.value;
    v = std::move(copy);
    return;
  }
  if (v.is_number()) {
    *log += "extreme " + where + "; ";
    v = pick(rng, extreme_numbers());
  } else if (v.is_string()) {
    *log += "string " + where + "; ";
    v = chance(rng, 25) ? json(long_string(rng)) : json(pick(rng, odd_strings()));
  } else if (v.is_boolean()) {
    *log += "flip " + where + "; ";
    v = !v.get<bool>();
  } else if (v.is_array()) {
    const size_t n = v.size();
    switch (below(rng, 4)) {
      case 0:
        *log += "empty " + where + "; ";
        v = json::array();
        break;
      case 1:
        *log += "repeat " + where + "; ";
        for (size_t i = 0; i < n && i < 64; ++i) v.push_back(json(v[i]));
        break;
      case 2:
        if (n > 0) {
          *log += "drop one of " + where + "; ";
          v.erase(below(rng, n));
        }
        break;
      default:
        *log += "reverse " + where + "; ";
        std::reverse(v.begin(), v.end());
        break;
    }
  } else if (v.is_object()) {
    // Repeated in its array (a point recorded twice), an unknown key, or a key renamed.
    if (target->parent != nullptr && target->parent->is_array() && chance(rng, 60)) {
      *log += "repeat element " + where + "; ";
      target->parent->push_back(json(v));
    } else if (!v.empty() && chance(rng, 30)) {
      auto it = v.begin();
      std::advance(it, static_cast<long>(below(rng, v.size())));
      const std::string key = it.key();
      *log += "rename " + where + "/" + key + "; ";
      json moved = std::move(it.value());
      v.erase(key);
      v[key + "_"] = std::move(moved);
    } else {
      *log += "add key to " + where + "; ";
      v["unexpected_" + std::to_string(below(rng, 4))] = odd_value(rng);
    }
  } else {
    *log += "odd value at " + where + "; ";
    v = odd_value(rng);
  }
}

// ---- one mutant -----------------------------------------------------------------------------

struct Mutant {
  std::string text;
  std::string log;  // what was done, for a failure message
};

Mutant make_mutant(const Seed& seed, const json& parsed, std::mt19937_64& rng) {
  Mutant m;
  const bool structural = parsed.is_object() && chance(rng, 75);
  json doc = parsed;
  // The shipped files hold dozens of measurements; most mutants keep a few of them, so a mutant
  // is small and quick and the edits land on what remains.
  if (doc.is_object() && doc.contains("measurements") && doc["measurements"].is_array() &&
      doc["measurements"].size() > 3 && (structural || chance(rng, 50))) {
    json& all = doc["measurements"];
    json kept = json::array();
    const size_t keep = 1 + below(rng, 3);
    const size_t first = below(rng, all.size());
    for (size_t k = 0; k < keep; ++k) {
      kept.push_back(all[(first + k * (1 + below(rng, 5))) % all.size()]);
    }
    all = std::move(kept);
    m.log += "keep " + std::to_string(keep) + " measurements from #" + std::to_string(first) + "; ";
    if (doc["device"].is_object() && doc["device"]["copy_bandwidth"].is_array() &&
        doc["device"]["copy_bandwidth"].size() > 4) {
      json& copies = doc["device"]["copy_bandwidth"];
      copies.erase(copies.begin() + 4, copies.end());
    }
  }
  if (structural) {
    // Mostly one edit: each edit is another chance to be refused, and what loads goes further.
    const size_t edits = chance(rng, 50) ? 1 : chance(rng, 60) ? 2 : 3;
    for (size_t k = 0; k < edits; ++k) mutate_structure(&doc, rng, &m.log);
    m.text = doc.dump(chance(rng, 50) ? -1 : 2, ' ', false, json::error_handler_t::replace);
    if (chance(rng, 10)) fuzz::mutate_bytes(&m.text, rng, json_dictionary(), &m.log);
    return m;
  }
  const bool whole = !chance(rng, 50) || m.log.empty();
  m.text = whole ? seed.text : doc.dump(2);
  if (!whole) m.log += "dump; ";
  const size_t edits = 1 + below(rng, 3);
  for (size_t k = 0; k < edits; ++k) fuzz::mutate_bytes(&m.text, rng, json_dictionary(), &m.log);
  return m;
}

// ---- what a loaded recording goes through ---------------------------------------------------

using Problems = std::vector<std::string>;

bool one_line(const std::string& message) {
  return !message.empty() && message.find('\n') == std::string::npos;
}

// A refusal or an error: one line that says something.
void check_message(const Status& st, const std::string& what, Problems* problems) {
  if (!st.ok() && !one_line(st.message())) {
    problems->push_back(what + " failed with an empty or multi-line message: '" + st.message() +
                        "'");
  }
}

bool plain_text(const std::string& text) {
  return std::none_of(text.begin(), text.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
}

bool plain_times(const Stats& t) {
  for (double us : {t.median, t.min, t.max, t.p20, t.p80}) {
    if (!(us >= 0 && us <= 3600e6)) return false;
  }
  return true;
}

bool plain_bytes(int64_t bytes) {
  return bytes >= 0 && bytes <= (int64_t(1) << 40);
}

// A launch's phase timeline as the loader promises it (docs/SESSION_FORMAT.md, "Phases"): at
// most LaunchPhases::kMaxRecords records and kMaxNames plain names, every record naming a
// declared phase, ending no earlier than it starts, within an hour of the launch's first stamp.
void check_loaded_phases(const LaunchPhases& p, int version, const std::string& where,
                         Problems* problems) {
  if (version < 3)
    problems->push_back(where + "a version-" + std::to_string(version) +
                        " launch came back with phases");
  if (p.records.size() > LaunchPhases::kMaxRecords || p.names.size() > LaunchPhases::kMaxNames)
    problems->push_back(where + "more phase records or names than the bounds");
  for (const std::string& name : p.names) {
    if (!plain_text(name)) problems->push_back(where + "a phase name holds a control character");
  }
  if (p.lost < 0 || !(p.time_on_us >= 0 && p.time_on_us <= 3600e6) ||
      !(p.time_off_us >= 0 && p.time_off_us <= 3600e6)) {
    problems->push_back(where + "a phase timeline's count or time out of bounds");
  }
  for (const PhaseRecord& r : p.records) {
    if (r.phase >= p.names.size() || r.end_ns < r.start_ns ||
        r.end_ns > uint64_t(3600) * 1000000000) {
      problems->push_back(where + "a phase record out of bounds");
    }
  }
}

// What the loader promises about a session it accepted: docs/SESSION_FORMAT.md (version 1 has
// no counters, records or copy bandwidths; records name launches that exist) and the bounds in
// session_json.cpp that keep what the app adds up inside int64 (bytes of a launch up to 1 TiB,
// times and a repetition's records within an hour, stream ids up to 2^30, no control characters
// in names).
void check_loaded(const Session& s, int version, Problems* problems) {
  if (version == 1 && !s.device.copy_bandwidth.empty()) {
    problems->push_back("a version-1 session came back with copy bandwidths");
  }
  if (!plain_text(s.device.name) || !plain_text(s.app_version) || !plain_text(s.created_utc) ||
      !plain_text(s.backend)) {
    problems->push_back("a name of the session holds a control character");
  }
  for (size_t i = 0; i < s.measurements.size(); ++i) {
    const Measurement& m = s.measurements[i];
    const std::string where = "measurement " + std::to_string(i) + ": ";
    if (!plain_text(m.lesson) || !plain_text(m.level_name) || !plain_text(m.timing_method) ||
        !plain_text(m.counters_note)) {
      problems->push_back(where + "a name holds a control character");
    }
    if (!plain_times(m.chain_time_us)) problems->push_back(where + "a chain time out of bounds");
    for (const LaunchResult& l : m.launches) {
      const std::optional<LaunchCounters>& c = l.counters;
      if (!plain_bytes(l.textbook.bytes_read) || !plain_bytes(l.textbook.bytes_written) ||
          (c && (!plain_bytes(c->dram_read_bytes) || !plain_bytes(c->dram_write_bytes) ||
                 !plain_bytes(c->l2_bytes)))) {
        problems->push_back(where + "a launch's byte count out of bounds");
      }
      if (!plain_times(l.time_us)) problems->push_back(where + "a launch time out of bounds");
      if (!plain_text(l.textbook.kernel)) {
        problems->push_back(where + "a kernel name holds a control character");
      }
      if (l.phases) check_loaded_phases(*l.phases, version, where, problems);
    }
    uint64_t first_start = std::numeric_limits<uint64_t>::max();
    for (const KernelRecord& r : m.records) first_start = std::min(first_start, r.start_ns);
    for (const KernelRecord& r : m.records) {
      if (r.launch < 0 || r.launch >= static_cast<int>(m.launches.size())) {
        problems->push_back(where + "a record names launch " + std::to_string(r.launch) + " of " +
                            std::to_string(m.launches.size()));
      }
      if (r.end_ns < r.start_ns || r.end_ns - first_start > uint64_t(3600) * 1000000000 ||
          r.start_rel_ns < 0 || r.end_rel_ns < r.start_rel_ns ||
          r.end_rel_ns > int64_t(3600) * 1000000000 || r.stream_id > (uint32_t(1) << 30) ||
          !plain_text(r.kernel)) {
        problems->push_back(where + "a record out of bounds");
      }
    }
    if (version == 1) {
      if (m.counters_status != CountersStatus::not_measured || !m.records.empty()) {
        problems->push_back(where + "a version-1 measurement came back with counters or records");
      }
      for (const LaunchResult& l : m.launches) {
        if (l.counters) problems->push_back(where + "a version-1 launch came back with counters");
      }
    }
  }
}

// Saving a loaded session and reading it back gives the same session.
void check_round_trip(const Session& s, Problems* problems) {
  std::string saved;
  try {
    saved = session_to_json(s);
  } catch (const std::exception& e) {
    problems->push_back(std::string("session_to_json threw: ") + e.what());
    return;
  }
  Session again;
  const Status st = session_from_json(saved, &again);
  if (!st.ok()) {
    problems->push_back("the session saved again does not load: " + st.message());
    return;
  }
  if (session_to_json(again) != saved) {
    problems->push_back("the session saved again reads back different");
  }
}

// Asks the replay backend what the window (sizes, levels, the nearest recorded size, refusals)
// and the compare overlay (every recorded point) ask, and checks what it promises.
void check_replay(const Session& s, const Session& seed_session, std::mt19937_64& rng,
                  Problems* problems) {
  std::unique_ptr<ReplayBackend> backend;
  const Status created = ReplayBackend::create({{"mutant.json", s}}, &backend);
  check_message(created, "ReplayBackend::create", problems);
  if (created.ok() == s.measurements.empty()) {
    problems->push_back(std::string("ReplayBackend::create ") +
                        (created.ok()
                             ? "accepted a recording with no measurements"
                             : "refused a recording with measurements: " + created.message()));
  }
  if (!created.ok()) return;

  const RecordingSummary& summary = backend->summary();
  (void)summary.date_text();
  (void)backend->device();
  const CancelCheck never = [] { return false; };
  for (const RecordedSeries& series : summary.series) {
    if (!std::is_sorted(series.sizes.begin(), series.sizes.end()) ||
        std::adjacent_find(series.sizes.begin(), series.sizes.end()) != series.sizes.end()) {
      problems->push_back("a series' recorded sizes are not ascending and distinct");
    }
    if (series.inner != 0 && backend->recorded_sizes(series.lesson, series.precision, series.cache,
                                                     series.inner) != series.sizes) {
      problems->push_back("recorded_sizes() disagrees with the summary for " + series.lesson);
    }
    (void)summary.find(series.lesson, series.precision, series.cache);
    (void)backend->recorded_sizes(series.lesson, series.precision, series.cache);

    // A handful of sizes per series: recorded ones, between them, and absurd ones.
    std::vector<int64_t> sizes;
    for (size_t k = 0; k < series.sizes.size() && k < 6; ++k) {
      sizes.push_back(pick(rng, series.sizes));
    }
    for (int64_t odd : {int64_t(0), int64_t(-5), int64_t(1), std::numeric_limits<int64_t>::max(),
                        std::numeric_limits<int64_t>::min()}) {
      if (chance(rng, 30)) sizes.push_back(odd);
    }
    if (!series.sizes.empty()) sizes.push_back(series.sizes.back() / 2 + 1);
    for (int64_t size : sizes) {
      (void)nearest_recorded_size(series.sizes, size);
      std::vector<std::vector<int>> level_sets = {series.levels, {}};
      if (!series.levels.empty()) level_sets.push_back({pick(rng, series.levels)});
      if (chance(rng, 20)) level_sets.push_back({-1, std::numeric_limits<int>::max()});
      for (const std::vector<int>& levels : level_sets) {
        MeasureRequest request;
        request.lesson = series.lesson;
        request.size = size;
        request.levels = levels;
        request.precision = series.precision;
        request.cache = series.cache;
        request.inner = chance(rng, 80) ? series.inner : 0;
        std::vector<Measurement> out;
        const Status st = backend->measure(request, never, &out);
        check_message(st, "measure", problems);
        if (!st.ok()) continue;
        for (size_t i = 0; i < out.size(); ++i) {
          const Measurement& m = out[i];
          if (m.lesson != request.lesson || m.precision != request.precision ||
              m.cache != request.cache || m.size != out.front().size ||
              (!levels.empty() &&
               std::find(levels.begin(), levels.end(), m.level) == levels.end()) ||
              (i > 0 && m.level < out[i - 1].level)) {
            problems->push_back("measure() answered " + series.lesson + " at size " +
                                std::to_string(size) + " with a measurement it was not asked for");
            break;
          }
        }
        // The series it serves (request.inner 0: the lesson's default row length).
        const RecordedSeries* served =
            summary.find(request.lesson, request.precision, request.cache, request.inner);
        if (!out.empty() &&
            (served == nullptr || out.front().inner != served->inner ||
             !std::binary_search(served->sizes.begin(), served->sizes.end(), out.front().size))) {
          problems->push_back("measure() answered with a point that is not recorded");
        }
      }
    }
  }
  // What the window asks first, and a cancelled request (Ok, nothing).
  MeasureRequest first;
  first.lesson = chance(rng, 50) ? "gelu_scale" : "residual_layernorm";
  first.size = int64_t(1) << 20;
  std::vector<Measurement> out;
  check_message(backend->measure(first, never, &out), "measure", problems);
  out.clear();
  const Status cancelled = backend->measure(
      first, [] { return true; }, &out);
  if (!cancelled.ok() || !out.empty()) {
    problems->push_back("a cancelled measure() did not return Ok and nothing");
  }
  check_message(backend->measure_counters(first, never, &out), "measure_counters", problems);

  // Merged with the seed's own recording (one GPU, or refused with one line).
  std::unique_ptr<ReplayBackend> merged;
  check_message(ReplayBackend::create({{"seed.json", seed_session}, {"mutant.json", s}}, &merged),
                "ReplayBackend::create of two recordings", problems);
}

// The exports and the numbers the views derive from a measurement.
void check_exports(const Session& s, Problems* problems) {
  const std::string trace = chrome_trace_json(s);
  const json parsed = json::parse(trace, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("traceEvents") ||
      !parsed["traceEvents"].is_array()) {
    problems->push_back("chrome_trace_json() wrote something that is not a trace");
  }
  const std::string csv = measurements_csv(s);
  if (csv.rfind(measurements_csv_header() + "\n", 0) != 0) {
    problems->push_back("measurements_csv() does not start with its header");
  }
  for (const Measurement& m : s.measurements) {
    (void)m.textbook_bytes();
    (void)m.counters_total();
    (void)m.achieved_gbps();
    (void)speedup(s.measurements.front(), m);
  }
}

// Everything one mutant goes through; the problems found, empty when it behaved.
// `loaded` says whether the loader accepted it.
Problems check_mutant(const std::string& text, const Session& seed_session, std::mt19937_64& rng,
                      bool* loaded) {
  Problems problems;
  *loaded = false;
  Session s;
  Status st;
  try {
    st = session_from_json(text, &s);
  } catch (const std::exception& e) {
    problems.push_back(std::string("session_from_json threw: ") + e.what());
    return problems;
  } catch (...) {
    problems.push_back("session_from_json threw something");
    return problems;
  }
  if (!st.ok()) {
    if (!one_line(st.message())) {
      problems.push_back("refused with an empty or multi-line message: '" + st.message() + "'");
    }
    return problems;
  }
  *loaded = true;
  // The version the loader saw (a whole number, possibly written as 2.0).
  const json doc = json::parse(text, nullptr, false);
  const json version_field =
      doc.is_object() && doc.contains("schema_version") ? doc["schema_version"] : json();
  const double written = version_field.is_number() ? version_field.get<double>() : 0.0;
  const int version = written == 1.0 ? 1 : written == 2.0 ? 2 : written == 3.0 ? 3 : 0;
  if (version == 0) {
    problems.push_back("loaded a session whose schema_version is not 1, 2 or 3: " +
                       (doc.is_object() && doc.contains("schema_version")
                            ? doc["schema_version"].dump()
                            : std::string("(none)")));
  }
  try {
    check_loaded(s, version, &problems);
    check_round_trip(s, &problems);
    check_replay(s, seed_session, rng, &problems);
    check_exports(s, &problems);
  } catch (const std::exception& e) {
    problems.push_back(std::string("a loaded session made something throw: ") + e.what());
  }
  return problems;
}

// A refusal from a file names the file (load_session, as --replay and export-* read).
Problems check_file(const std::string& text, const fs::path& path) {
  Problems problems;
  if (!fuzz::write_file(path, text)) return {"cannot write " + path.string()};
  Session from_file, from_text;
  const Status st = load_session(path.string(), &from_file);
  const Status direct = session_from_json(text, &from_text);
  if (st.ok() != direct.ok()) problems.push_back("load_session and session_from_json disagree");
  if (!st.ok() && (st.message().rfind(path.string() + ": ", 0) != 0 || !one_line(st.message()))) {
    problems.push_back("load_session's refusal does not name the file on one line: " +
                       st.message());
  }
  return problems;
}

// ---- the test -------------------------------------------------------------------------------

TEST(SessionFuzz, MutantsAreRefusedWithOneLineOrSurviveReplayExportAndRoundTrip) {
  const std::vector<Seed> seeds = all_seeds();
  ASSERT_GE(seeds.size(), 12u + 5u)
      << "the shipped recording was not found under " FUSIONLAB_SOURCE_DIR;
  const int iterations = fuzz::iterations_per_seed(kDefaultIterations);
  const fs::path scratch = fs::path(FUSIONLAB_FUZZ_WORK_DIR) / "session_file.json";
  int failures = 0;
  int loaded = 0, refused = 0;
  for (const Seed& seed : seeds) {
    // Every seed loads: they are good recordings.
    Session seed_session;
    const Status seed_status = session_from_json(seed.text, &seed_session);
    ASSERT_TRUE(seed_status.ok()) << seed.name << ": " << seed_status.message();
    std::mt19937_64 seed_rng(1);
    bool seed_loaded = false;
    const Problems seed_problems = check_mutant(seed.text, seed_session, seed_rng, &seed_loaded);
    ASSERT_TRUE(seed_problems.empty())
        << seed.name << " fails the checks unmutated: " << seed_problems.front();
    const json parsed = json::parse(seed.text);

    for (int iteration = 0; iteration < iterations; ++iteration) {
      if (!fuzz::selected(seed.name, iteration)) continue;
      std::mt19937_64 rng(fuzz::stream_seed(seed.name, iteration));
      const Mutant mutant = make_mutant(seed, parsed, rng);
      const std::string file_name =
          "session-" + seed.name + "-" + std::to_string(iteration) + ".json";
      fuzz::arm("session_fuzz", seed.name, iteration, file_name, mutant.text);
      bool mutant_loaded = false;
      Problems problems = check_mutant(mutant.text, seed_session, rng, &mutant_loaded);
      if (iteration % 16 == 0) {
        for (std::string& p : check_file(mutant.text, scratch)) problems.push_back(std::move(p));
      }
      fuzz::disarm();
      (mutant_loaded ? loaded : refused) += 1;
      if (problems.empty()) continue;
      std::string all;
      for (const std::string& p : problems) all += "\n  - " + fuzz::excerpt(p, 400);
      ADD_FAILURE() << "seed " << seed.name << " iteration " << iteration
                    << " (rerun alone with FL_FUZZ_ONLY=" << seed.name << ":" << iteration
                    << ")\n  mutations: " << mutant.log << all << "\n  mutant saved to "
                    << fuzz::save_failure(file_name, mutant.text) << "\n  mutant begins:\n"
                    << fuzz::excerpt(mutant.text);
      if (++failures >= 10) FAIL() << "stopping after 10 failing mutants";
    }
  }
  std::error_code ec;
  fs::remove(scratch, ec);
  std::printf("session fuzz: %zu seeds x %d iterations: %d mutants loaded, %d refused\n",
              seeds.size(), iterations, loaded, refused);
}

// The mutants behind the loader's fixes (session_json.cpp), cut down to one edit of a small
// session: each was accepted, crashed the sanitizers or broke the one-line rule before them.
TEST(SessionFuzz, BugsFoundByFuzzingStayFixed) {
  const json good = json::parse(hand_made_seeds().front().text);
  const auto refused = [&](const char* what, const std::function<void(json&)>& edit) {
    json j = good;
    edit(j);
    Session s;
    const Status st = session_from_json(j.dump(), &s);
    EXPECT_FALSE(st.ok()) << what << " was accepted";
    EXPECT_TRUE(one_line(st.message())) << what << ": " << st.message();
    EXPECT_LT(st.message().size(), 200u) << what << ": " << st.message();
  };
  // Undefined behaviour in nlohmann's get<int>() (a double out of int's range).
  refused("count 1e300", [](json& j) { j["measurements"][0]["chain_time_us"]["count"] = 1e300; });
  refused("level -1e308", [](json& j) { j["measurements"][0]["level"] = -1e308; });
  // Wrapped silently to a supported version, or to a huge timestamp.
  refused("schema_version 2^32 + 2", [](json& j) { j["schema_version"] = int64_t(4294967298); });
  refused("start_ns -1", [](json& j) { j["measurements"][0]["records"][0]["start_ns"] = -1; });
  refused("repetitions 2.5", [](json& j) { j["measurements"][0]["repetitions"] = 2.5; });
  // Signed overflow downstream: LaunchTraffic::bytes(), Measurement::textbook_bytes(),
  // counters_total(), and the trace export's stream track and rebased timeline.
  refused("textbook bytes 2^63 - 1", [](json& j) {
    j["measurements"][0]["launches"][0]["textbook_bytes_read"] =
        std::numeric_limits<int64_t>::max();
  });
  refused("dram bytes -1",
          [](json& j) { j["measurements"][0]["launches"][0]["counters"]["dram_read_bytes"] = -1; });
  refused("stream 2^31 - 1",
          [](json& j) { j["measurements"][0]["records"][0]["stream"] = 2147483647; });
  refused("records 2^63 ns apart", [](json& j) {
    j["measurements"][0]["records"][1]["start_ns"] = uint64_t(1) << 63;
    j["measurements"][0]["records"][1]["end_ns"] = uint64_t(1) << 63;
  });
  refused("a record ending before it starts",
          [](json& j) { j["measurements"][0]["records"][0]["end_ns"] = 5; });
  refused("a median of 9e15 us",
          [](json& j) { j["measurements"][0]["launches"][0]["time_us"]["median"] = 9e15; });
  // Messages that were not one line: a newline in a name, a 128 KiB value.
  refused("a newline in the device name",
          [](json& j) { j["device"]["name"] = "NVIDIA H200\nsecond line"; });
  refused("a newline in a lesson", [](json& j) { j["measurements"][0]["lesson"] = "gelu\nscale"; });
  refused("a long compute capability",
          [](json& j) { j["device"]["compute_capability"] = std::string(1 << 17, 'A'); });
  // Not arrays, once loaded as no measurements or as the values of an object.
  refused("measurements null", [](json& j) { j["measurements"] = nullptr; });
  refused("measurements an object", [&](json& j) {
    j["measurements"] = {{"a", good["measurements"][0]}};
  });
  refused("records a number", [](json& j) { j["measurements"][0]["records"] = 5; });
  // sscanf("%d") past int's range is undefined.
  refused("compute capability 99999999999.0",
          [](json& j) { j["device"]["compute_capability"] = "99999999999.0"; });

  // At the bounds, a session loads and everything after the loader takes it.
  json edge = good;
  for (json& me : edge["measurements"]) {
    for (json& l : me["launches"]) {
      l["textbook_bytes_read"] = int64_t(1) << 40;
      l["textbook_bytes_written"] = int64_t(1) << 40;
      l["time_us"]["median"] = 3600e6;
      if (l["counters"].is_object()) l["counters"]["l2_bytes"] = int64_t(1) << 40;
    }
    me["chain_time_us"]["max"] = 3600e6;
    for (json& r : me["records"]) {
      r["stream"] = uint32_t(1) << 30;
      r["start_ns"] = 0;
      r["end_ns"] = uint64_t(3600) * 1000000000;
      r["start_rel_ns"] = 0;
      r["end_rel_ns"] = int64_t(3600) * 1000000000;
    }
  }
  Session seed_session;
  ASSERT_TRUE(session_from_json(good.dump(), &seed_session).ok());
  std::mt19937_64 rng(7);
  bool loaded = false;
  const Problems problems = check_mutant(edge.dump(), seed_session, rng, &loaded);
  EXPECT_TRUE(loaded) << "a session at the bounds was refused";
  for (const std::string& p : problems) ADD_FAILURE() << "at the bounds: " << p;
}

}  // namespace
}  // namespace fl
