// Sessions as JSON (docs/SESSION_FORMAT.md). Writing builds the text one measurement at a time;
// reading is a streaming (SAX) parse that fills the Session as the parser goes and checks every
// field on the way, so no JSON tree of the file is ever built and a refusal names the field
// ("measurements[12].size: ...").
//
// [SECTION] bounds and quoting
// [SECTION] writing
// [SECTION] reading: one value (whole numbers, reals, names, choices)
// [SECTION] reading: the schema (which fields each object has)
// [SECTION] reading: the catalog rules (lessons, sizes, row lengths, levels, precisions)
// [SECTION] reading: SessionReader, the SAX handler
// [SECTION] entry points
#include "model/session_json.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/caps.h"
#include "model/file_io.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

using nlohmann::json;

// ---- [SECTION] bounds and quoting -------------------------------------------------------------

// Bounds on what the app adds up. The replay backend, the views and the exports sum bytes over
// a measurement's launches and nanoseconds over its records and over a session's measurements
// in int64; within these bounds no file under the 256 MiB limit can overflow them, and each
// bound is far above anything a GPU measures (a launch moving 1 TiB, a kernel or a repetition
// taking an hour, CUDA stream ids past 2^30, a copy at 10^6 GB/s).
constexpr int64_t kMaxLaunchBytes = int64_t(1) << 40;
constexpr double kMaxTimeUs = 3600e6;
constexpr int64_t kMaxRepetitionNs = int64_t(3600) * 1000000000;
constexpr uint32_t kMaxStreamId = uint32_t(1) << 30;
constexpr double kMaxGbps = 1e6;
// A lesson this build's catalog does not know (a newer build's recording) has no catalog to be
// checked against: these bounds stand in for its size axis, row length and ladder.
constexpr int64_t kMaxUnknownLessonSize = int64_t(1) << 40;
constexpr int64_t kMaxUnknownLessonInner = int64_t(1) << 24;
constexpr int kMaxUnknownLessonLevels = 64;
constexpr size_t kMaxLessonIdChars = 64;

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

bool is_control(char c) {
  return static_cast<unsigned char>(c) < 0x20 || c == 0x7F;
}

// ---- [SECTION] writing ------------------------------------------------------------------------

json stats_json(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max},
          {"p20", s.p20},       {"p80", s.p80}, {"count", s.count}};
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

json counters_json(const std::optional<LaunchCounters>& c) {
  if (!c) return nullptr;
  return {{"dram_read_bytes", c->dram_read_bytes},
          {"dram_write_bytes", c->dram_write_bytes},
          {"l2_bytes", c->l2_bytes}};
}

// Whether `p` says no more than the session's own facts (fill_provenance): then the file need
// not repeat it, and a reader fills it back in.
bool same_as_session(const Provenance& p, const Session& s) {
  return p.gpu == s.device.name && p.driver_version == s.device.driver_version &&
         p.measured_utc == s.created_utc && p.app_version == s.app_version &&
         p.source == (s.backend == "recorded" ? "recorded" : "live");
}

json phases_json(const LaunchPhases& p) {
  json records = json::array();
  for (const PhaseRecord& r : p.records) {
    records.push_back({{"start_ns", r.start_ns},
                       {"end_ns", r.end_ns},
                       {"block", r.block},
                       {"sm", r.sm},
                       {"phase", r.phase},
                       {"arg", r.arg},
                       {"wait_ns", r.wait_ns}});
  }
  return {{"names", p.names},
          {"records", std::move(records)},
          {"lost", p.lost},
          {"time_off_us", p.time_off_us},
          {"time_on_us", p.time_on_us}};
}

