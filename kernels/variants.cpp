// Kernel variants (kernels/level_table.h): where a variant can run, where the table prefers it,
// and the table's choice, as plain functions of shape, precision and GPU, so that the command
// line, the lesson panel and the CPU tests ask the same question the workspace asks at launch.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/ffn/ffn_hidden_slice_plan.h"
#include "kernels/ffn/ffn_stream_plan.h"
#include "kernels/ffn/ffn_two_phase_plan.h"
#include "kernels/lesson.h"
#include "kernels/level_table.h"

#ifndef FUSIONLAB_REPLAY_ONLY
#include <cuda_runtime_api.h>
#endif

namespace fl {
namespace {

std::string cc_text(int cc) {
  return std::to_string(cc / 10) + "." + std::to_string(cc % 10);
}

std::string size_text(int64_t s) {
  return std::to_string(s);
}

// "at 1-64 tokens", "from 256 tokens", "at every size".
std::string range_text(int64_t from, int64_t to, const std::string& unit) {
  if (to > 0) return "at " + size_text(from) + "-" + size_text(to) + " " + unit;
  if (from > 1) return "from " + size_text(from) + " " + unit;
  return "at every size";
}

std::string precisions_text(const std::vector<Precision>& ps) {
  std::string out;
  for (Precision p : ps) out += std::string(out.empty() ? "" : " or ") + to_string(p);
  return out;
}

}  // namespace

namespace {
thread_local int chosen_shared_optin = 0;
}  // namespace

int shared_optin_of_cc(int cc) {
  switch (cc) {
    case 70:
    case 72:
      return 96 * 1024;
    case 75:
      return 64 * 1024;
    case 80:
    case 87:
      return 163 * 1024;
    case 86:
    case 89:
      return 99 * 1024;
    case 90:
      return 227 * 1024;
    default:
      return 0;
  }
}

int chosen_gpu_shared_optin() {
  return chosen_shared_optin;
}

int planned_shared_optin(int device_optin) {
  const int chosen = chosen_gpu_shared_optin();
  return chosen > 0 && chosen < device_optin ? chosen : device_optin;
}

std::vector<int> plannable_shared_optins(int device_optin) {
  std::vector<int> out{device_optin};
  for (int bytes : {227 * 1024, 163 * 1024, 99 * 1024, 96 * 1024, 64 * 1024}) {
    if (bytes < device_optin) out.push_back(bytes);
  }
  return out;
}

ChosenGpuSharedOptin::ChosenGpuSharedOptin(int bytes) : before_(chosen_shared_optin) {
  chosen_shared_optin = bytes;
}

ChosenGpuSharedOptin::~ChosenGpuSharedOptin() {
  chosen_shared_optin = before_;
}

GpuFacts current_gpu_facts() {
  GpuFacts facts;
#ifndef FUSIONLAB_REPLAY_ONLY
  static std::mutex mutex;
  static std::map<int, GpuFacts> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return facts;
  }
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = known.find(device);
  if (it != known.end()) return it->second;
  if (cudaDeviceGetAttribute(&facts.cc_major, cudaDevAttrComputeCapabilityMajor, device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&facts.cc_minor, cudaDevAttrComputeCapabilityMinor, device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&facts.sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return GpuFacts{};
  }
#ifdef FUSIONLAB_WGMMA
  facts.wgmma_build = true;
#endif
  if (cudaDeviceGetAttribute(&facts.shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device) != cudaSuccess) {
    cudaGetLastError();
    facts.shared_optin = 0;
  }
  known[device] = facts;
#endif
  return facts;
}

std::string shared_plan_cannot_fit(const std::string& plan, const Where& where) {
  const int cc = where.gpu.cc_major * 10 + where.gpu.cc_minor;
  const int optin = where.gpu.shared_optin > 0 ? where.gpu.shared_optin : shared_optin_of_cc(cc);
  const int64_t m = where.dims.s, c = where.dims.i;
  const int e = int(where.dims.b), sms = where.gpu.sms;
  if (plan.empty() || optin <= 0 || sms <= 0 || c < 1 || (e != 2 && e != 4)) return "";
  bool fits = true;
  if (plan == "ffn_hidden_slice") {
    FfnSlicePlan p;
    fits = ffn_slice_choose_plan(m, c, e, sms, optin, &p);
  } else if (plan == "ffn_two_phase") {
    FfnTwoPhasePlan p;
    fits = e == 2 && ffn_two_phase_plan_for(m, c, sms, optin, &p);
  } else if (plan == "ffn_stream") {
    FfnPlan p;
    fits = ffn_choose_plan(m, c, e, sms, optin, &p);
  }
  if (fits) return "";
  return "its plan does not fit one block an SM in " + std::to_string(optin / 1024) +
         " KiB of shared memory a block at " + size_text(m) + " x " + size_text(c);
}

std::string variant_cannot_run(const VariantInfo& v, const Where& where,
                               const std::function<std::string(const Dims&)>& shape_check) {
  const VariantRange& r = v.range;
  const int cc = where.gpu.cc_major * 10 + where.gpu.cc_minor;
  const std::string gpu = "this GPU is " + cc_text(cc);
  if (r.min_cc > 0 && cc < r.min_cc) {
    return "needs compute capability " + cc_text(r.min_cc) + " or newer; " + gpu;
  }
  if (r.max_cc > 0 && cc > r.max_cc) {
    return "runs on compute capability " + cc_text(r.max_cc) + " at most; " + gpu;
  }
  if (r.wgmma_build && !where.gpu.wgmma_build) {
    return "needs a build with the sm_90a (wgmma) kernels; this one has none";
  }
  if (!r.precisions.empty()) {
    bool found = false;
    for (Precision p : r.precisions) found = found || p == where.precision;
    if (!found) return "runs in " + precisions_text(r.precisions) + " only";
  }
  if (r.max_size > 0 && where.dims.s > r.max_size) {
    return "takes at most " + size_text(r.max_size) + ", not " + size_text(where.dims.s);
  }
  const std::string why = shape_check ? shape_check(where.dims) : std::string();
  return why.empty() ? shared_plan_cannot_fit(r.shared_plan, where) : why;
}

bool variant_preferred(const VariantInfo& v, const Where& where) {
  const int64_t s = where.dims.s;
  const int cc = where.gpu.cc_major * 10 + where.gpu.cc_minor;
  if (v.range.prefer_max_cc > 0 && cc > v.range.prefer_max_cc) return false;
  int64_t from = v.range.prefer_from, to = v.range.prefer_to;
  for (const PreferByInner& b : v.range.prefer_by_inner) {
    if (where.dims.i >= b.inner_from) from = b.prefer_from, to = b.prefer_to;
  }
  return s >= from && (to <= 0 || s <= to);
}

std::string variant_where(const VariantInfo& v, const std::string& unit,
                          const std::string& inner_name) {
  const VariantRange& r = v.range;
  std::vector<std::string> parts;
  if (r.min_cc > 0 && r.min_cc == r.max_cc) {
    parts.push_back("compute capability " + cc_text(r.min_cc));
  } else if (r.min_cc > 0) {
    parts.push_back("compute capability " + cc_text(r.min_cc) + "+");
  } else {
    parts.push_back("every GPU");
  }
  if (r.wgmma_build) parts.back() += " (a build with sm_90a)";
  if (!r.precisions.empty()) parts.push_back(precisions_text(r.precisions));
  if (r.max_size > 0) parts.push_back("up to " + size_text(r.max_size) + " " + unit);
  if (!r.shared_plan.empty()) parts.push_back("where its plan fits a block's shared memory");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  // A range preferred only past the sizes it takes (a kernel kept as a lesson's measured form):
  // the table runs it only when forced.
  if (r.max_size > 0 && r.prefer_from > r.max_size && r.prefer_by_inner.empty()) {
    return out + "; preferred nowhere (runs when forced: bench --variant)";
  }
  out += "; preferred " + range_text(r.prefer_from, r.prefer_to, unit);
  for (const PreferByInner& b : r.prefer_by_inner) {
    const bool nowhere = b.prefer_to > 0 && b.prefer_from > b.prefer_to;  // (an empty range)
    out += ", " + (inner_name.empty() ? std::string("row length") : inner_name) + " " +
           size_text(b.inner_from) + "+ " +
           (nowhere ? std::string("nowhere") : range_text(b.prefer_from, b.prefer_to, unit));
  }
  if (r.prefer_max_cc > 0) out += " up to compute capability " + cc_text(r.prefer_max_cc);
  return out;
}

VariantChoice choose_variant(const std::vector<VariantInfo>& variants, const Where& where,
                             const std::vector<std::function<std::string(const Dims&)>>& checks,
                             const std::string& unit, const std::vector<bool>& skip) {
  VariantChoice choice;
  int fallback = -1;
  std::string passed_over;  // preferred here, but cannot run: the first one, and why
  for (size_t k = 0; k < variants.size(); ++k) {
    if (k < skip.size() && skip[k]) continue;
    const std::string why =
        variant_cannot_run(variants[k], where, k < checks.size() ? checks[k] : nullptr);
    const bool preferred = variant_preferred(variants[k], where);
    if (!why.empty()) {
      if (preferred && passed_over.empty()) passed_over = variants[k].name + " " + why;
      continue;
    }
    fallback = static_cast<int>(k);
    if (preferred) {
      choice.index = fallback;
      break;
    }
  }
  const std::string at = "at " + size_text(where.dims.s) + " " + unit + " in " +
                         to_string(where.precision) + " on compute capability " +
                         cc_text(where.gpu.cc_major * 10 + where.gpu.cc_minor) + " (" +
                         std::to_string(where.gpu.sms) + " SMs)";
  if (fallback < 0) {
    choice.reason = at + " no kernel variant can run" +
                    (passed_over.empty() ? std::string() : " (" + passed_over + ")");
    return choice;
  }
  const bool preferred = choice.index >= 0;
  if (!preferred) choice.index = fallback;
  const VariantInfo& v = variants[choice.index];
  choice.name = v.name;
  choice.reason = at + " " + v.launch + " runs " + v.name + ": " + v.what;
  if (!preferred) choice.reason += " (no variant prefers this size; it is the last that can run)";
  if (!passed_over.empty()) choice.reason += " (" + passed_over + ")";
  return choice;
}

std::string variant_of_kernel(const std::vector<VariantInfo>& variants, const std::string& launch,
                              const std::string& kernel) {
  // The function's own name: before its template arguments or parameters, after its scopes
  // ("(anonymous namespace)" is the one parenthesis that is not a parameter list).
  std::string name = kernel;
  const std::string anonymous = "(anonymous namespace)::";
  for (size_t at; (at = name.find(anonymous)) != std::string::npos;)
    name.erase(at, anonymous.size());
  name = name.substr(0, name.find_first_of("<("));
  const size_t space = name.rfind(' ');
  if (space != std::string::npos) name = name.substr(space + 1);
  const size_t scope = name.rfind("::");
  if (scope != std::string::npos) name = name.substr(scope + 2);
  for (const VariantInfo& v : variants) {
    if (v.launch == launch && !v.function.empty() && v.function == name) return v.name;
  }
  // A variant's second kernel is named after its first: "ffn_hidden_slice_kernel" also owns
  // "ffn_hidden_slice_exchange_kernel" (the stem and a part between). The longest stem wins.
  const std::string suffix = "_kernel";
  const auto ends_with = [&](const std::string& s) {
    return s.size() > suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::string best;
  size_t best_stem = 0;
  if (!ends_with(name)) return "";
  for (const VariantInfo& v : variants) {
    if (v.launch != launch || !ends_with(v.function)) continue;
    const std::string stem = v.function.substr(0, v.function.size() - suffix.size()) + "_";
    if (name.size() > stem.size() + suffix.size() && name.compare(0, stem.size(), stem) == 0 &&
        stem.size() > best_stem) {
      best = v.name, best_stem = stem.size();
    }
  }
  return best;
}

VariantChoice Lesson::choose_variant(int level, int launch, Shape shape, Precision p,
                                     const GpuFacts& gpu) const {
  const auto& levels = info().levels;
  if (level < 0 || level >= static_cast<int>(levels.size())) return {};
  const FusionLevel& fl = levels[level];
  if (launch < 0 || launch >= static_cast<int>(fl.launches.size())) return {};
  std::vector<VariantInfo> mine;
  for (const VariantInfo& v : fl.variants) {
    if (v.launch == fl.launches[launch]) mine.push_back(v);
  }
  if (mine.empty()) return {};
  shape = resolve(shape);
  const Where where{{shape.size, shape.inner, bytes_per_element(p)}, p, gpu};
  VariantChoice choice = fl::choose_variant(mine, where, {}, info().size_axis.unit);
  // Index into the level's variants, not this launch's.
  if (choice.index >= 0) {
    for (size_t k = 0; k < fl.variants.size(); ++k) {
      if (fl.variants[k].launch == fl.launches[launch] && fl.variants[k].name == choice.name) {
        choice.index = static_cast<int>(k);
      }
    }
  }
  return choice;
}

}  // namespace fl
