#include "app/measure/session_json.h"

#include "app/measure/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace fl {
namespace {

using nlohmann::json;

// A whole number (written 7 or 7.0) that fits in T, else the session is malformed; `name` is
// the field, for the message. nlohmann's get<int>() would cast a double such as 1e300 to int
// (undefined behaviour) and wrap 4294967298 to 2 or -1 to 2^64 - 1, so a damaged file could load
// with numbers it does not hold (a schema_version of 4294967298 read as 2).
template <typename T>
T as_whole_number(const json& v, const std::string& name) {
  if (!v.is_number()) throw std::runtime_error(name + " is " + v.type_name() + ", not a number");
  constexpr T lowest = std::numeric_limits<T>::min();
  constexpr T highest = std::numeric_limits<T>::max();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(highest)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i >= 0 ? static_cast<uint64_t>(i) <= static_cast<uint64_t>(highest)
               : std::is_signed_v<T> && i >= static_cast<int64_t>(lowest)) {
      return static_cast<T>(i);
    }
  } else {
    // [lowest, 2^digits) holds exactly the doubles that convert to T without overflow.
    const double d = v.get<double>();
    if (d == std::trunc(d) && d >= static_cast<double>(lowest) &&
        d < std::ldexp(1.0, std::numeric_limits<T>::digits)) {
      return static_cast<T>(d);
    }
  }
  throw std::runtime_error(name + " is " + v.dump() + ", not a whole number from " +
                           std::to_string(lowest) + " to " + std::to_string(highest));
}
// The integer field `key` of `j`.
template <typename T>
T whole_number(const json& j, const char* key) {
  return as_whole_number<T>(j.at(key), key);
}

// A string from the file, quoted for a message that must stay one short line: control
// characters (a newline) become '?', and past 40 bytes it is cut (at a UTF-8 character boundary).
std::string in_quotes(const std::string& text) {
  constexpr size_t kShown = 40;
  size_t end = std::min(text.size(), kShown);
  const auto continuation = [&](size_t i) {
    return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
  };
  while (end > 0 && end < text.size() && continuation(end)) --end;
  std::string out = "'";
  for (size_t i = 0; i < end; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += c < 0x20 || c == 0x7F ? '?' : text[i];
  }
  return out + (end < text.size() ? "...'" : "'");
}

// The string field `key` of `j`. Names and notes from a file end up in one-line messages and on
// screen ("gelu_scale is not in this recording, which holds ..."); our engine never writes a
// control character into one, so a newline or a NUL there means a damaged or hand-edited file.
std::string text_at(const json& j, const char* key) {
  std::string text = j.at(key).get<std::string>();
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      throw std::runtime_error(std::string(key) + " " + in_quotes(text) +
                               " holds a control character");
    }
  }
  return text;
}

// Bounds on what the app adds up. The replay backend, the views and the exports sum bytes over
// a measurement's launches and nanoseconds over its records and over a session's measurements
// in int64; within these bounds no file under the 256 MiB limit can overflow them, and each
// bound is far above anything a GPU measures (a launch moving 1 TiB, a kernel or a repetition
// taking an hour, CUDA stream ids past 2^30).
constexpr int64_t kMaxLaunchBytes = int64_t(1) << 40;
constexpr double kMaxTimeUs = 3600e6;
constexpr uint64_t kMaxRepetitionNs = uint64_t(3600) * 1000000000;
constexpr uint32_t kMaxStreamId = uint32_t(1) << 30;

// A launch's byte count (textbook or counted): 0 to 1 TiB.
int64_t byte_count(const json& j, const char* key) {
  const int64_t bytes = whole_number<int64_t>(j, key);
  if (bytes < 0 || bytes > kMaxLaunchBytes) {
    throw std::runtime_error(std::string(key) + " is " + std::to_string(bytes) +
                             ", not a byte count from 0 to 1 TiB");
  }
  return bytes;
}

// A time in microseconds: 0 to an hour.
double time_us(const json& j, const char* key) {
  const double us = j.at(key).get<double>();
  if (!(us >= 0 && us <= kMaxTimeUs)) {
    throw std::runtime_error(std::string(key) + " is " + j.at(key).dump() +
                             " us, not a time from 0 to an hour");
  }
  return us;
}