json measurement_json(const Measurement& m) {
  json launches = json::array();
  for (const auto& l : m.launches) {
    json launch = {{"kernel", l.textbook.kernel},
                   {"variant", l.variant},
                   {"textbook_bytes_read", l.textbook.bytes_read},
                   {"textbook_bytes_written", l.textbook.bytes_written},
                   {"textbook_flops", l.textbook.flops},
                   {"time_us", stats_json(l.time_us)},
                   {"copy_gbps", l.copy_gbps},
                   {"counters", counters_json(l.counters)}};
    if (l.phases) launch["phases"] = phases_json(*l.phases);
    launches.push_back(std::move(launch));
  }
  json records = json::array();
  for (const KernelRecord& r : m.records) records.push_back(record_json(r));
  json out = {{"lesson", m.lesson},
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
  if (m.peak_device_bytes > 0) out["peak_device_bytes"] = m.peak_device_bytes;
  if (m.gpu.sampled) {
    out["gpu_sm_clock_mhz"] = m.gpu.sm_clock_mhz;
    out["gpu_memory_clock_mhz"] = m.gpu.memory_clock_mhz;
    out["gpu_sm_clock_max_mhz"] = m.gpu.sm_clock_max_mhz;
    out["gpu_throttle"] = throttle_reason_names(m.gpu.throttle_reasons);
    out["gpu_other_processes"] = m.gpu.other_processes;
  }
  if (m.chosen_as_cc > 0) out["chosen_as_cc"] = m.chosen_as_cc;
  return out;
}

// A measurement's provenance, written where it says more than its session's facts.
json provenance_json(const Provenance& p) {
  return {{"gpu", p.gpu},
          {"driver_version", p.driver_version},
          {"measured_utc", p.measured_utc},
          {"app_version", p.app_version},
          {"source", p.source}};
}

// `text` with every line after the first indented by `pad`: a value dumped on its own, placed
// where nlohmann would have put it inside its parent. JSON text holds no raw line breaks inside
// strings, so every '\n' is between tokens.
void append_indented(const std::string& text, const std::string& pad, std::string* out) {
  for (char c : text) {
    *out += c;
    if (c == '\n') *out += pad;
  }
}

// ---- [SECTION] reading: one value -------------------------------------------------------------

// One JSON scalar as the parser hands it over: null, true/false, a number (a negative or
// non-negative integer, or anything else as a double) or a string.
struct Scalar {
  enum Type { null, boolean, negative, whole, real, text } type = null;
  bool flag = false;
  int64_t negative_value = 0;  // < 0
  uint64_t whole_value = 0;    // >= 0
  double real_value = 0;
  const std::string* real_text = nullptr;  // a real number as written ("1e999")
  std::string* text_value = nullptr;

  bool is_number() const { return type == negative || type == whole || type == real; }
  double as_double() const {
    return type == negative ? static_cast<double>(negative_value)
           : type == whole  ? static_cast<double>(whole_value)
                            : real_value;
  }
};

// "a string", "null", ...: what a value is, for "must be a number, not a string".
std::string kind_words(const Scalar& v) {
  switch (v.type) {
    case Scalar::null:
      return "null";
    case Scalar::boolean:
      return v.flag ? "true" : "false";
    case Scalar::text:
      return "a string";
    default:
      return "a number";
  }
}

// The value as written (about), for messages.
std::string shown(const Scalar& v) {
  switch (v.type) {
    case Scalar::negative:
      return std::to_string(v.negative_value);
    case Scalar::whole:
      return std::to_string(v.whole_value);
    case Scalar::real:
      return v.real_text != nullptr ? v.real_text->substr(0, 40) : json(v.real_value).dump();
    case Scalar::text:
      return in_quotes(*v.text_value);
    default:
      return kind_words(v);
  }
}

// "must be between 1 and 7", "must be 0 or more".
template <typename T>
std::string range_rule(T lo, T hi, const char* hint) {
  std::string rule = hi == std::numeric_limits<T>::max()
                         ? "must be " + std::to_string(lo) + " or more"
                         : "must be between " + std::to_string(lo) + " and " + std::to_string(hi);
  if (hint != nullptr) rule += std::string(" (") + hint + ")";
  return rule;
}

// A whole number (written 7 or 7.0) of type T from `lo` to `hi`. `noun` says what the type
// holds, for "4294967296 is too large for a 32-bit count". A double such as 1e300 is never cast
// to T (undefined behaviour), and 4294967298 is never wrapped to 2 or -1 to 2^64 - 1.
template <typename T>
Status read_whole(const Scalar& v, const char* noun, T lo, T hi, T* out,
                  const char* hint = nullptr) {
  if (!v.is_number()) return Status::Error("must be a whole number, not " + kind_words(v));
  constexpr T kLowest = std::numeric_limits<T>::min();
  constexpr T kHighest = std::numeric_limits<T>::max();
  bool too_large = false, too_small = false;
  T value = 0;
  if (v.type == Scalar::whole) {
    too_large = v.whole_value > static_cast<uint64_t>(kHighest);
    if (!too_large) value = static_cast<T>(v.whole_value);
  } else if (v.type == Scalar::negative) {
    too_small = !std::is_signed_v<T> || v.negative_value < static_cast<int64_t>(kLowest);
    if (!too_small) value = static_cast<T>(v.negative_value);
  } else {
    const double d = v.real_value;
    if (std::isfinite(d) && d != std::trunc(d)) {
      return Status::Error("must be a whole number, not " + shown(v));
    }
    // [lowest, 2^digits) holds exactly the doubles that convert to T without overflow.
    too_large = !(d < std::ldexp(1.0, std::numeric_limits<T>::digits));
    too_small = !too_large && !(d >= static_cast<double>(kLowest));
    if (!too_large && !too_small) value = static_cast<T>(d);
  }
  constexpr int kBits = std::numeric_limits<T>::digits + (std::is_signed_v<T> ? 1 : 0);
  const std::string type = std::to_string(kBits) + "-bit " + noun;
  if (too_large) return Status::Error(shown(v) + " is too large for a " + type);
  if (too_small && std::is_signed_v<T> && lo == kLowest)
    return Status::Error(shown(v) + " is too small for a " + type);
  if (too_small || value < lo || value > hi) {
    return Status::Error(range_rule(lo, hi, hint) + ", not " + shown(v));
  }
  *out = value;
  return Status::Ok();
}

// A number from `lo` to `hi` (never NaN or infinite); `rule` says so in words.
Status read_real(const Scalar& v, double lo, double hi, const std::string& rule, double* out) {
  if (!v.is_number()) return Status::Error("must be a number, not " + kind_words(v));
  const double d = v.as_double();
  if (!(d >= lo && d <= hi)) return Status::Error("must be " + rule + ", not " + shown(v));
  *out = d;
  return Status::Ok();
}
Status read_time_us(const Scalar& v, double* out) {
  return read_real(v, 0, kMaxTimeUs, "a time from 0 to 3600000000 us (an hour)", out);
}
Status read_gbps(const Scalar& v, double* out) {
  return read_real(v, 0, kMaxGbps, "a bandwidth from 0 to 1000000 GB/s", out);
}
Status read_non_negative(const Scalar& v, double* out) {
  return read_real(v, 0, std::numeric_limits<double>::max(), "0 or more", out);
}
Status read_bytes(const Scalar& v, int64_t* out) {
  return read_whole<int64_t>(v, "byte count", 0, kMaxLaunchBytes, out, "1 TiB");
}
Status read_count(const Scalar& v, int* out) {
  return read_whole<int>(v, "count", 0, INT_MAX, out);
}

// A name (device, lesson, level, kernel, ...). Names from a file end up in one-line messages and
// on screen ("gelu_scale is not in this recording, which holds ..."); our engine never writes a
// control character into one, so a newline or a NUL there means a damaged or hand-edited file.
Status read_name(const Scalar& v, std::string* out) {
  if (v.type != Scalar::text) return Status::Error("must be a string, not " + kind_words(v));
  if (std::any_of(v.text_value->begin(), v.text_value->end(), is_control)) {
    return Status::Error("holds a control character: " + in_quotes(*v.text_value));
  }
  *out = std::move(*v.text_value);
  return Status::Ok();
}

// Free text the app wrote (a counters note may quote a CUPTI or CUDA message): control
// characters are shown as spaces rather than refusing a recording the app itself saved.
Status read_note(const Scalar& v, std::string* out) {
  if (v.type != Scalar::text) return Status::Error("must be a string, not " + kind_words(v));
  *out = std::move(*v.text_value);
  for (char& c : *out) {
    if (is_control(c)) c = ' ';
  }
  return Status::Ok();
}

Status read_flag(const Scalar& v, bool* out) {
  if (v.type != Scalar::boolean) return Status::Error("must be true or false, not " + shown(v));
  *out = v.flag;
  return Status::Ok();
}

// One of a few words: `parse` turns it into the enum; `choices` lists them for the message.
template <typename E>
Status read_choice(const Scalar& v, bool (*parse)(const std::string&, E*), const char* choices,
                   E* out) {
  if (v.type != Scalar::text || !parse(*v.text_value, out)) {
    return Status::Error(std::string("must be ") + choices + ", not " + shown(v));
  }
  return Status::Ok();
}

// "9.0": one to three digits, a dot, one to three digits.
bool parse_compute_capability(const std::string& text, DeviceFacts* out) {
  const size_t dot = text.find('.');
  const auto digits = [&](size_t from, size_t to) {
    return to > from && to - from <= 3 &&
           std::all_of(text.begin() + from, text.begin() + to,
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  if (dot == std::string::npos || !digits(0, dot) || !digits(dot + 1, text.size())) return false;
  out->cc_major = std::stoi(text.substr(0, dot));
  out->cc_minor = std::stoi(text.substr(dot + 1));
  return true;
}

// ---- [SECTION] reading: the schema ------------------------------------------------------------

// What the reader is inside of: an object of the schema, a list of objects, a grid or block
// (three whole numbers), or something it skips (a key it does not read, or the rest of a part of
// the file after a refusal).
enum class Kind : uint8_t {
  root,
  device,
  copy,
  measurement,
  stats,
  check,
  launch,
  counters,
  record,
  provenance,
  phases,        // a launch's phase timeline
  phase_record,  // one of its records
  texts,         // a list of strings (the phase names)
  list,
  dim3,
  skip
};

// What a field holds: one value, an object (or null, for a launch's counters), a list of
// objects, or three whole numbers.
enum class Shape : uint8_t { scalar, object, object_or_null, list, dim3, texts };

struct Field {
  const char* name;
  Shape shape;
  Kind kind;              // object: its kind; list: its elements' kind
  bool v2_only;           // required from schema version 2 on; may be left out of a version-1 file
  bool optional = false;  // may be left out of any version (not measured, not asked for; provenance)
};
constexpr Field value(const char* name, bool v2_only = false) {
  return {name, Shape::scalar, Kind::skip, v2_only, false};
}
constexpr Field optional_value(const char* name) {
  return {name, Shape::scalar, Kind::skip, false, true};
}
constexpr Field object(const char* name, Kind kind, Shape shape = Shape::object,
                       bool v2_only = false) {
  return {name, shape, kind, v2_only, false};
}
constexpr Field list(const char* name, Kind elements, bool v2_only = false) {
  return {name, Shape::list, elements, v2_only, false};
}
constexpr Field optional_object(const char* name, Kind kind) {
  return {name, Shape::object, kind, false, true};
}

// The fields of each object, in the order of the enums that index them (docs/SESSION_FORMAT.md).
enum RootField { kAppVersion, kCreatedUtc, kBackend, kDevice, kMeasurements, kFormat, kVersion };
constexpr Field kRootFields[] = {value("app_version"),
                                 value("created_utc"),
                                 value("backend"),
                                 object("device", Kind::device),
                                 list("measurements", Kind::measurement),
                                 value("format"),
                                 value("schema_version")};
enum DeviceField { kName, kCc, kSms, kL2, kMemory, kDriver, kRuntime, kRoof, kCopies };
constexpr Field kDeviceFields[] = {value("name"),
                                   value("compute_capability"),
                                   value("sm_count"),
                                   value("l2_bytes"),
                                   value("memory_bytes"),
                                   value("driver_version"),
                                   value("runtime_version"),
                                   value("roof_gbps"),
                                   list("copy_bandwidth", Kind::copy, true)};
enum CopyField { kCopyBytes, kCopyCache, kCopyGbps };
constexpr Field kCopyFields[] = {value("bytes"), value("cache"), value("gbps")};
enum MeasurementField {
  kLesson,
  kSize,
  kInner,
  kLevel,
  kLevelName,
  kPrecision,
  kCache,
  kTiming,
  kRepetitions,
  kChainTime,
  kChainGbps,
  kCheck,
  kLaunches,
  kCountersStatus,
  kCountersNote,
  kRecords,
  kGpuSmClock,
  kGpuMemoryClock,
  kGpuSmClockMax,
  kGpuThrottle,
  kGpuOtherProcesses,
  kProvenance,
  kChosenAsCc,
  kPeakDeviceBytes
};
constexpr Field kMeasurementFields[] = {value("lesson"),
                                        value("size"),
                                        value("inner"),
                                        value("level"),
                                        value("level_name"),
                                        value("precision"),
                                        value("cache"),
                                        value("timing_method"),
                                        value("repetitions"),
                                        object("chain_time_us", Kind::stats),
                                        value("chain_copy_gbps"),
                                        object("check", Kind::check),
                                        list("launches", Kind::launch),
                                        value("counters_status", true),
                                        value("counters_note", true),
                                        list("records", Kind::record, true),
                                        optional_value("gpu_sm_clock_mhz"),
                                        optional_value("gpu_memory_clock_mhz"),
                                        optional_value("gpu_sm_clock_max_mhz"),
                                        optional_value("gpu_throttle"),
                                        optional_value("gpu_other_processes"),
                                        optional_object("provenance", Kind::provenance),
                                        optional_value("chosen_as_cc"),
                                        optional_value("peak_device_bytes")};
enum ProvenanceField { kProvGpu, kProvDriver, kProvUtc, kProvApp, kProvSource };
constexpr Field kProvenanceFields[] = {value("gpu"), value("driver_version"), value("measured_utc"),
                                       value("app_version"), value("source")};
enum StatsField { kMedian, kMin, kMax, kP20, kP80, kCount };
constexpr Field kStatsFields[] = {value("median"), value("min"), value("max"),
                                  value("p20"),    value("p80"), value("count")};
enum CheckField { kRelL2, kMaxAbs, kNonFinite, kTolerance, kPassed };
constexpr Field kCheckFields[] = {value("rel_l2_error"), value("max_abs_error"),
                                  value("non_finite"), value("tolerance"), value("passed")};
enum LaunchField {
  kKernel,
  kBytesRead,
  kBytesWritten,
  kFlops,
  kTime,
  kCopyGbpsL,
  kCounters,
  kPhases,
  kVariant
};
constexpr Field kLaunchFields[] = {value("kernel"),
                                   value("textbook_bytes_read"),
                                   value("textbook_bytes_written"),
                                   value("textbook_flops"),
                                   object("time_us", Kind::stats),
                                   value("copy_gbps"),
                                   object("counters", Kind::counters, Shape::object_or_null, true),
                                   {"phases", Shape::object, Kind::phases, false, true},
                                   optional_value("variant")};
enum PhasesField { kPhaseNames, kPhaseRecords, kPhaseLost, kTimeOff, kTimeOn };
constexpr Field kPhasesFields[] = {{"names", Shape::texts, Kind::skip, false},
                                   list("records", Kind::phase_record),
                                   value("lost"),
                                   value("time_off_us"),
                                   value("time_on_us")};
enum PhaseRecordField { kPhStart, kPhEnd, kPhBlock, kPhSm, kPhPhase, kPhArg, kPhWait };
constexpr Field kPhaseRecordFields[] = {value("start_ns"), value("end_ns"), value("block"),
                                        value("sm"),       value("phase"),  value("arg"),
                                        value("wait_ns")};
enum CountersField { kDramRead, kDramWrite, kL2Bytes };
constexpr Field kCountersFields[] = {value("dram_read_bytes"), value("dram_write_bytes"),
                                     value("l2_bytes")};
enum RecordField {
  kLaunch,
  kRecordKernel,
  kStart,
  kEnd,
  kStartRel,
  kEndRel,
  kStream,
  kCorrelation,
  kGrid,
  kBlock,
  kRegisters,
  kStaticShared,
  kDynamicShared
};
constexpr Field kRecordFields[] = {value("launch"),
                                   value("kernel"),
                                   value("start_ns"),
                                   value("end_ns"),
                                   value("start_rel_ns"),
                                   value("end_rel_ns"),
                                   value("stream"),
                                   value("correlation"),
                                   {"grid", Shape::dim3, Kind::skip, false, false},
                                   {"block", Shape::dim3, Kind::skip, false, false},
                                   value("registers_per_thread"),
                                   value("static_shared_bytes"),
                                   value("dynamic_shared_bytes")};

struct Schema {
  const Field* fields;
  int count;
};
template <size_t N>
constexpr Schema schema(const Field (&fields)[N]) {
  return {fields, static_cast<int>(N)};
}
Schema schema_of(Kind kind) {
  switch (kind) {
    case Kind::root:
      return schema(kRootFields);
    case Kind::device:
      return schema(kDeviceFields);
    case Kind::copy:
      return schema(kCopyFields);
    case Kind::measurement:
      return schema(kMeasurementFields);
    case Kind::stats:
      return schema(kStatsFields);
    case Kind::check:
      return schema(kCheckFields);
    case Kind::launch:
      return schema(kLaunchFields);
    case Kind::counters:
      return schema(kCountersFields);
    case Kind::record:
      return schema(kRecordFields);
    case Kind::provenance:
      return schema(kProvenanceFields);
    case Kind::phases:
      return schema(kPhasesFields);
    case Kind::phase_record:
      return schema(kPhaseRecordFields);
    default:
      return {nullptr, 0};
  }
}

std::string shape_words(Shape shape) {
  switch (shape) {
    case Shape::object:
      return "an object";
    case Shape::object_or_null:
      return "an object or null";
    case Shape::list:
    case Shape::dim3:
    case Shape::texts:
      return "an array";
    default:
      return "a single value";
  }
}

}  // namespace

// ---- [SECTION] reading: the catalog rules -----------------------------------------------------

bool is_lesson_id(const std::string& id) {
  return !id.empty() && id.size() <= kMaxLessonIdChars && id[0] >= 'a' && id[0] <= 'z' &&
         std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
         });
}

