#include "model/peers.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "model/file_io.h"
#include "model/session_json.h"

namespace fl {
namespace {

using nlohmann::json;

constexpr double kMaxMicroseconds = 3.6e9;  // an hour
// sdpa: F.scaled_dot_product_attention with its default backend; sdpa_flash and sdpa_efficient:
// pinned to its FlashAttention-2 and memory-efficient backends (scripts/peers.py).
const char* const kPeers[] = {"eager", "compile",    "cuda_graph",
                              "sdpa",  "sdpa_flash", "sdpa_efficient"};

bool has_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20; });
}

// Field readers: each names the field it refuses, so a message reads "series[3].points[2]: ...".
Status get_string(const json& j, const char* key, const std::string& where, std::string* out) {
  const auto it = j.find(key);
  if (it == j.end()) return Status::Error(where + ": missing \"" + key + "\"");
  if (!it->is_string()) return Status::Error(where + "." + key + ": not a string");
  *out = it->get<std::string>();
  if (has_control(*out)) return Status::Error(where + "." + key + ": holds a control character");
  return Status::Ok();
}

Status get_number(const json& j, const char* key, const std::string& where, double lo, double hi,
                  double* out) {
  const auto it = j.find(key);
  if (it == j.end()) return Status::Error(where + ": missing \"" + key + "\"");
  if (!it->is_number()) return Status::Error(where + "." + key + ": not a number");
  *out = it->get<double>();
  if (!std::isfinite(*out) || *out < lo || *out > hi) {
    return Status::Error(where + "." + key + ": " + it->dump() + " is out of range");
  }
  return Status::Ok();
}

Status get_integer(const json& j, const char* key, const std::string& where, int64_t lo, int64_t hi,
                   int64_t* out) {
  double v = 0;
  FL_TRY(get_number(j, key, where, static_cast<double>(lo), static_cast<double>(hi), &v));
  if (v != std::floor(v)) return Status::Error(where + "." + key + ": not a whole number");
  *out = static_cast<int64_t>(v);
  return Status::Ok();
}

Status read_point(const json& j, const std::string& where, PeerPoint* p) {
  if (!j.is_object()) return Status::Error(where + ": not an object");
  int64_t count = 0;
  FL_TRY(get_integer(j, "size", where, 1, int64_t(1) << 40, &p->size));
  FL_TRY(get_integer(j, "inner", where, 0, int64_t(1) << 24, &p->inner));
  FL_TRY(get_number(j, "median_us", where, 0, kMaxMicroseconds, &p->median_us));
  FL_TRY(get_number(j, "p20_us", where, 0, kMaxMicroseconds, &p->p20_us));
  FL_TRY(get_number(j, "p80_us", where, 0, kMaxMicroseconds, &p->p80_us));
  FL_TRY(get_integer(j, "count", where, 1, 1 << 30, &count));
  p->count = static_cast<int>(count);
  FL_TRY(get_number(j, "rel_l2_error", where, 0, 1e30, &p->rel_l2_error));
  const auto passed = j.find("passed");
  if (passed == j.end() || !passed->is_boolean()) {
    return Status::Error(where + ": \"passed\" is missing or not true/false");
  }
  p->passed = passed->get<bool>();
  return Status::Ok();
}

Status read_series(const json& j, const std::string& where, PeerSeries* s) {
  if (!j.is_object()) return Status::Error(where + ": not an object");
  std::string precision;
  FL_TRY(get_string(j, "lesson", where, &s->lesson));
  FL_TRY(get_string(j, "precision", where, &precision));
  if (!parse_precision(precision, &s->precision)) {
    return Status::Error(where + ".precision: \"" + precision + "\" is not fp32 or bf16");
  }
  FL_TRY(get_string(j, "peer", where, &s->peer));
  if (std::find(std::begin(kPeers), std::end(kPeers), s->peer) == std::end(kPeers)) {
    return Status::Error(where + ".peer: \"" + s->peer +
                         "\" is not eager, compile, cuda_graph, sdpa, sdpa_flash or "
                         "sdpa_efficient");
  }
  FL_TRY(get_string(j, "label", where, &s->label));
  FL_TRY(check_lesson_name(where + ".lesson", s->lesson));
  const auto points = j.find("points");
  if (points == j.end() || !points->is_array()) {
    return Status::Error(where + ": \"points\" is missing or not a list");
  }
  std::map<std::pair<int64_t, int64_t>, size_t> seen;  // (size, row length) -> its index
  for (size_t i = 0; i < points->size(); ++i) {
    PeerPoint p;
    const std::string at = where + ".points[" + std::to_string(i) + "]";
    FL_TRY(read_point((*points)[i], at, &p));
    // The same catalog rules as a session's measurements (session_json.h), and one point per
    // size and row length: a peer's time at a size is one number.
    FL_TRY(
        check_recorded_point(where + ".lesson", at, s->lesson, p.size, p.inner, -1, s->precision));
    const auto [it, fresh] = seen.emplace(std::make_pair(p.size, p.inner), i);
    if (!fresh) {
      return Status::Error(at + ": repeats " + where + ".points[" + std::to_string(it->second) +
                           "] (same size and row length)");
    }
    s->points.push_back(p);
  }
  std::sort(s->points.begin(), s->points.end(),
            [](const PeerPoint& a, const PeerPoint& b) { return a.size < b.size; });
  return Status::Ok();
}

}  // namespace