// The array field `key` of `j`. Iterating a json that is not an array would visit an object's
// values, or a number or a string once, or nothing for null, and load whatever came out.
const json& array_at(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_array()) {
    throw std::runtime_error(std::string(key) + " is " + v.type_name() + ", not an array");
  }
  return v;
}

json stats_json(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max},
          {"p20", s.p20},       {"p80", s.p80}, {"count", s.count}};
}
Stats stats_from(const json& j) {
  Stats s;
  s.median = time_us(j, "median");
  s.min = time_us(j, "min");
  s.max = time_us(j, "max");
  s.p20 = time_us(j, "p20");
  s.p80 = time_us(j, "p80");
  s.count = whole_number<int>(j, "count");
  return s;
}

json device_json(const DeviceFacts& d) {
  json copies = json::array();
  for (const CopyBandwidth& c : d.copy_bandwidth) {
    copies.push_back({{"bytes", c.bytes}, {"cache", to_string(c.cache)}, {"gbps", c.gbps}});
  }
  return {{"name", d.name},
          {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
          {"sm_count", d.sm_count},
          {"l2_bytes", d.l2_bytes},
          {"memory_bytes", d.memory_bytes},
          {"driver_version", d.driver_version},
          {"runtime_version", d.runtime_version},
          {"roof_gbps", d.roof_gbps},
          {"copy_bandwidth", copies}};
}
CacheMode cache_mode_from(const json& j) {
  CacheMode mode;
  if (!parse_cache_mode(j.get<std::string>(), &mode)) {
    throw std::runtime_error("unknown cache mode " + in_quotes(j.get<std::string>()));
  }
  return mode;
}
DeviceFacts device_from(const json& j, int version) {
  DeviceFacts d;
  d.usable = true;
  d.name = text_at(j, "name");
  const std::string cc = text_at(j, "compute_capability");
  // Widths bound the digits read: %d on a number too large for int is undefined behaviour.
  if (std::sscanf(cc.c_str(), "%3d.%3d", &d.cc_major, &d.cc_minor) != 2) {
    throw std::runtime_error("device.compute_capability " + in_quotes(cc) + " is not MAJOR.MINOR");
  }
  d.sm_count = whole_number<int>(j, "sm_count");
  d.l2_bytes = whole_number<int64_t>(j, "l2_bytes");
  d.memory_bytes = whole_number<int64_t>(j, "memory_bytes");
  d.driver_version = whole_number<int>(j, "driver_version");
  d.runtime_version = whole_number<int>(j, "runtime_version");
  d.roof_gbps = j.at("roof_gbps").get<double>();
  if (version >= 2) {
    for (const json& c : array_at(j, "copy_bandwidth")) {
      CopyBandwidth copy;
      copy.bytes = whole_number<int64_t>(c, "bytes");
      copy.cache = cache_mode_from(c.at("cache"));
      copy.gbps = c.at("gbps").get<double>();
      d.copy_bandwidth.push_back(copy);
    }
  }
  return d;
}

json record_json(const KernelRecord& r) {
  return {{"launch", r.launch},
          {"kernel", r.kernel},
          {"start_ns", r.start_ns},
          {"end_ns", r.end_ns},
          {"start_rel_ns", r.start_rel_ns},
          {"end_rel_ns", r.end_rel_ns},
          {"stream", r.stream_id},
          {"correlation", r.correlation_id},
          {"grid", r.grid},
          {"block", r.block},
          {"registers_per_thread", r.registers_per_thread},
          {"static_shared_bytes", r.static_shared_bytes},
          {"dynamic_shared_bytes", r.dynamic_shared_bytes}};
}
// A grid or block size: three whole numbers.
std::array<int, 3> dim3_at(const json& j, const char* key) {
  const json& v = array_at(j, key);
  if (v.size() != 3) throw std::runtime_error(std::string(key) + " does not hold 3 numbers");
  return {as_whole_number<int>(v[0], key), as_whole_number<int>(v[1], key),
          as_whole_number<int>(v[2], key)};
}

KernelRecord record_from(const json& j) {
  KernelRecord r;
  r.launch = whole_number<int>(j, "launch");
  r.kernel = text_at(j, "kernel");
  r.start_ns = whole_number<uint64_t>(j, "start_ns");
  r.end_ns = whole_number<uint64_t>(j, "end_ns");
  r.start_rel_ns = whole_number<int64_t>(j, "start_rel_ns");
  r.end_rel_ns = whole_number<int64_t>(j, "end_rel_ns");
  r.stream_id = whole_number<uint32_t>(j, "stream");
  r.correlation_id = whole_number<uint32_t>(j, "correlation");
  r.grid = dim3_at(j, "grid");
  r.block = dim3_at(j, "block");
  r.registers_per_thread = whole_number<int>(j, "registers_per_thread");
  r.static_shared_bytes = whole_number<int>(j, "static_shared_bytes");
  r.dynamic_shared_bytes = whole_number<int>(j, "dynamic_shared_bytes");
  if (r.stream_id > kMaxStreamId) {
    throw std::runtime_error("stream " + std::to_string(r.stream_id) + " is past 2^30");
  }
  if (r.end_ns < r.start_ns) throw std::runtime_error("a kernel record ends before it starts");
  if (r.start_rel_ns < 0 || r.end_rel_ns < r.start_rel_ns ||
      static_cast<uint64_t>(r.end_rel_ns) > kMaxRepetitionNs) {
    throw std::runtime_error(
        "a kernel record's start_rel_ns and end_rel_ns are not 0 <= start <= "
        "end <= an hour");
  }
  return r;
}

json counters_json(const std::optional<LaunchCounters>& c) {
  if (!c) return nullptr;
  return {{"dram_read_bytes", c->dram_read_bytes},
          {"dram_write_bytes", c->dram_write_bytes},
          {"l2_bytes", c->l2_bytes}};
}
std::optional<LaunchCounters> counters_from(const json& j) {
  if (j.is_null()) return std::nullopt;
  LaunchCounters c;
  c.dram_read_bytes = byte_count(j, "dram_read_bytes");
  c.dram_write_bytes = byte_count(j, "dram_write_bytes");
  c.l2_bytes = byte_count(j, "l2_bytes");
  return c;
}

json measurement_json(const Measurement& m) {
  json launches = json::array();
  for (const auto& l : m.launches) {
    launches.push_back({{"kernel", l.textbook.kernel},
                        {"textbook_bytes_read", l.textbook.bytes_read},
                        {"textbook_bytes_written", l.textbook.bytes_written},
                        {"textbook_flops", l.textbook.flops},
                        {"time_us", stats_json(l.time_us)},
                        {"copy_gbps", l.copy_gbps},
                        {"counters", counters_json(l.counters)}});
  }
  json records = json::array();
  for (const KernelRecord& r : m.records) records.push_back(record_json(r));
  return {{"lesson", m.lesson},
          {"size", m.size},
          {"inner", m.inner},
          {"level", m.level},
          {"level_name", m.level_name},
          {"precision", to_string(m.precision)},
          {"cache", to_string(m.cache)},
          {"timing_method", m.timing_method},
          {"repetitions", m.repetitions},
          {"chain_time_us", stats_json(m.chain_time_us)},
          {"chain_copy_gbps", m.chain_copy_gbps},
          {"check",
           {{"rel_l2_error", m.check.rel_l2_error},
            {"max_abs_error", m.check.max_abs_error},
            {"non_finite", m.check.non_finite},
            {"tolerance", m.check.tolerance},
            {"passed", m.check.passed}}},
          {"launches", launches},
          {"counters_status", to_string(m.counters_status)},
          {"counters_note", m.counters_note},
          {"records", records}};
}
Measurement measurement_from(const json& j, int version) {
  Measurement m;
  m.lesson = text_at(j, "lesson");
  m.size = whole_number<int64_t>(j, "size");
  m.inner = whole_number<int64_t>(j, "inner");
  m.level = whole_number<int>(j, "level");
  m.level_name = text_at(j, "level_name");
  const std::string precision = text_at(j, "precision");
  if (!parse_precision(precision, &m.precision)) {
    throw std::runtime_error("unknown precision " + in_quotes(precision));
  }
  m.cache = cache_mode_from(j.at("cache"));
  m.timing_method = text_at(j, "timing_method");
  m.repetitions = whole_number<int>(j, "repetitions");
  m.chain_time_us = stats_from(j.at("chain_time_us"));
  m.chain_copy_gbps = j.at("chain_copy_gbps").get<double>();
  const json& c = j.at("check");
  m.check.rel_l2_error = c.at("rel_l2_error").get<double>();
  m.check.max_abs_error = c.at("max_abs_error").get<double>();
  m.check.non_finite = whole_number<int64_t>(c, "non_finite");
  m.check.tolerance = c.at("tolerance").get<double>();
  m.check.passed = c.at("passed").get<bool>();
  for (const json& l : array_at(j, "launches")) {
    LaunchResult r;
    r.textbook.kernel = text_at(l, "kernel");
    r.textbook.bytes_read = byte_count(l, "textbook_bytes_read");
    r.textbook.bytes_written = byte_count(l, "textbook_bytes_written");
    r.textbook.flops = l.at("textbook_flops").get<double>();
    r.time_us = stats_from(l.at("time_us"));
    r.copy_gbps = l.at("copy_gbps").get<double>();
    if (version >= 2) r.counters = counters_from(l.at("counters"));
    m.launches.push_back(std::move(r));
  }
  if (version >= 2) {
    const std::string status = text_at(j, "counters_status");
    if (!parse_counters_status(status, &m.counters_status)) {
      throw std::runtime_error("unknown counters_status " + in_quotes(status));
    }
    // Free text the app wrote (it may quote a CUPTI or CUDA message): control characters are
    // shown as spaces rather than refusing a recording the app itself saved.
    m.counters_note = j.at("counters_note").get<std::string>();
    for (char& ch : m.counters_note) {
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) ch = ' ';
    }
    uint64_t first_start = std::numeric_limits<uint64_t>::max();
    for (const json& r : array_at(j, "records")) {
      m.records.push_back(record_from(r));
      if (m.records.back().launch < 0 ||
          m.records.back().launch >= static_cast<int>(m.launches.size())) {
        throw std::runtime_error("a kernel record names launch " +
                                 std::to_string(m.records.back().launch) + " of " +
                                 std::to_string(m.launches.size()));
      }
      first_start = std::min(first_start, m.records.back().start_ns);
    }
    // One repetition's records: the trace export lays them out from the earliest start.
    for (const KernelRecord& r : m.records) {
      if (r.end_ns - first_start > kMaxRepetitionNs) {
        throw std::runtime_error("the kernel records span more than an hour");
      }
    }
  } else {
    // Version 1 predates the counter phase: its measurements carry no counters or records.
    m.counters_status = CountersStatus::not_measured;
  }
  return m;
}

}  // namespace