Status check_lesson_name(const std::string& path, const std::string& lesson) {
  if (find_lesson(lesson) != nullptr || is_lesson_id(lesson)) return Status::Ok();
  return Status::Error(path + ": unknown lesson " + in_quotes(lesson) +
                       ", and not a lesson id a newer build could know (lowercase letters, "
                       "digits and _, at most 64)");
}

namespace {

std::string not_value(int64_t value) {
  return ", not " + std::to_string(value);
}

// The rules for a lesson this build does not know: only bounds that keep the numbers sane.
Status check_unknown_lesson_point(const std::string& path, const std::string& lesson, int64_t size,
                                  int64_t inner, int level) {
  const std::string why = ": lesson '" + lesson + "' is not in this build's catalog)";
  if (size < 1 || size > kMaxUnknownLessonSize) {
    return Status::Error(path + ".size: must be between 1 and 1099511627776 (2^40" + why +
                         not_value(size));
  }
  if (inner < 0 || inner > kMaxUnknownLessonInner) {
    return Status::Error(path + ".inner: must be between 0 and 16777216 (2^24" + why +
                         not_value(inner));
  }
  if (level >= kMaxUnknownLessonLevels) {
    return Status::Error(path + ".level: must be between 0 and 63 (" + why.substr(2) +
                         not_value(level));
  }
  return Status::Ok();
}

}  // namespace

