// The lesson catalog as data: written by the full build, read by the replay-only build
// (catalog_data.h says why and how traffic becomes data).
#include "kernels/catalog_data.h"

#include "kernels/level_table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace fl {
namespace {

using nlohmann::json;

// The terms of a traffic polynomial, in the order of Poly::c, and their names in the JSON.
constexpr int kTerms = 6;
const std::array<const char*, kTerms> kTermNames = {"1", "s", "i", "s*i", "i^2", "s*i^2"};

template <typename T>
struct Poly {
  std::array<T, kTerms> c{};
  T at(int64_t s, int64_t i) const {
    const T ts = static_cast<T>(s), ti = static_cast<T>(i);
    return c[0] + c[1] * ts + c[2] * ti + c[3] * ts * ti + c[4] * ti * ti + c[5] * ts * ti * ti;
  }
};

struct LaunchPoly {
  std::string kernel;
  Poly<int64_t> read, written;
  Poly<double> flops;
};

// ---- fitting (full build) -------------------------------------------------------------------

// The shapes the terms are fitted at: s in {1, 2} times i in {1, 2, 3}, exactly enough for a
// polynomial of degree 1 in s and 2 in i. Small integers keep the arithmetic exact.
constexpr int64_t kFitS[2] = {1, 2};
constexpr int64_t kFitI[3] = {1, 2, 3};
// Where the fit is checked: odd, large and lesson-sized shapes.
constexpr int64_t kCheckShapes[][2] = {{7, 5},       {1000, 768},  {3, 4099},   {65536, 1024},
                                       {16384, 768}, {1 << 20, 1}, {12345, 321}};

// q(i) = a + b*i + c*i^2 from q(1), q(2), q(3). Fails (returns false) when the coefficients
// are not whole numbers, which a byte count's must be.
template <typename T>
bool fit_quadratic(const T q[3], T* a, T* b, T* c) {
  const T second = q[2] - 2 * q[1] + q[0];  // 2c
  if constexpr (std::is_integral_v<T>) {
    if (second % 2 != 0) return false;
  }
  *c = second / 2;
  *b = q[1] - q[0] - 3 * *c;
  *a = q[0] - *b - *c;
  return true;
}

// P(s, i) = A(i) + s*B(i) from its values at kFitS x kFitI: values[si][ii].
template <typename T>
bool fit(const T values[2][3], Poly<T>* out) {
  T at_s0[3], slope[3];
  for (int ii = 0; ii < 3; ++ii) {
    slope[ii] = values[1][ii] - values[0][ii];  // kFitS are 1 and 2: one step of s
    at_s0[ii] = values[0][ii] - slope[ii];
  }
  T a0, a1, a2, b0, b1, b2;
  if (!fit_quadratic(at_s0, &a0, &a1, &a2) || !fit_quadratic(slope, &b0, &b1, &b2)) return false;
  out->c = {a0, b0, a1, b1, a2, b2};  // 1, s, i, s*i, i^2, s*i^2
  return true;
}

bool flops_match(double want, double got) {
  return std::abs(want - got) <= 1e-12 * std::max(1.0, std::abs(want));
}

Status fit_level(const Lesson& lesson, int level, Precision p, std::vector<LaunchPoly>* out) {
  const std::string where =
      lesson.info().id + " level " + std::to_string(level) + " " + to_string(p);
  std::vector<LaunchTraffic> at[2][3];
  for (int si = 0; si < 2; ++si) {
    for (int ii = 0; ii < 3; ++ii)
      at[si][ii] = lesson.traffic(level, Shape(kFitS[si], kFitI[ii]), p);
  }
  const size_t launches = at[0][0].size();
  out->clear();
  for (size_t k = 0; k < launches; ++k) {
    LaunchPoly poly;
    poly.kernel = at[0][0][k].kernel;
    int64_t read[2][3], written[2][3];
    double flops[2][3];
    for (int si = 0; si < 2; ++si) {
      for (int ii = 0; ii < 3; ++ii) {
        const auto& t = at[si][ii];
        if (t.size() != launches || t[k].kernel != poly.kernel) {
          return Status::Error(where +
                               ": its launches change with the shape, which the catalog "
                               "cannot write down");
        }
        read[si][ii] = t[k].bytes_read;
        written[si][ii] = t[k].bytes_written;
        flops[si][ii] = t[k].flops;
      }
    }
    if (!fit(read, &poly.read) || !fit(written, &poly.written) || !fit(flops, &poly.flops)) {
      return Status::Error(where + " launch " + poly.kernel +
                           ": its textbook bytes are not a "
                           "whole-number polynomial in 1, s, i, s*i, i^2, s*i^2");
    }
    out->push_back(poly);
  }
  for (const auto& shape : kCheckShapes) {
    const std::vector<LaunchTraffic> want = lesson.traffic(level, Shape(shape[0], shape[1]), p);
    bool same = want.size() == out->size();
    for (size_t k = 0; same && k < want.size(); ++k) {
      const LaunchPoly& poly = (*out)[k];
      same = want[k].kernel == poly.kernel &&
             want[k].bytes_read == poly.read.at(shape[0], shape[1]) &&
             want[k].bytes_written == poly.written.at(shape[0], shape[1]) &&
             flops_match(want[k].flops, poly.flops.at(shape[0], shape[1]));
    }
    if (!same) {
      return Status::Error(where + ": traffic() at " + std::to_string(shape[0]) + " x " +
                           std::to_string(shape[1]) +
                           " is not the polynomial in 1, s, i, s*i, "
                           "i^2, s*i^2 fitted at small shapes; extend kernels/catalog_data.cpp");
    }
  }
  return Status::Ok();
}

template <typename T>
json poly_to_json(const Poly<T>& poly) {
  json out = json::object();
  for (int t = 0; t < kTerms; ++t) {
    if (poly.c[t] != 0) out[kTermNames[t]] = poly.c[t];
  }
  return out;
}

// ---- reading (replay-only build) ------------------------------------------------------------

template <typename T>
Poly<T> poly_from_json(const json& j) {
  if (!j.is_object()) throw std::runtime_error("a traffic polynomial is not an object");
  Poly<T> poly;
  for (auto it = j.begin(); it != j.end(); ++it) {
    int t = 0;
    while (t < kTerms && it.key() != kTermNames[t]) ++t;
    if (t == kTerms) throw std::runtime_error("unknown traffic term '" + it.key() + "'");
    poly.c[t] = it.value().template get<T>();
  }
  return poly;
}

class DataLesson final : public Lesson {
 public:
  DataLesson(LessonInfo info,
             std::vector<std::vector<std::pair<Precision, std::vector<LaunchPoly>>>> traffic)
      : info_(std::move(info)), traffic_(std::move(traffic)) {}

