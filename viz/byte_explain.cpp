// Why a launch's measured bytes differ from its textbook bytes (byte_explain.h).
#include "viz/byte_explain.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "model/file_io.h"
#include "viz/tensor_homes.h"
#include "viz/view_util.h"

namespace fl::viz {

namespace {

using json = nlohmann::json;

const char* const kTests[] = {"reads_resident",      "writes_fit_in_l2", "kept_value_moved",
                              "pending_dirty_lines", "tiled_kernel",     "l2_requests_fills_floor"};

bool known_test(const std::string& name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

Status text_field(const json& rule, const std::string& path, const char* name, std::string* out) {
  if (!rule.contains(name) || !rule[name].is_string() || rule[name].get<std::string>().empty()) {
    return Status::Error(path + "." + name + ": must be a non-empty string");
  }
  *out = rule[name].get<std::string>();
  return Status::Ok();
}

Status parse_rule(const json& r, const std::string& path, ByteRule* rule) {
  if (!r.is_object()) return Status::Error(path + ": must be an object");
  FL_TRY(text_field(r, path, "id", &rule->id));
  FL_TRY(text_field(r, path, "counter", &rule->counter));
  FL_TRY(text_field(r, path, "direction", &rule->direction));
  FL_TRY(text_field(r, path, "says", &rule->says));
  if (rule->counter != "dram_read" && rule->counter != "dram_write" && rule->counter != "l2") {
    return Status::Error(path + ".counter: must be dram_read, dram_write or l2, not '" +
                         rule->counter + "'");
  }
  if (rule->direction != "above" && rule->direction != "below") {
    return Status::Error(path + ".direction: must be above or below, not '" + rule->direction +
                         "'");
  }
  if (!r.contains("tests") || !r["tests"].is_array()) {
    return Status::Error(path + ".tests: must be a list of test names");
  }
  for (size_t i = 0; i < r["tests"].size(); ++i) {
    const json& t = r["tests"][i];
    const std::string where = path + ".tests[" + std::to_string(i) + "]";
    if (!t.is_string()) return Status::Error(where + ": must be a test name");
    if (!known_test(t.get<std::string>())) {
      return Status::Error(where + ": unknown test '" + t.get<std::string>() +
                           "' (viz/byte_explain.h lists them)");
    }
    rule->tests.push_back(t.get<std::string>());
  }
  return Status::Ok();
}

}  // namespace

Status parse_byte_rules(const std::string& text, ByteRules* out) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return Status::Error("not valid JSON");
  if (!doc.is_object() || doc.value("format", "") != "fusionlab-byte-rules") {
    return Status::Error("not a byte-ratio rule table (no \"format\": \"fusionlab-byte-rules\")");
  }
  ByteRules rules;
  if (doc.contains("ratio")) {
    if (!doc["ratio"].is_number() || !(doc["ratio"].get<double>() > 1.0)) {
      return Status::Error("ratio: must be a number above 1");
    }
    rules.ratio = doc["ratio"].get<double>();
  }
  if (!doc.contains("rules") || !doc["rules"].is_array()) {
    return Status::Error("rules: must be a list");
  }
  for (size_t i = 0; i < doc["rules"].size(); ++i) {
    ByteRule rule;
    FL_TRY(parse_rule(doc["rules"][i], "rules[" + std::to_string(i) + "]", &rule));
    rules.rules.push_back(std::move(rule));
  }
  *out = std::move(rules);
  return Status::Ok();
}

Status load_byte_rules(const std::string& path, ByteRules* out) {
  std::string text;
  FL_TRY(read_file_checked(path, 1 << 20, "byte-ratio rule table", &text));
  const Status st = parse_byte_rules(text, out);
  return st.ok() ? st : Status::Error(path + ": " + st.message());
}

double l2_floor(const std::vector<Measurement>& ms) {
  double floor = std::numeric_limits<double>::infinity();
  for (const Measurement& m : ms) {
    for (const LaunchResult& l : m.launches) {
      if (l.counters) floor = std::min(floor, static_cast<double>(l.counters->l2_bytes));
    }
  }
  return std::isinf(floor) ? 0.0 : floor;
}

namespace {

// The numbers one launch's rules read, and the fields of their sentences.
struct LaunchView {
  const Measurement* m = nullptr;
  size_t k = 0;
  const ByteFacts* facts = nullptr;
  const TensorHomes* homes = nullptr;
  double ratio = 1.5;
  double measured = 0, textbook = 0;
  std::string tensor;
  double tensor_bytes = 0, pending = 0;