Status check_recorded_point(const std::string& lesson_path, const std::string& path,
                            const std::string& lesson, int64_t size, int64_t inner, int level,
                            Precision precision) {
  FL_TRY(check_lesson_name(lesson_path, lesson));
  const Lesson* known = find_lesson(lesson);
  if (known == nullptr) return check_unknown_lesson_point(path, lesson, size, inner, level);
  const LessonInfo& info = known->info();
  const SizeAxis& axis = info.size_axis;
  const std::string of = " of lesson '" + lesson + "'";
  if (size < 1 || size > axis.max) {
    return Status::Error(path + ".size: must be between 1 and " + std::to_string(axis.max) +
                         " (the largest size" + of + ", in " + axis.unit + ")" + not_value(size));
  }
  if (axis.inner_max == 0 && inner != 0) {
    return Status::Error(path + ".inner: must be 0 (lesson '" + lesson + "' has no row length)" +
                         not_value(inner));
  }
  if (axis.inner_max > 0 && (inner < 1 || inner > axis.inner_max)) {
    return Status::Error(path + ".inner: must be between 1 and " + std::to_string(axis.inner_max) +
                         " (the largest " + axis.inner_name + of + ")" + not_value(inner));
  }
  if (level >= known->level_count()) {
    return Status::Error(path + ".level: level " + std::to_string(level) + " is outside lesson '" +
                         lesson + "' (levels 0-" + std::to_string(known->level_count() - 1) + ")");
  }
  if (std::find(info.precisions.begin(), info.precisions.end(), precision) ==
      info.precisions.end()) {
    return Status::Error(path + ".precision: lesson '" + lesson + "' has no " +
                         to_string(precision) + " version");
  }
  return Status::Ok();
}

namespace {

// ---- [SECTION] reading: SessionReader ---------------------------------------------------------

// The SAX handler (nlohmann::json::sax_parse) that builds a Session as the parser reads: one
// measurement, launch and record at a time, each checked when its object closes and then moved
// into the session. Peak memory is the session itself plus one value of the file (a string).
//
// The first refusal is kept, with its path, and the rest of that top-level field is skipped; the
// parse goes on to the end so that a file that is not JSON, not a session or of another schema
// version is called that (the format and schema_version come last in a file the app wrote: keys
// are written sorted). Keys it does not read are skipped; a key twice in one object is refused.
class SessionReader {
 public:
  // The nlohmann SAX interface.
  bool null() { return value(Scalar{}); }
  bool boolean(bool b) {
    Scalar v;
    v.type = Scalar::boolean;
    v.flag = b;
    return value(v);
  }
  bool number_integer(json::number_integer_t i) {
    Scalar v;
    v.type = i < 0 ? Scalar::negative : Scalar::whole;
    v.negative_value = i;
    v.whole_value = i < 0 ? 0 : static_cast<uint64_t>(i);
    return value(v);
  }
  bool number_unsigned(json::number_unsigned_t u) {
    Scalar v;
    v.type = Scalar::whole;
    v.whole_value = u;
    return value(v);
  }
  bool number_float(json::number_float_t d, const std::string& as_written) {
    Scalar v;
    v.type = Scalar::real;
    v.real_value = d;
    v.real_text = &as_written;
    return value(v);
  }
  bool string(std::string& s) {
    Scalar v;
    v.type = Scalar::text;
    v.text_value = &s;
    return value(v);
  }
  bool binary(json::binary_t& /*unused*/) { return true; }  // never in JSON text
  bool start_object(std::size_t /*unknown*/) { return open(false); }
  bool end_object() { return close(); }
  bool start_array(std::size_t /*unknown*/) { return open(true); }
  bool end_array() { return close(); }
  bool key(std::string& name);
  bool parse_error(std::size_t position, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*error*/) {
    parse_failed_ = true;
    parse_error_at_ = position;
    return false;
  }

  // After the parse: the session, or the one line that refuses it.
  Status finish(Session* out);

 private:
  struct Frame {
    Kind kind = Kind::skip;
    Kind element = Kind::skip;  // list: its elements' kind
    int field = -1;             // object: the field whose value comes next (-1: one it skips)
    uint32_t seen = 0;          // object: the fields seen, one bit each
    size_t index = 0;           // list, grid or block: elements begun
    int open = 0;               // skip: containers still open
  };

  bool value(const Scalar& v);
  bool open(bool array);
  bool open_field(bool array);
  bool close();
  bool fail(std::string message, int opening);
  void note_missing_v2(const std::string& path);

  std::string path_at(size_t depth) const;
  std::string here() const;
  void append_step(const Frame& parent, std::string* path) const;

  Status set_scalar(Kind kind, int field, const Scalar& v);
  std::string wanted(Kind kind, int field);
  Status set_root(int field, const Scalar& v);
  Status set_device(int field, const Scalar& v);
  Status set_copy(int field, const Scalar& v);
  Status set_measurement(int field, const Scalar& v);
  Status set_stats(int field, const Scalar& v);
  Status set_check(int field, const Scalar& v);
  Status set_launch(int field, const Scalar& v);
  Status set_counters(int field, const Scalar& v);
  Status set_record(int field, const Scalar& v);
  Status set_provenance(int field, const Scalar& v);
  Status set_phases(int field, const Scalar& v);
  Status set_phase_record(int field, const Scalar& v);
  Status add_phase_name(const Scalar& v);

  void begin(Kind kind, const Frame& parent);
  Status finish_object(const Frame& frame, size_t depth);
  Status finish_record(const std::string& path);
  Status finish_phase_record(const std::string& path);
  Status finish_phases(const std::string& path);
  Status finish_measurement(const std::string& path, size_t index);
  Status check_records(const std::string& path) const;

  std::vector<Frame> frames_;
  uint64_t events_ = 0;  // keys and values so far: which of two refusals came first
  bool parse_failed_ = false;
  size_t parse_error_at_ = 0;
  bool not_session_ = false;
  std::string format_;
  bool version_seen_ = false;
  int version_ = 0;
  Status version_status_;
  std::string error_;  // the first refusal, with its path
  uint64_t error_at_ = 0;
  std::string missing_v2_;  // the first field missing that version 2 requires
  uint64_t missing_v2_at_ = 0;