std::string PeerFile::recorded_on() const {
  return device_name + ", " + created_utc.substr(0, 10);
}

std::vector<const PeerSeries*> PeerFile::find(const std::string& lesson,
                                              Precision precision) const {
  std::vector<const PeerSeries*> found;
  for (const PeerSeries& s : series) {
    if (s.lesson == lesson && s.precision == precision) found.push_back(&s);
  }
  return found;
}

Status peers_from_json(const std::string& text, PeerFile* out) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error("not JSON");
  if (!j.is_object()) return Status::Error("not a JSON object");
  std::string format;
  FL_TRY(get_string(j, "format", "file", &format));
  if (format != "fusionlab-peers") {
    return Status::Error("not a peer file (format is \"" + format + "\", not \"fusionlab-peers\")");
  }
  int64_t version = 0;
  FL_TRY(get_integer(j, "schema_version", "file", 1, 1000, &version));
  if (version != PeerFile::kSchemaVersion) {
    return Status::Error("peer file version " + std::to_string(version) +
                         " is not one this app reads (1)");
  }
  PeerFile f;
  FL_TRY(get_string(j, "created_utc", "file", &f.created_utc));
  FL_TRY(get_string(j, "timing", "file", &f.timing));
  const auto device = j.find("device");
  if (device == j.end() || !device->is_object()) return Status::Error("\"device\" is missing");
  FL_TRY(get_string(*device, "name", "device", &f.device_name));
  FL_TRY(get_string(*device, "compute_capability", "device", &f.compute_capability));
  FL_TRY(get_string(*device, "driver", "device", &f.driver));
  FL_TRY(get_number(*device, "copy_gbps", "device", 0, 1e6, &f.copy_gbps));
  const auto software = j.find("software");
  if (software == j.end() || !software->is_object())
    return Status::Error("\"software\" is missing");
  FL_TRY(get_string(*software, "torch", "software", &f.torch_version));
  FL_TRY(get_string(*software, "triton", "software", &f.triton_version));
  FL_TRY(get_string(*software, "cuda", "software", &f.cuda_version));
  const auto series = j.find("series");
  if (series == j.end() || !series->is_array()) {
    return Status::Error("\"series\" is missing or not a list");
  }
  std::map<std::tuple<std::string, Precision, std::string>, size_t> seen;
  for (size_t i = 0; i < series->size(); ++i) {
    PeerSeries s;
    const std::string at = "series[" + std::to_string(i) + "]";
    FL_TRY(read_series((*series)[i], at, &s));
    const auto [it, fresh] = seen.emplace(std::make_tuple(s.lesson, s.precision, s.peer), i);
    if (!fresh) {
      return Status::Error(at + ": repeats series[" + std::to_string(it->second) +
                           "] (same lesson, precision and peer)");
    }
    f.series.push_back(std::move(s));
  }
  *out = std::move(f);
  return Status::Ok();
}

Status load_peer_file(const std::string& path, PeerFile* out) {
  std::string text;
  FL_TRY(read_file_checked(path, kMaxPeerFileBytes, "peer file", &text));
  return peers_from_json(text, out).with_context(shorten_for_message(path, kShownPathChars));
}

std::vector<const PeerSeries*> compile_first(std::vector<const PeerSeries*> series) {
  std::stable_sort(series.begin(), series.end(), [](const PeerSeries* a, const PeerSeries* b) {
    return a->peer == "compile" && b->peer != "compile";
  });
  return series;
}

double peer_median_at(const PeerSeries& series, int64_t size) {
  for (const PeerPoint& p : series.points) {
    if (p.size == size) return p.passed ? p.median_us : 0.0;
  }
  return 0.0;
}

std::string find_shipped_peer_file(const std::string& assets, const std::string& gpu_name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(assets) / "recordings", ec)) {
    const fs::path candidate = entry.path() / "peers.json";
    std::error_code file_ec;
    if (fs::is_regular_file(candidate, file_ec)) files.push_back(candidate);
  }
  if (files.empty()) return {};
  std::sort(files.begin(), files.end());
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    PeerFile f;
    if (!gpu_name.empty() && load_peer_file(it->string(), &f).ok() && f.device_name == gpu_name) {
      return it->string();
    }
  }
  return files.back().string();
}

}  // namespace fl