  const LessonInfo& info() const override { return info_; }

  std::vector<LaunchTraffic> traffic(int level, Shape shape, Precision p) const override {
    if (level < 0 || level >= static_cast<int>(traffic_.size())) return {};
    shape = resolve(shape);
    for (const auto& [precision, launches] : traffic_[level]) {
      if (precision != p) continue;
      std::vector<LaunchTraffic> out;
      for (const LaunchPoly& l : launches) {
        out.push_back({l.kernel, l.read.at(shape.size, shape.inner),
                       l.written.at(shape.size, shape.inner), l.flops.at(shape.size, shape.inner)});
      }
      return out;
    }
    return {};
  }

  int64_t workspace_bytes(Shape, Precision) const override { return 0; }

  Status create_workspace(Shape, Precision, std::unique_ptr<Workspace>*) const override {
    return Status::Error(info_.id +
                         " cannot run here: this build of fusionlab has no CUDA "
                         "(configured with FUSIONLAB_CUDA=OFF), so it replays recordings only");
  }

  std::vector<HostTensor> reference(const std::vector<HostTensor>&) const override { return {}; }
  double tolerance(Precision) const override { return 0; }

 private:
  LessonInfo info_;
  std::vector<std::vector<std::pair<Precision, std::vector<LaunchPoly>>>> traffic_;  // [level]
};

// A kernel variant (kernels/lesson.h's VariantInfo) as catalog JSON, and back. "where" is the
// range in words, for people reading the file; the range itself is what is read back.
json variant_to_json(const VariantInfo& v, const SizeAxis& axis) {
  json precisions = json::array();
  for (Precision p : v.range.precisions) precisions.push_back(to_string(p));
  json out = {{"launch", v.launch},
              {"name", v.name},
              {"what", v.what},
              {"function", v.function},
              {"where", variant_where(v, axis.unit, axis.inner_name)},
              {"range",
               {{"min_cc", v.range.min_cc},
                {"max_cc", v.range.max_cc},
                {"wgmma_build", v.range.wgmma_build},
                {"precisions", precisions},
                {"max_size", v.range.max_size},
                {"prefer_from", v.range.prefer_from},
                {"prefer_to", v.range.prefer_to},
                {"prefer_max_cc", v.range.prefer_max_cc}}},
              {"phases", v.phases}};
  // Written only where a variant has it, so the other variants' entries stay as they were.
  for (const PreferByInner& b : v.range.prefer_by_inner)
    out["range"]["prefer_by_inner"].push_back(
        {{"inner_from", b.inner_from}, {"prefer_from", b.prefer_from}, {"prefer_to", b.prefer_to}});
  if (!v.range.shared_plan.empty()) out["range"]["shared_plan"] = v.range.shared_plan;
  return out;
}

VariantInfo variant_from_json(const json& j) {
  VariantInfo v;
  v.launch = j.at("launch").get<std::string>();
  v.name = j.at("name").get<std::string>();
  v.what = j.at("what").get<std::string>();
  v.function = j.at("function").get<std::string>();
  const json& r = j.at("range");
  v.range.min_cc = r.at("min_cc").get<int>();
  v.range.max_cc = r.at("max_cc").get<int>();
  v.range.wgmma_build = r.at("wgmma_build").get<bool>();
  for (const json& name : r.at("precisions")) {
    Precision p;
    if (!parse_precision(name.get<std::string>(), &p)) {
      throw std::runtime_error("unknown precision '" + name.get<std::string>() + "'");
    }
    v.range.precisions.push_back(p);
  }
  v.range.max_size = r.at("max_size").get<int64_t>();
  v.range.prefer_from = r.at("prefer_from").get<int64_t>();
  v.range.prefer_to = r.at("prefer_to").get<int64_t>();
  v.range.prefer_max_cc = r.value("prefer_max_cc", 0);  // absent in catalogs written before it
  v.range.shared_plan = r.value("shared_plan", std::string());  // written only where set
  for (const json& b : r.value("prefer_by_inner", json::array())) {
    v.range.prefer_by_inner.push_back({b.at("inner_from").get<int64_t>(),
                                       b.at("prefer_from").get<int64_t>(),
                                       b.at("prefer_to").get<int64_t>()});
  }
  v.phases = j.at("phases").get<std::vector<std::string>>();
  return v;
}

std::unique_ptr<Lesson> lesson_from_json(const json& j) {
  LessonInfo info;
  info.id = j.at("id").get<std::string>();
  info.title = j.at("title").get<std::string>();
  info.formula = j.at("formula").get<std::string>();
  const json& axis = j.at("size_axis");
  info.size_axis.unit = axis.at("unit").get<std::string>();
  info.size_axis.min = axis.at("min").get<int64_t>();
  info.size_axis.max = axis.at("max").get<int64_t>();
  info.size_axis.default_size = axis.at("default").get<int64_t>();
  info.size_axis.inner_name = axis.at("inner_name").get<std::string>();
  info.size_axis.inner_default = axis.at("inner_default").get<int64_t>();
  info.size_axis.inner_max = axis.at("inner_max").get<int64_t>();
  for (const json& name : j.at("precisions")) {
    Precision p;
    if (!parse_precision(name.get<std::string>(), &p)) {
      throw std::runtime_error("unknown precision '" + name.get<std::string>() + "'");
    }
    info.precisions.push_back(p);
  }
  std::vector<std::vector<std::pair<Precision, std::vector<LaunchPoly>>>> traffic;
  for (const json& level : j.at("levels")) {
    FusionLevel fl_level;
    fl_level.name = level.at("name").get<std::string>();
    fl_level.summary = level.at("summary").get<std::string>();
    fl_level.launches = level.at("launches").get<std::vector<std::string>>();
    fl_level.on_chip = level.at("on_chip").get<std::string>();
    if (level.contains("variants")) {
      for (const json& v : level.at("variants")) fl_level.variants.push_back(variant_from_json(v));
    }
    info.levels.push_back(fl_level);
    traffic.emplace_back();
    const json& by_precision = level.at("traffic");
    if (!by_precision.is_object()) throw std::runtime_error("a level's traffic is not an object");
    for (auto it = by_precision.begin(); it != by_precision.end(); ++it) {
      Precision p;
      if (!parse_precision(it.key(), &p))
        throw std::runtime_error("unknown precision '" + it.key() + "'");
      std::vector<LaunchPoly> polys;
      for (const json& launch : it.value()) {
        LaunchPoly poly;
        poly.kernel = launch.at("kernel").get<std::string>();
        poly.read = poly_from_json<int64_t>(launch.at("bytes_read"));
        poly.written = poly_from_json<int64_t>(launch.at("bytes_written"));
        poly.flops = poly_from_json<double>(launch.at("flops"));
        polys.push_back(poly);
      }
      traffic.back().emplace_back(p, std::move(polys));
    }
  }
  if (info.levels.empty()) throw std::runtime_error(info.id + " has no levels");
  return std::make_unique<DataLesson>(std::move(info), std::move(traffic));
}

}  // namespace