std::string session_to_json(const Session& s, int indent) {
  json measurements = json::array();
  for (const auto& m : s.measurements) measurements.push_back(measurement_json(m));
  const json j = {{"format", "fusionlab-session"}, {"schema_version", Session::kSchemaVersion},
                  {"app_version", s.app_version},  {"created_utc", s.created_utc},
                  {"backend", s.backend},          {"device", device_json(s.device)},
                  {"measurements", measurements}};
  return j.dump(indent) + "\n";
}

Status session_from_json(const std::string& text, Session* out) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error("not valid JSON (truncated or corrupted?)");
  try {
    if (!j.is_object() || j.value("format", "") != "fusionlab-session") {
      return Status::Error("not a Fusion Lab session (no \"format\": \"fusionlab-session\")");
    }
    const int version = whole_number<int>(j, "schema_version");
    if (version < Session::kOldestSchemaVersion || version > Session::kSchemaVersion) {
      return Status::Error("schema version " + std::to_string(version) +
                           " is not supported (this build reads versions " +
                           std::to_string(Session::kOldestSchemaVersion) + " to " +
                           std::to_string(Session::kSchemaVersion) + ")");
    }
    Session s;
    s.app_version = text_at(j, "app_version");
    s.created_utc = text_at(j, "created_utc");
    s.backend = text_at(j, "backend");
    s.device = device_from(j.at("device"), version);
    for (const json& m : array_at(j, "measurements")) {
      s.measurements.push_back(measurement_from(m, version));
    }
    *out = std::move(s);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(std::string("malformed session: ") + e.what());
  }
}

Status save_session(const Session& session, const std::string& path) {
  return write_file_atomically(path, session_to_json(session));
}

Status load_session(const std::string& path, Session* out) {
  // A regular file under the cap, checked before a byte is read (a FIFO or /dev/zero would
  // never end), then parsed; every refusal names the file.
  std::string text;
  FL_TRY(read_file_checked(path, kMaxSessionFileBytes, "session file", &text));
  return session_from_json(text, out).with_context(shorten_for_message(path, kShownPathChars));
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace fl