  const LaunchResult& launch() const { return m->launches[k]; }
  double tb_read() const { return static_cast<double>(launch().textbook.bytes_read); }
  double tb_write() const { return static_cast<double>(launch().textbook.bytes_written); }
  double dram_read() const { return static_cast<double>(launch().counters->dram_read_bytes); }
  double dram_write() const { return static_cast<double>(launch().counters->dram_write_bytes); }
  double l2() const { return static_cast<double>(launch().counters->l2_bytes); }
};

// Earlier launches' textbook writes that DRAM had not seen by the time this launch ran.
double pending_dirty(const Measurement& m, size_t k) {
  double pending = 0;
  for (size_t j = 0; j < k; ++j) {
    const LaunchResult& l = m.launches[j];
    if (!l.counters) continue;
    pending += static_cast<double>(l.textbook.bytes_written) -
               static_cast<double>(l.counters->dram_write_bytes);
  }
  return std::max(pending, 0.0);
}

bool holds(const std::string& test, LaunchView* v) {
  const double cap = v->facts->l2_capacity;
  if (test == "reads_resident") {
    if (!(cap > 0)) return false;
    if (v->m->cache == CacheMode::warm && v->tb_read() <= cap) return true;
    return v->k > 0 && static_cast<double>(v->m->launches[v->k - 1].textbook.bytes_written) <= cap;
  }
  if (test == "writes_fit_in_l2") return cap > 0 && v->tb_write() <= cap;
  if (test == "kept_value_moved") {
    for (const TensorPlace& t : v->homes->tensors) {
      if (t.intermediate || !t.moved() || t.launch != static_cast<int>(v->k)) continue;
      v->tensor = t.name;
      v->tensor_bytes = t.bytes;
      return true;
    }
    return false;
  }
  if (test == "pending_dirty_lines") {
    v->pending = pending_dirty(*v->m, v->k);
    return v->pending > 0 && v->dram_write() <= v->ratio * (v->tb_write() + v->pending);
  }
  if (test == "tiled_kernel") {
    const std::string& k = v->launch().textbook.kernel;
    for (const char* part : {"gemm", "ffn", "linear", "flash", "attention"}) {
      if (k.find(part) != std::string::npos) return true;
    }
    return false;
  }
  if (test == "l2_requests_fills_floor") {
    const double expected = v->tb_read() + v->tb_write() + v->dram_read() + v->facts->l2_floor;
    return v->facts->l2_floor > 0 && v->l2() <= v->ratio * expected &&
           v->l2() * v->ratio >= expected;
  }
  return false;
}

std::string filled(std::string says, const LaunchView& v) {
  const std::pair<const char*, std::string> fields[] = {
      {"{measured}", format_byte_count(v.measured)},
      {"{textbook}", format_byte_count(v.textbook)},
      {"{l2_capacity}", format_byte_count(v.facts->l2_capacity)},
      {"{pending}", format_byte_count(v.pending)},
      {"{tensor}", v.tensor},
      {"{tensor_bytes}", format_byte_count(v.tensor_bytes)},
      {"{dram_read}", format_byte_count(v.launch().counters ? v.dram_read() : 0.0)},
      {"{l2_floor}", format_byte_count(v.facts->l2_floor)}};
  for (const auto& [key, value] : fields) {
    for (size_t at = says.find(key); at != std::string::npos; at = says.find(key, at)) {
      says.replace(at, std::string(key).size(), value);
      at += value.size();
    }
  }
  return says;
}

}  // namespace

std::string ByteExplanation::line() const {
  const char* what = counter == "dram_read"    ? "DRAM reads"
                     : counter == "dram_write" ? "DRAM writes"
                                               : "L2 traffic";
  char ratio[64];
  const double r = textbook > 0 ? measured / textbook : 0;
  std::snprintf(ratio, sizeof(ratio), r >= 1 ? "%.1fx" : "%.2fx", r);
  return kernel + ": " + what + " " + format_byte_count(measured) + ", " + ratio +
         " the textbook " + format_byte_count(textbook) + ": " + sentence;
}

std::vector<ByteExplanation> explain_bytes(const ByteRules& rules, const Measurement& m,
                                           const ByteFacts& facts) {
  std::vector<ByteExplanation> out;
  const TensorHomes homes = tensor_homes(m, facts.lesson, facts.level0);
  for (size_t k = 0; k < m.launches.size(); ++k) {
    if (!m.launches[k].counters) continue;
    for (const char* counter : {"dram_read", "dram_write", "l2"}) {
      LaunchView v;
      v.m = &m;
      v.k = k;
      v.facts = &facts;
      v.homes = &homes;
      v.ratio = rules.ratio;
      const std::string c = counter;
      v.measured = c == "dram_read" ? v.dram_read() : c == "dram_write" ? v.dram_write() : v.l2();
      v.textbook = c == "dram_read"    ? v.tb_read()
                   : c == "dram_write" ? v.tb_write()
                                       : v.tb_read() + v.tb_write();
      if (!(v.textbook > 0)) continue;
      const double r = v.measured / v.textbook;
      const char* direction = r > rules.ratio ? "above" : r < 1.0 / rules.ratio ? "below" : "";
      if (*direction == '\0') continue;
      ByteExplanation e;
      e.launch = static_cast<int>(k);
      e.kernel = m.launches[k].textbook.kernel;
      e.counter = c;
      e.measured = v.measured;
      e.textbook = v.textbook;
      e.sentence = "unexplained";
      for (const ByteRule& rule : rules.rules) {
        if (rule.counter != c || rule.direction != direction) continue;
        bool all = true;
        for (const std::string& test : rule.tests) all = all && holds(test, &v);
        if (!all) continue;
        e.rule = rule.id;
        e.sentence = filled(rule.says, v);
        break;
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace fl::viz