  Session session_;
  Measurement measurement_;
  LaunchResult launch_;
  KernelRecord record_;
  PhaseRecord phase_record_;
  CopyBandwidth copy_;
  Stats* stats_ = nullptr;              // the chain's or the launch's times
  std::array<int, 3>* dim3_ = nullptr;  // the record's grid or block
  using PointKey = std::tuple<std::string, int64_t, int64_t, int, Precision, CacheMode>;
  std::map<PointKey, size_t> points_;  // every measurement so far, by its point and level
};

// ---- paths ----

// One step down from `parent`: ".name" of the field it is reading, or "[i]" of its element.
void SessionReader::append_step(const Frame& parent, std::string* path) const {
  if (parent.kind == Kind::list || parent.kind == Kind::dim3 || parent.kind == Kind::texts) {
    *path += "[" + std::to_string(parent.index - 1) + "]";
    return;
  }
  if (!path->empty()) *path += ".";
  *path += parent.field >= 0 ? schema_of(parent.kind).fields[parent.field].name : "?";
}

// The path of the container frames_[depth] ("measurements[3].launches"); "" for the root.
std::string SessionReader::path_at(size_t depth) const {
  std::string path;
  for (size_t i = 1; i <= depth && i < frames_.size(); ++i) append_step(frames_[i - 1], &path);
  return path;
}

// The path of the value being read now.
std::string SessionReader::here() const {
  std::string path = path_at(frames_.size() - 1);
  append_step(frames_.back(), &path);
  return path;
}

// ---- events ----

bool SessionReader::key(std::string& name) {
  ++events_;
  Frame& top = frames_.back();
  if (top.kind == Kind::skip) return true;
  const Schema s = schema_of(top.kind);
  top.field = -1;
  for (int i = 0; i < s.count && top.field < 0; ++i) {
    if (name == s.fields[i].name) top.field = i;
  }
  if (top.field < 0) return true;  // a key this build does not read
  // After a refusal only the format and the version are still read (to say what the file is).
  if (top.kind == Kind::root && !error_.empty() && top.field != kFormat && top.field != kVersion) {
    top.field = -1;
    return true;
  }
  const uint32_t bit = uint32_t(1) << top.field;
  if ((top.seen & bit) != 0) {
    std::string message = here() + ": appears twice in one object";
    top.field = -1;  // its value is skipped (at the root, fail() leaves the frame in place)
    return fail(std::move(message), 0);
  }
  top.seen |= bit;
  return true;
}

bool SessionReader::value(const Scalar& v) {
  ++events_;
  if (frames_.empty()) {  // the file is a number, a string, ...
    not_session_ = true;
    return true;
  }
  Frame& top = frames_.back();
  if (top.kind == Kind::skip) return true;
  if (top.kind == Kind::list) {
    ++top.index;
    return fail(here() + ": must be an object, not " + kind_words(v), 0);
  }
  if (top.kind == Kind::texts) {
    ++top.index;
    const Status st = add_phase_name(v);
    return st.ok() || fail(here() + ": " + st.message(), 0);
  }
  if (top.kind == Kind::dim3) {
    ++top.index;
    int n = 0;
    const Status st = read_whole<int>(v, "dimension", 0, INT_MAX, &n);
    if (!st.ok()) return fail(here() + ": " + st.message(), 0);
    if (top.index <= 3) (*dim3_)[top.index - 1] = n;
    return true;
  }
  if (top.field < 0) return true;
  const Field& f = schema_of(top.kind).fields[top.field];
  if (f.shape == Shape::object_or_null && v.type == Scalar::null) return true;  // not measured
  if (f.shape != Shape::scalar) {
    return fail(here() + ": must be " + shape_words(f.shape) + ", not " + kind_words(v), 0);
  }
  if (top.kind == Kind::root && top.field == kVersion) version_seen_ = true;
  const Status st = set_scalar(top.kind, top.field, v);
  return st.ok() || fail(here() + ": " + st.message(), 0);
}

bool SessionReader::open(bool array) {
  ++events_;
  if (frames_.empty()) {
    if (array) not_session_ = true;
    Frame root;
    root.kind = array ? Kind::skip : Kind::root;
    root.open = 1;
    frames_.push_back(root);
    return true;
  }
  Frame& top = frames_.back();
  const char* what = array ? "an array" : "an object";
  switch (top.kind) {
    case Kind::skip:
      ++top.open;
      return true;
    case Kind::list: {
      ++top.index;
      if (array) return fail(here() + ": must be an object, not an array", 1);
      Frame element;
      element.kind = top.element;
      begin(element.kind, top);
      frames_.push_back(element);
      return true;
    }
    case Kind::dim3:
      ++top.index;
      return fail(here() + ": must be a whole number, not " + what, 1);
    case Kind::texts:
      ++top.index;
      return fail(here() + ": must be a string, not " + what, 1);
    default:
      return open_field(array);
  }
}

// An object or an array as the value of the top object's field.
bool SessionReader::open_field(bool array) {
  const Frame& top = frames_.back();
  Frame child;
  if (top.field < 0) {
    child.open = 1;  // Kind::skip
    frames_.push_back(child);
    return true;
  }
  const Field& f = schema_of(top.kind).fields[top.field];
  const char* what = array ? "an array" : "an object";
  if (top.kind == Kind::root && (top.field == kFormat || top.field == kVersion)) {
    // Judged in finish(): a format that is not a string is not ours.
    if (top.field == kVersion) {
      version_seen_ = true;
      version_status_ = Status::Error(std::string("must be a whole number, not ") + what);
    }
    child.open = 1;
    frames_.push_back(child);
    return true;
  }
  const bool is_object = f.shape == Shape::object || f.shape == Shape::object_or_null;
  if (f.shape == Shape::scalar) {
    return fail(here() + ": must be " + wanted(top.kind, top.field) + ", not " + what, 1);
  }
  if (array == is_object)
    return fail(here() + ": must be " + shape_words(f.shape) + ", not " + what, 1);
  child.kind = f.shape == Shape::list    ? Kind::list
               : f.shape == Shape::dim3  ? Kind::dim3
               : f.shape == Shape::texts ? Kind::texts
                                         : f.kind;
  child.element = f.kind;
  begin(child.kind, top);
  frames_.push_back(child);
  return true;
}

bool SessionReader::close() {
  Frame& top = frames_.back();
  if (top.kind == Kind::skip) {
    if (--top.open == 0) frames_.pop_back();
    return true;
  }
  Status st;
  if (top.kind == Kind::dim3 && top.index != 3) {
    st = Status::Error(path_at(frames_.size() - 1) + ": must hold 3 whole numbers, not " +
                       std::to_string(top.index));
  } else if (top.kind != Kind::list && top.kind != Kind::dim3 && top.kind != Kind::texts) {
    st = finish_object(top, frames_.size() - 1);
  }
  frames_.pop_back();
  return st.ok() || fail(st.message(), 0);
}

// Keeps the first refusal and skips the rest of the top-level field it is in: every container
// still open below the root (and `opening`, one being opened now) becomes one skip.
bool SessionReader::fail(std::string message, int opening) {
  if (error_.empty()) {
    error_ = std::move(message);
    error_at_ = events_;
    session_.measurements = {};  // never used now: give the memory back
    points_.clear();
  }
  const int open = static_cast<int>(frames_.size()) - 1 + opening;
  if (frames_.size() > 1) frames_.resize(1);
  if (!frames_.empty() && open > 0) {
    Frame skip;
    skip.open = open;
    frames_.push_back(skip);
  }
  return true;
}

void SessionReader::note_missing_v2(const std::string& path) {
  if (!missing_v2_.empty()) return;
  missing_v2_ = path + " is missing";
  missing_v2_at_ = events_;
}

// ---- values into the session ----

Status SessionReader::set_scalar(Kind kind, int field, const Scalar& v) {
  switch (kind) {
    case Kind::root:
      return set_root(field, v);
    case Kind::device:
      return set_device(field, v);
    case Kind::copy:
      return set_copy(field, v);
    case Kind::measurement:
      return set_measurement(field, v);
    case Kind::stats:
      return set_stats(field, v);
    case Kind::check:
      return set_check(field, v);
    case Kind::launch:
      return set_launch(field, v);
    case Kind::counters:
      return set_counters(field, v);
    case Kind::record:
      return set_record(field, v);
    case Kind::provenance:
      return set_provenance(field, v);
    case Kind::phases:
      return set_phases(field, v);
    case Kind::phase_record:
      return set_phase_record(field, v);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_root(int field, const Scalar& v) {
  switch (field) {
    case kAppVersion:
      return read_name(v, &session_.app_version);
    case kCreatedUtc:
      return read_name(v, &session_.created_utc);
    case kBackend:
      return read_name(v, &session_.backend);
    case kFormat:
      if (v.type == Scalar::text) format_ = *v.text_value;
      return Status::Ok();
    case kVersion:
      // Judged in finish(), after the format: a file that is not a session is called that.
      version_status_ = read_whole<int>(v, "version", INT_MIN, INT_MAX, &version_);
      return Status::Ok();
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_device(int field, const Scalar& v) {
  DeviceFacts& d = session_.device;
  switch (field) {
    case kName:
      return read_name(v, &d.name);
    case kCc: {
      if (v.type == Scalar::text && parse_compute_capability(*v.text_value, &d)) {
        return Status::Ok();
      }
      return Status::Error("must be MAJOR.MINOR like \"9.0\", not " + shown(v));
    }
    case kSms:
      return read_count(v, &d.sm_count);
    case kL2:
      return read_whole<int64_t>(v, "byte count", 0, INT64_MAX, &d.l2_bytes);
    case kMemory:
      return read_whole<int64_t>(v, "byte count", 0, INT64_MAX, &d.memory_bytes);
    case kDriver:
      return read_whole<int>(v, "version", 0, INT_MAX, &d.driver_version);
    case kRuntime:
      return read_whole<int>(v, "version", 0, INT_MAX, &d.runtime_version);
    case kRoof:
      return read_gbps(v, &d.roof_gbps);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_copy(int field, const Scalar& v) {
  switch (field) {
    case kCopyBytes:
      return read_bytes(v, &copy_.bytes);
    case kCopyCache:
      return read_choice(v, parse_cache_mode, "cold or warm", &copy_.cache);
    case kCopyGbps:
      return read_gbps(v, &copy_.gbps);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_measurement(int field, const Scalar& v) {
  Measurement& m = measurement_;
  switch (field) {
    case kLesson:
      return read_name(v, &m.lesson);
    case kSize:  // size, row length and level are checked against the lesson when it closes
      return read_whole<int64_t>(v, "size", INT64_MIN, INT64_MAX, &m.size);
    case kInner:
      return read_whole<int64_t>(v, "row length", INT64_MIN, INT64_MAX, &m.inner);
    case kLevel:
      return read_whole<int>(v, "level", 0, INT_MAX, &m.level);
    case kLevelName:
      return read_name(v, &m.level_name);
    case kPrecision:
      return read_choice(v, parse_precision, "fp32 or bf16", &m.precision);
    case kCache:
      return read_choice(v, parse_cache_mode, "cold or warm", &m.cache);
    case kTiming:  // a name: the app writes cupti_activity or cuda_events, tests write others
      return read_name(v, &m.timing_method);
    case kRepetitions:
      return read_count(v, &m.repetitions);
    case kChainGbps:
      return read_gbps(v, &m.chain_copy_gbps);
    case kCountersStatus:
      return read_choice(v, parse_counters_status,
                         "measured, pending, not_measured, unavailable or failed",
                         &m.counters_status);
    case kCountersNote:
      return read_note(v, &m.counters_note);
    case kGpuSmClock:
      m.gpu.sampled = true;
      return read_whole<int>(v, "clock", 0, 100000, &m.gpu.sm_clock_mhz, "MHz");
    case kGpuMemoryClock:
      m.gpu.sampled = true;
      return read_whole<int>(v, "clock", 0, 100000, &m.gpu.memory_clock_mhz, "MHz");
    case kGpuSmClockMax:
      m.gpu.sampled = true;
      return read_whole<int>(v, "clock", 0, 100000, &m.gpu.sm_clock_max_mhz, "MHz");
    case kGpuThrottle:
      m.gpu.sampled = true;
      if (v.type != Scalar::text || !parse_throttle_reasons(*v.text_value, &m.gpu.throttle_reasons))
        return Status::Error(
            "must be a list of sw_power_cap, hw_slowdown, sw_thermal, "
            "hw_thermal, hw_power_brake, not " +
            shown(v));
      return Status::Ok();
    case kGpuOtherProcesses:
      m.gpu.sampled = true;
      return read_whole<int>(v, "count", 0, 100000, &m.gpu.other_processes);
    case kChosenAsCc:  // compute capability x 10, from sm_70 up
      return read_whole<int>(v, "compute capability", 70, 1000, &m.chosen_as_cc);
    case kPeakDeviceBytes:
      return read_bytes(v, &m.peak_device_bytes);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_stats(int field, const Scalar& v) {
  Stats& s = *stats_;
  switch (field) {
    case kMedian:
      return read_time_us(v, &s.median);
    case kMin:
      return read_time_us(v, &s.min);
    case kMax:
      return read_time_us(v, &s.max);
    case kP20:
      return read_time_us(v, &s.p20);
    case kP80:
      return read_time_us(v, &s.p80);
    case kCount:
      return read_count(v, &s.count);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_provenance(int field, const Scalar& v) {
  Provenance& p = measurement_.provenance;
  switch (field) {
    case kProvGpu:
      return read_name(v, &p.gpu);
    case kProvDriver:
      return read_whole<int>(v, "version", 0, INT_MAX, &p.driver_version);
    case kProvUtc:
      return read_name(v, &p.measured_utc);
    case kProvApp:
      return read_name(v, &p.app_version);
    case kProvSource:
      return read_name(v, &p.source);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_check(int field, const Scalar& v) {
  CheckResult& c = measurement_.check;
  switch (field) {
    case kRelL2:
      return read_non_negative(v, &c.rel_l2_error);
    case kMaxAbs:
      return read_non_negative(v, &c.max_abs_error);
    case kNonFinite:
      return read_whole<int64_t>(v, "count", 0, INT64_MAX, &c.non_finite);
    case kTolerance:
      return read_non_negative(v, &c.tolerance);
    case kPassed:
      return read_flag(v, &c.passed);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_launch(int field, const Scalar& v) {
  LaunchTraffic& t = launch_.textbook;
  switch (field) {
    case kKernel:
      return read_name(v, &t.kernel);
    case kBytesRead:
      return read_bytes(v, &t.bytes_read);
    case kBytesWritten:
      return read_bytes(v, &t.bytes_written);
    case kFlops:
      return read_non_negative(v, &t.flops);
    case kCopyGbpsL:
      return read_gbps(v, &launch_.copy_gbps);
    case kVariant:
      return read_name(v, &launch_.variant);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_counters(int field, const Scalar& v) {
  LaunchCounters& c = *launch_.counters;
  switch (field) {
    case kDramRead:
      return read_bytes(v, &c.dram_read_bytes);
    case kDramWrite:
      return read_bytes(v, &c.dram_write_bytes);
    case kL2Bytes:
      return read_bytes(v, &c.l2_bytes);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_record(int field, const Scalar& v) {
  KernelRecord& r = record_;
  switch (field) {
    case kLaunch:
      return read_whole<int>(v, "launch index", 0, INT_MAX, &r.launch);
    case kRecordKernel:
      return read_name(v, &r.kernel);
    case kStart:
      return read_whole<uint64_t>(v, "timestamp", 0, UINT64_MAX, &r.start_ns);
    case kEnd:
      return read_whole<uint64_t>(v, "timestamp", 0, UINT64_MAX, &r.end_ns);
    case kStartRel:
      return read_whole<int64_t>(v, "time", 0, kMaxRepetitionNs, &r.start_rel_ns, "an hour");
    case kEndRel:
      return read_whole<int64_t>(v, "time", 0, kMaxRepetitionNs, &r.end_rel_ns, "an hour");
    case kStream:
      return read_whole<uint32_t>(v, "stream id", 0, kMaxStreamId, &r.stream_id, "2^30");
    case kCorrelation:
      return read_whole<uint32_t>(v, "id", 0, UINT32_MAX, &r.correlation_id);
    case kRegisters:
      return read_count(v, &r.registers_per_thread);
    case kStaticShared:
      return read_count(v, &r.static_shared_bytes);
    case kDynamicShared:
      return read_count(v, &r.dynamic_shared_bytes);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_phases(int field, const Scalar& v) {
  LaunchPhases& p = *launch_.phases;
  switch (field) {
    case kPhaseLost:
      return read_whole<int64_t>(v, "count", 0, INT64_MAX, &p.lost);
    case kTimeOff:
      return read_time_us(v, &p.time_off_us);
    case kTimeOn:
      return read_time_us(v, &p.time_on_us);
    default:
      return Status::Ok();
  }
}

Status SessionReader::set_phase_record(int field, const Scalar& v) {
  PhaseRecord& r = phase_record_;
  const uint64_t kMaxNs = static_cast<uint64_t>(kMaxRepetitionNs);
  switch (field) {
    case kPhStart:
      return read_whole<uint64_t>(v, "time", 0, kMaxNs, &r.start_ns, "an hour");
    case kPhEnd:
      return read_whole<uint64_t>(v, "time", 0, kMaxNs, &r.end_ns, "an hour");
    case kPhBlock:
      return read_whole<uint32_t>(v, "block index", 0, UINT32_MAX, &r.block);
    case kPhSm:
      return read_whole<uint16_t>(v, "SM index", 0, UINT16_MAX, &r.sm);
    case kPhPhase:
      return read_whole<uint16_t>(v, "phase index", 0,
                                  static_cast<uint16_t>(LaunchPhases::kMaxNames - 1), &r.phase);
    case kPhArg:
      return read_whole<uint32_t>(v, "argument", 0, UINT32_MAX, &r.arg);
    case kPhWait:
      return read_whole<uint32_t>(v, "time", 0, UINT32_MAX, &r.wait_ns);
    default:
      return Status::Ok();
  }
}

// One of a launch's phase names (at most LaunchPhases::kMaxNames).
Status SessionReader::add_phase_name(const Scalar& v) {
  std::vector<std::string>& names = launch_.phases->names;
  if (names.size() >= LaunchPhases::kMaxNames) {
    return Status::Error("more than " + std::to_string(LaunchPhases::kMaxNames) +
                         " phase names (a kernel declares at most that many)");
  }
  std::string name;
  FL_TRY(read_name(v, &name));
  names.push_back(std::move(name));
  return Status::Ok();
}

// What a scalar field takes, in words ("a whole number", "fp32 or bf16"): its reader's refusal
// of null, "must be X, not null", cut to X. Every reader refuses null and writes nothing then
// (the root's format and version, which do not, never get here).
std::string SessionReader::wanted(Kind kind, int field) {
  const std::string refusal = set_scalar(kind, field, Scalar{}).message();
  const size_t from = refusal.find("must be ");
  const size_t to = refusal.rfind(", not ");
  if (from == std::string::npos || to == std::string::npos || to < from + 8) return "a value";
  return refusal.substr(from + 8, to - from - 8);
}

// ---- objects opening and closing ----

// Before a container of `kind` is read, as the value of `parent`'s field or its element.
void SessionReader::begin(Kind kind, const Frame& parent) {
  switch (kind) {
    case Kind::copy:
      copy_ = CopyBandwidth();
      break;
    case Kind::measurement:
      measurement_ = Measurement();
      break;
    case Kind::launch:
      launch_ = LaunchResult();
      break;
    case Kind::record:
      record_ = KernelRecord();
      break;
    case Kind::phases:
      launch_.phases.emplace();
      break;
    case Kind::phase_record:
      phase_record_ = PhaseRecord();
      break;
    case Kind::stats:
      stats_ = parent.kind == Kind::launch ? &launch_.time_us : &measurement_.chain_time_us;
      break;
    case Kind::counters:
      launch_.counters.emplace();
      break;
    case Kind::dim3:
      dim3_ = parent.field == kGrid ? &record_.grid : &record_.block;
      break;
    default:
      break;
  }
}

// When the object frames_[depth] closes: every field there (a missing version-2 field is noted,
// not refused: the version may come later), then the checks that need the whole object.
Status SessionReader::finish_object(const Frame& frame, size_t depth) {
  const Schema s = schema_of(frame.kind);
  // The root's format and version are judged in finish().
  const int required = frame.kind == Kind::root ? kFormat : s.count;
  const std::string path = path_at(depth);
  for (int i = 0; i < required; ++i) {
    if ((frame.seen & (uint32_t(1) << i)) != 0) continue;
    const std::string field = path + (path.empty() ? "" : ".") + s.fields[i].name;
    if (s.fields[i].optional) continue;
    if (!s.fields[i].v2_only) return Status::Error(field + " is missing");
    note_missing_v2(field);
  }
  switch (frame.kind) {
    case Kind::copy:
      // As many as the live engine keeps: more is no recording of ours, and memory.
      if (session_.device.copy_bandwidth.size() >= kMaxCopyReferences) {
        return Status::Error("device.copy_bandwidth: more than " +
                             std::to_string(kMaxCopyReferences) +
                             " entries (the live engine keeps at most that many)");
      }
      session_.device.copy_bandwidth.push_back(copy_);
      return Status::Ok();
    case Kind::launch:
      measurement_.launches.push_back(std::move(launch_));
      return Status::Ok();
    case Kind::record:
      return finish_record(path);
    case Kind::phase_record:
      return finish_phase_record(path);
    case Kind::phases:
      return finish_phases(path);
    case Kind::measurement:
      return finish_measurement(path, frames_[depth - 1].index - 1);
    default:
      return Status::Ok();
  }
}

// Recordings made before launches named their variant (schema version 2) still say which kernel
// ran: the kernel records' CUPTI names, matched against the level's variants.
void name_variants_from_records(Measurement* m) {
  const Lesson* lesson = find_lesson(m->lesson);
  if (lesson == nullptr || m->level < 0 || m->level >= lesson->level_count()) return;
  const std::vector<VariantInfo>& variants = lesson->info().levels[m->level].variants;
  if (variants.empty()) return;
  for (const KernelRecord& r : m->records) {
    if (r.launch < 0 || r.launch >= static_cast<int>(m->launches.size())) continue;
    LaunchResult& launch = m->launches[r.launch];
    if (launch.variant.empty()) {
      launch.variant = variant_of_kernel(variants, launch.textbook.kernel, r.kernel);
    }
  }
}

Status SessionReader::finish_record(const std::string& path) {
  if (record_.end_ns < record_.start_ns) {
    return Status::Error(path + ": ends before it starts (end_ns " +
                         std::to_string(record_.end_ns) + " < start_ns " +
                         std::to_string(record_.start_ns) + ")");
  }
  if (record_.end_rel_ns < record_.start_rel_ns) {
    return Status::Error(path + ": ends before it starts (end_rel_ns " +
                         std::to_string(record_.end_rel_ns) + " < start_rel_ns " +
                         std::to_string(record_.start_rel_ns) + ")");
  }
  measurement_.records.push_back(std::move(record_));
  return Status::Ok();
}

Status SessionReader::finish_phase_record(const std::string& path) {
  if (phase_record_.end_ns < phase_record_.start_ns) {
    return Status::Error(path + ": ends before it starts (end_ns " +
                         std::to_string(phase_record_.end_ns) + " < start_ns " +
                         std::to_string(phase_record_.start_ns) + ")");
  }
  std::vector<PhaseRecord>& records = launch_.phases->records;
  if (records.size() >= LaunchPhases::kMaxRecords) {
    return Status::Error(path + ": more than " + std::to_string(LaunchPhases::kMaxRecords) +
                         " phase records in one launch (the live engine keeps at most that many)");
  }
  records.push_back(phase_record_);
  return Status::Ok();
}

// Every record's phase is one the launch names.
Status SessionReader::finish_phases(const std::string& path) {
  const LaunchPhases& p = *launch_.phases;
  for (size_t i = 0; i < p.records.size(); ++i) {
    if (p.records[i].phase >= p.names.size()) {
      return Status::Error(path + ".records[" + std::to_string(i) + "].phase: names phase " +
                           std::to_string(p.records[i].phase) + ", but the launch names " +
                           std::to_string(p.names.size()));
    }
  }
  return Status::Ok();
}

// A measurement's records name launches it has, and are one repetition: the trace export lays
// them out from the earliest start, so they span at most an hour.
Status SessionReader::check_records(const std::string& path) const {
  const Measurement& m = measurement_;
  uint64_t first_start = std::numeric_limits<uint64_t>::max();
  for (const KernelRecord& r : m.records) first_start = std::min(first_start, r.start_ns);
  for (size_t i = 0; i < m.records.size(); ++i) {
    const KernelRecord& r = m.records[i];
    const std::string at = path + ".records[" + std::to_string(i) + "]";
    if (r.launch >= static_cast<int>(m.launches.size())) {
      return Status::Error(at + ".launch: names launch " + std::to_string(r.launch) +
                           ", but the measurement has " + std::to_string(m.launches.size()) +
                           (m.launches.size() == 1 ? " launch" : " launches"));
    }
    if (r.end_ns - first_start > static_cast<uint64_t>(kMaxRepetitionNs)) {
      return Status::Error(at + ".end_ns: more than an hour after the measurement's first record");
    }
  }
  return Status::Ok();
}

Status SessionReader::finish_measurement(const std::string& path, size_t index) {
  const Measurement& m = measurement_;
  FL_TRY(check_recorded_point(path + ".lesson", path, m.lesson, m.size, m.inner, m.level,
                              m.precision));
  FL_TRY(check_records(path));
  const auto [it, fresh] =
      points_.emplace(PointKey{m.lesson, m.size, m.inner, m.level, m.precision, m.cache}, index);
  if (!fresh) {
    return Status::Error(path + ": repeats measurements[" + std::to_string(it->second) +
                         "] (same lesson, size, row length, level, precision and cache)");
  }
  name_variants_from_records(&measurement_);
  session_.measurements.push_back(std::move(measurement_));
  return Status::Ok();
}

// Version 1 predates the counter phase: its measurements carry no counters or records, and its
// device no copy bandwidths, whatever the file holds under those names.
void drop_version2_fields(Session* s) {
  s->device.copy_bandwidth.clear();
  for (Measurement& m : s->measurements) {
    m.counters_status = CountersStatus::not_measured;
    m.counters_note.clear();
    m.records.clear();
    for (LaunchResult& l : m.launches) {
      l.counters.reset();
      l.phases.reset();
    }
  }
}

Status SessionReader::finish(Session* out) {
  if (parse_failed_) {
    return Status::Error("not valid JSON at byte " + std::to_string(parse_error_at_) +
                         " (truncated or corrupted?)");
  }
  if (not_session_ || format_ != "fusionlab-session") {
    return Status::Error("not a Fusion Lab session (no \"format\": \"fusionlab-session\")");
  }
  if (!version_seen_) return Status::Error("schema_version is missing");
  if (!version_status_.ok()) return version_status_.with_context("schema_version");
  if (version_ < Session::kOldestSchemaVersion || version_ > Session::kSchemaVersion) {
    return Status::Error("schema version " + std::to_string(version_) +
                         " is not supported (this build reads versions " +
                         std::to_string(Session::kOldestSchemaVersion) + " to " +
                         std::to_string(Session::kSchemaVersion) + ")");
  }
  const bool v2_missing = version_ >= 2 && !missing_v2_.empty();
  if (!error_.empty() && (!v2_missing || error_at_ < missing_v2_at_)) {
    return Status::Error(error_);
  }
  if (v2_missing) return Status::Error(missing_v2_);
  session_.device.usable = true;
  if (version_ < 2) drop_version2_fields(&session_);
  fill_provenance(&session_);  // a file of an older build: the session's own facts
  // Phase timelines came with version 3: an older file's are no recording of ours.
  if (version_ < 3) {
    for (Measurement& m : session_.measurements) {
      for (LaunchResult& l : m.launches) l.phases.reset();
    }
  }
  *out = std::move(session_);
  return Status::Ok();
}

// Parses `input` (a string or a stream) with a SessionReader.
template <typename Input>
Status read_session(Input&& input, Session* out) {
  SessionReader reader;
  json::sax_parse(std::forward<Input>(input), &reader);
  return reader.finish(out);
}

}  // namespace

// ---- [SECTION] entry points -------------------------------------------------------------------

std::string session_to_json(const Session& s, int indent) {
  // The session without its measurements, then each measurement dumped on its own and put in
  // the empty list's place: the text nlohmann would write for the whole, without ever holding
  // the whole as a JSON tree.
  const json head = {{"format", "fusionlab-session"}, {"schema_version", Session::kSchemaVersion},
                     {"app_version", s.app_version},  {"created_utc", s.created_utc},
                     {"backend", s.backend},          {"device", device_json(s.device)},
                     {"measurements", json::array()}};
  const std::string text = head.dump(indent);
  if (s.measurements.empty()) return text + "\n";
  const std::string empty = indent < 0 ? "\"measurements\":[]" : "\"measurements\": []";
  const size_t at = text.find(empty) + empty.size() - 1;  // the ']'; the key is unique
  const std::string pad = indent < 0 ? "" : std::string(2 * static_cast<size_t>(indent), ' ');
  std::string out = text.substr(0, at);
  for (size_t i = 0; i < s.measurements.size(); ++i) {
    if (i > 0) out += ',';
    if (indent >= 0) out += "\n" + pad;
    json m = measurement_json(s.measurements[i]);
    const Provenance& p = s.measurements[i].provenance;
    if (p.known() && !same_as_session(p, s)) m["provenance"] = provenance_json(p);
    append_indented(m.dump(indent), pad, &out);
  }
  if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent), ' ');
  out.append(text, at, std::string::npos);
  return out + "\n";
}

Status session_from_json(const std::string& text, Session* out) {
  return read_session(text, out);
}

Status save_session(const Session& session, const std::string& path) {
  const std::string text = session_to_json(session);
  // The app never writes a recording it would refuse to read (`bench --sizes 1M,1M` measures one
  // point twice, which the loader refuses as a repeat).
  Session reread;
  const Status readable = session_from_json(text, &reread);
  if (!readable.ok()) {
    return Status::Error(shorten_for_message(path, kShownPathChars) +
                         ": not saved, it would not load: " + readable.message());
  }
  return write_file_atomically(path, text);
}

Status load_session(const std::string& path, Session* out) {
  // A regular file under the cap, checked before a byte is read (a FIFO or /dev/zero would
  // never end), then parsed as it is read; every refusal names the file.
  Session session;
  Status parsed;
  FL_TRY(read_file_streamed(path, kMaxSessionFileBytes, "session file", [&](std::istream& in) {
    parsed = read_session(in, &session);
    return Status::Ok();
  }));
  FL_TRY(parsed.with_context(shorten_for_message(path, kShownPathChars)));
  *out = std::move(session);
  return Status::Ok();
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
