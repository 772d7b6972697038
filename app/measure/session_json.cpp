#include "app/measure/session_json.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace fl {
namespace {

using nlohmann::json;

constexpr int64_t kMaxSessionFileBytes = int64_t(256) << 20;

json stats_json(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max},
          {"p20", s.p20},       {"p80", s.p80}, {"count", s.count}};
}
Stats stats_from(const json& j) {
  Stats s;
  s.median = j.at("median").get<double>();
  s.min = j.at("min").get<double>();
  s.max = j.at("max").get<double>();
  s.p20 = j.at("p20").get<double>();
  s.p80 = j.at("p80").get<double>();
  s.count = j.at("count").get<int>();
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
    throw std::runtime_error("unknown cache mode '" + j.get<std::string>() + "'");
  }
  return mode;
}
DeviceFacts device_from(const json& j, int version) {
  DeviceFacts d;
  d.usable = true;
  d.name = j.at("name").get<std::string>();
  const std::string cc = j.at("compute_capability").get<std::string>();
  if (std::sscanf(cc.c_str(), "%d.%d", &d.cc_major, &d.cc_minor) != 2) {
    throw std::runtime_error("device.compute_capability '" + cc + "' is not MAJOR.MINOR");
  }
  d.sm_count = j.at("sm_count").get<int>();
  d.l2_bytes = j.at("l2_bytes").get<int64_t>();
  d.memory_bytes = j.at("memory_bytes").get<int64_t>();
  d.driver_version = j.at("driver_version").get<int>();
  d.runtime_version = j.at("runtime_version").get<int>();
  d.roof_gbps = j.at("roof_gbps").get<double>();
  if (version >= 2) {
    for (const json& c : j.at("copy_bandwidth")) {
      CopyBandwidth copy;
      copy.bytes = c.at("bytes").get<int64_t>();
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
KernelRecord record_from(const json& j) {
  KernelRecord r;
  r.launch = j.at("launch").get<int>();
  r.kernel = j.at("kernel").get<std::string>();
  r.start_ns = j.at("start_ns").get<uint64_t>();
  r.end_ns = j.at("end_ns").get<uint64_t>();
  r.start_rel_ns = j.at("start_rel_ns").get<int64_t>();
  r.end_rel_ns = j.at("end_rel_ns").get<int64_t>();
  r.stream_id = j.at("stream").get<uint32_t>();
  r.correlation_id = j.at("correlation").get<uint32_t>();
  r.grid = j.at("grid").get<std::array<int, 3>>();
  r.block = j.at("block").get<std::array<int, 3>>();
  r.registers_per_thread = j.at("registers_per_thread").get<int>();
  r.static_shared_bytes = j.at("static_shared_bytes").get<int>();
  r.dynamic_shared_bytes = j.at("dynamic_shared_bytes").get<int>();
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
  c.dram_read_bytes = j.at("dram_read_bytes").get<int64_t>();
  c.dram_write_bytes = j.at("dram_write_bytes").get<int64_t>();
  c.l2_bytes = j.at("l2_bytes").get<int64_t>();
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
  m.lesson = j.at("lesson").get<std::string>();
  m.size = j.at("size").get<int64_t>();
  m.inner = j.at("inner").get<int64_t>();
  m.level = j.at("level").get<int>();
  m.level_name = j.at("level_name").get<std::string>();
  if (!parse_precision(j.at("precision").get<std::string>(), &m.precision)) {
    throw std::runtime_error("unknown precision '" + j.at("precision").get<std::string>() + "'");
  }
  m.cache = cache_mode_from(j.at("cache"));
  m.timing_method = j.at("timing_method").get<std::string>();
  m.repetitions = j.at("repetitions").get<int>();
  m.chain_time_us = stats_from(j.at("chain_time_us"));
  m.chain_copy_gbps = j.at("chain_copy_gbps").get<double>();
  const json& c = j.at("check");
  m.check.rel_l2_error = c.at("rel_l2_error").get<double>();
  m.check.max_abs_error = c.at("max_abs_error").get<double>();
  m.check.non_finite = c.at("non_finite").get<int64_t>();
  m.check.tolerance = c.at("tolerance").get<double>();
  m.check.passed = c.at("passed").get<bool>();
  for (const json& l : j.at("launches")) {
    LaunchResult r;
    r.textbook.kernel = l.at("kernel").get<std::string>();
    r.textbook.bytes_read = l.at("textbook_bytes_read").get<int64_t>();
    r.textbook.bytes_written = l.at("textbook_bytes_written").get<int64_t>();
    r.textbook.flops = l.at("textbook_flops").get<double>();
    r.time_us = stats_from(l.at("time_us"));
    r.copy_gbps = l.at("copy_gbps").get<double>();
    if (version >= 2) r.counters = counters_from(l.at("counters"));
    m.launches.push_back(std::move(r));
  }
  if (version >= 2) {
    const std::string status = j.at("counters_status").get<std::string>();
    if (!parse_counters_status(status, &m.counters_status)) {
      throw std::runtime_error("unknown counters_status '" + status + "'");
    }
    m.counters_note = j.at("counters_note").get<std::string>();
    for (const json& r : j.at("records")) {
      m.records.push_back(record_from(r));
      if (m.records.back().launch < 0 ||
          m.records.back().launch >= static_cast<int>(m.launches.size())) {
        throw std::runtime_error("a kernel record names launch " +
                                 std::to_string(m.records.back().launch) + " of " +
                                 std::to_string(m.launches.size()));
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
  const json j = {{"format", "fusionlab-session"},
                  {"schema_version", Session::kSchemaVersion},
                  {"app_version", s.app_version},
                  {"created_utc", s.created_utc},
                  {"backend", s.backend},
                  {"device", device_json(s.device)},
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
    const int version = j.at("schema_version").get<int>();
    if (version < Session::kOldestSchemaVersion || version > Session::kSchemaVersion) {
      return Status::Error("schema version " + std::to_string(version) +
                           " is not supported (this build reads versions " +
                           std::to_string(Session::kOldestSchemaVersion) + " to " +
                           std::to_string(Session::kSchemaVersion) + ")");
    }
    Session s;
    s.app_version = j.at("app_version").get<std::string>();
    s.created_utc = j.at("created_utc").get<std::string>();
    s.backend = j.at("backend").get<std::string>();
    s.device = device_from(j.at("device"), version);
    for (const json& m : j.at("measurements")) {
      s.measurements.push_back(measurement_from(m, version));
    }
    *out = std::move(s);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(std::string("malformed session: ") + e.what());
  }
}

Status write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status::Error("cannot write " + path + ": " + std::strerror(errno));
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::Error("cannot write " + path + ": " + std::strerror(err));
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::Error("cannot write " + path + ": " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::Error("cannot write " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

Status save_session(const Session& session, const std::string& path) {
  return write_file_atomically(path, session_to_json(session));
}

Status load_session(const std::string& path, Session* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > kMaxSessionFileBytes) {
    return Status::Error(path + ": file is " + std::to_string(size >> 20) +
                         " MiB, over the 256 MiB limit for a session");
  }
  in.seekg(0);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return session_from_json(buffer.str(), out).with_context(path);
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