Status catalog_to_json(const std::vector<const Lesson*>& lessons, std::string* out) {
  json catalog;
  catalog["catalog_version"] = kCatalogVersion;
  catalog["about"] =
      "The lesson catalog as data: written by `fusionlab lessons --json` (a build with CUDA), "
      "read by the replay-only build. Traffic per launch: bytes and FLOPs as sums of terms in "
      "s (the size along the size axis) and i (the row length; 0 for elementwise lessons).";
  json all = json::array();
  for (const Lesson* lesson : lessons) {
    const LessonInfo& info = lesson->info();
    json levels = json::array();
    for (int level = 0; level < static_cast<int>(info.levels.size()); ++level) {
      json traffic = json::object();
      for (Precision p : info.precisions) {
        std::vector<LaunchPoly> polys;
        FL_TRY(fit_level(*lesson, level, p, &polys));
        json launches = json::array();
        for (const LaunchPoly& poly : polys) {
          launches.push_back({{"kernel", poly.kernel},
                              {"bytes_read", poly_to_json(poly.read)},
                              {"bytes_written", poly_to_json(poly.written)},
                              {"flops", poly_to_json(poly.flops)}});
        }
        traffic[to_string(p)] = launches;
      }
      json entry = {{"level", level},
                    {"name", info.levels[level].name},
                    {"summary", info.levels[level].summary},
                    {"launches", info.levels[level].launches},
                    {"on_chip", info.levels[level].on_chip},
                    {"traffic", traffic}};
      if (!info.levels[level].variants.empty()) {
        json variants = json::array();
        for (const VariantInfo& v : info.levels[level].variants) {
          variants.push_back(variant_to_json(v, info.size_axis));
        }
        entry["variants"] = variants;
      }
      levels.push_back(entry);
    }
    json precisions = json::array();
    for (Precision p : info.precisions) precisions.push_back(to_string(p));
    all.push_back({{"id", info.id},
                   {"title", info.title},
                   {"formula", info.formula},
                   {"size_axis",
                    {{"unit", info.size_axis.unit},
                     {"min", info.size_axis.min},
                     {"max", info.size_axis.max},
                     {"default", info.size_axis.default_size},
                     {"inner_name", info.size_axis.inner_name},
                     {"inner_default", info.size_axis.inner_default},
                     {"inner_max", info.size_axis.inner_max}}},
                   {"levels", levels},
                   {"precisions", precisions}});
  }
  catalog["lessons"] = all;
  *out = catalog.dump(2);
  return Status::Ok();
}

Status catalog_from_json(const std::string& text, std::vector<std::unique_ptr<Lesson>>* out) {
  out->clear();
  try {
    const json catalog = json::parse(text);
    const int version = catalog.at("catalog_version").get<int>();
    if (version != kCatalogVersion) {
      return Status::Error("lesson catalog version " + std::to_string(version) +
                           " is not supported (this build reads version " +
                           std::to_string(kCatalogVersion) + ")");
    }
    for (const json& lesson : catalog.at("lessons")) out->push_back(lesson_from_json(lesson));
  } catch (const std::exception& e) {
    out->clear();
    return Status::Error(std::string("the lesson catalog is malformed: ") + e.what());
  }
  if (out->empty()) return Status::Error("the lesson catalog holds no lessons");
  return Status::Ok();
}

}  // namespace fl
