// The level table: one declaration per lesson that lists its fusion ladder (DESIGN.md §3).
//
// Each level has a name, a one-sentence summary for the learner, what stays on chip (registers,
// shared memory) instead of making a trip through HBM, and its launches in order. Each launch
// has the kernel name the charts show, the launcher that enqueues it on a workspace's buffers,
// and its textbook traffic (bytes it must read and write, FLOPs) as a formula of the shape and
// precision. A lesson states a level once, here; the rest is derived from the table:
//   - LessonInfo::levels (names, summaries, launch names)      fusion_levels()
//   - Lesson::traffic()                                        level_traffic()
//   - Workspace::launch(level, launch)                         launch_from()
// LevelLesson and LevelWorkspace below are the small bases that wire those into the Lesson and
// Workspace interfaces. A lesson reads like llm.c's dev/cuda files: reference, kernels,
// launchers, the workspace that owns the buffers, then the ladder in one place (the workspace's
// static levels(), whose launchers may use its private buffers).
//
// The table's type is per workspace type, and a workspace is a template on the element type
// (float, __nv_bfloat16), so each lesson has one table per element type, built by the same
// template (Ws::levels()). Names and formulas do not depend on the element type (the formula
// reads the bytes per element from Dims); the lesson's info and traffic read the fp32 table.
//
// A launch may list kernel variants (VariantRow): several kernels that compute the same launch,
// each best on some shapes, precisions or GPUs (a cluster kernel at a few tokens, a wgmma kernel
// at many). The choice is the table's, a function of shape, precision and GPU (choose_variant,
// callable on the CPU): the first variant that can run and prefers the size, else the last that
// can run. A forced variant (`bench --variant LAUNCH=VARIANT`) replaces the choice, and is
// refused with one line where it cannot run; the workspace remembers which variant each launch
// ran, for the measurement's records.
//
// Plain C++: no CUDA header, so the table machinery is tested on the CPU in both builds.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/lesson.h"

namespace fl {

// What a textbook formula reads. The letters are catalog.json's (kernels/catalog_data.h): the
// catalog writes every formula down as a polynomial in s and i, so a formula must be one, with
// the terms 1, s, i, s*i, i^2, s*i^2 (`lessons --json` and the CatalogData tests name a lesson
// that breaks that).
struct Dims {
  int64_t s = 0;  // the size along the size axis: elements, rows or tokens
  int64_t i = 0;  // the row length (Shape::inner resolved); 0 for elementwise lessons
  int64_t b = 0;  // bytes per element of the lesson's tensors: 4 (fp32) or 2 (bf16)

  // What row-wise formulas say again and again: a tensor of s rows x i elements, its bytes, and
  // one fp32 value per row (a row statistic: a mean, a max).
  int64_t elements() const { return s * i; }
  int64_t tensor_bytes() const { return s * i * b; }
  int64_t row_stat_bytes() const { return s * int64_t(sizeof(float)); }
};

// What a kernel variant's choice reads: the shape (dims.s along the size axis, dims.i the row
// length, dims.b bytes per element), the precision and the GPU.
struct Where {
  Dims dims;
  Precision precision = Precision::fp32;
  GpuFacts gpu;
};

// The GPU this process runs its kernels on (cached per device), with whether this build has the
// wgmma kernels; all zero in the replay-only build or without a GPU (kernels/variants.cpp).
GpuFacts current_gpu_facts();

// "" when the plan named `plan` (VariantRange::shared_plan: "ffn_hidden_slice", "ffn_stream")
// fits at `where`: one block an SM within where.gpu.shared_optin bytes of shared memory a block
// (0: shared_optin_of_cc's), the plan function its kernel's launch calls; else one line why not.
// "" also where the GPU is not known (no SMs) or the plan has no name.
std::string shared_plan_cannot_fit(const std::string& plan, const Where& where);
// "" when `v` can run at `where` (its range's GPU, build, precision and size, `shape_check`
// when given, and its shared plan's fit), else one line saying why not.
std::string variant_cannot_run(const VariantInfo& v, const Where& where,
                               const std::function<std::string(const Dims&)>& shape_check = {});
// Whether the table prefers `v` at where.dims.s (its range's prefer_from .. prefer_to, or those of
// the last prefer_by_inner entry that where.dims.i reaches) on this GPU (prefer_max_cc).
bool variant_preferred(const VariantInfo& v, const Where& where);
// Where `v` runs, in words: "sm_90 built for sm_90a, bf16, up to 64 tokens; preferred at 1-64";
// `inner_name` names the row length of a prefer_by_inner entry ("head size d 128+ at every size").
std::string variant_where(const VariantInfo& v, const std::string& unit,
                          const std::string& inner_name = "");
// The table's choice among `variants` (one launch's, in table order) at `where`: the first that
// can run and is preferred, else the last that can run; `skip[k]` leaves variant k out (one
// that found at launch time that it cannot run here). `checks[k]` is variant k's shape check
// (may be empty); `unit` the size axis's. The reason is one sentence.
VariantChoice choose_variant(const std::vector<VariantInfo>& variants, const Where& where,
                             const std::vector<std::function<std::string(const Dims&)>>& checks,
                             const std::string& unit, const std::vector<bool>& skip = {});

// The textbook traffic of one launch: the fewest bytes it must move through device memory
// (each input read once, each output written once) and the arithmetic it must do.
struct Textbook {
  int64_t read = 0;
  int64_t written = 0;
  double flops = 0;
};

// One launch of a level, run on a workspace of type Ws. The launcher and the formula are usually
// lambdas written in the table; std::function lets a helper that builds rows shared by several
// lessons (gemm_common.cuh's Linear-layer rows) keep what it was given.
// One kernel variant of a launch (see the top of this file). A launcher that finds, as it
// plans, that it cannot run here after all returns Status::Unsupported: the table then takes the
// next choice (a forced variant fails with that message).
template <class Ws>
struct VariantRow {
  std::string name;      // "ffn_cluster"
  std::string what;      // one sentence: what it does differently
  std::string function;  // its kernel function's name, as CUPTI reports it ("ffn_cluster_kernel")
  VariantRange range;    // where it can run, and the size range the table prefers it in
  std::function<Status(Ws&, cudaStream_t)> launch;  // enqueues it on the workspace's buffers
  // Optional: "" when it can run at this shape, else one line why not ("C is not a multiple
  // of 32").
  std::function<std::string(const Dims&)> shape_check;
  // The phases its kernel records (kernels/phases.h), declared to the workspace after each of
  // its launches; empty when it records none.
  std::vector<std::string> phases;
};

template <class Ws>
struct LaunchRow {
  std::string kernel;                               // the name the timeline and memory chart show
  std::function<Status(Ws&, cudaStream_t)> launch;  // enqueues it on the workspace's buffers
  std::function<Textbook(const Dims&)> textbook;    // its textbook traffic at a shape and precision
  // Empty: the launch runs one kernel, `launch`. Otherwise its kernels, one of which runs
  // (`launch` is then unused and may be null).
  std::vector<VariantRow<Ws>> variants;
};

template <class Ws>
VariantInfo variant_info(const LaunchRow<Ws>& launch, const VariantRow<Ws>& v) {
  return {launch.kernel, v.name, v.what, v.function, v.range, v.phases};
}

template <class Ws>
std::vector<VariantInfo> variant_infos(const LaunchRow<Ws>& launch) {
  std::vector<VariantInfo> out;
  for (const VariantRow<Ws>& v : launch.variants) out.push_back(variant_info(launch, v));
  return out;
}

template <class Ws>
std::vector<std::function<std::string(const Dims&)>> variant_checks(const LaunchRow<Ws>& launch) {
  std::vector<std::function<std::string(const Dims&)>> out;
  for (const VariantRow<Ws>& v : launch.variants) out.push_back(v.shape_check);
  return out;
}

// One rung of the fusion ladder.
template <class Ws>
struct LevelRow {
  std::string name;     // "unfused", "fused"
  std::string summary;  // one sentence for the learner
  std::string on_chip;  // what stays in registers or shared memory instead of going to HBM
  std::vector<LaunchRow<Ws>> launches;
};

// levels[0] is the unfused chain, the last is fully fused.
template <class Ws>
using LevelTable = std::vector<LevelRow<Ws>>;

// ---- what is derived from a table ------------------------------------------------------------

template <class Ws>
std::vector<FusionLevel> fusion_levels(const LevelTable<Ws>& table) {
  std::vector<FusionLevel> out;
  for (const LevelRow<Ws>& level : table) {
    FusionLevel info{level.name, level.summary, {}, level.on_chip, {}};
    for (const LaunchRow<Ws>& launch : level.launches) {
      info.launches.push_back(launch.kernel);
      for (const VariantRow<Ws>& v : launch.variants) {
        info.variants.push_back(variant_info(launch, v));
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

// Textbook traffic of every launch of `level`, in launch order, at a resolved shape (inner
// filled in); empty for a level the table does not have.
template <class Ws>
std::vector<LaunchTraffic> level_traffic(const LevelTable<Ws>& table, int level, Shape shape,
                                         Precision p) {
  if (level < 0 || level >= static_cast<int>(table.size())) return {};
  const Dims dims{shape.size, shape.inner, bytes_per_element(p)};
  std::vector<LaunchTraffic> out;
  for (const LaunchRow<Ws>& launch : table[level].launches) {
    const Textbook t = launch.textbook(dims);
    out.push_back({launch.kernel, t.read, t.written, t.flops});
  }
  return out;
}

// Checks `level` and `launch` against the table and points *row at the launch's row.
template <class Ws>
Status find_launch(const LevelTable<Ws>& table, int level, int launch, const LaunchRow<Ws>** row) {
  if (level < 0 || level >= static_cast<int>(table.size())) {
    return Status::Error("there is no fusion level " + std::to_string(level) + " (levels 0.." +
                         std::to_string(table.size() - 1) + ")");
  }
  const auto& launches = table[level].launches;
  if (launch < 0 || launch >= static_cast<int>(launches.size())) {
    return Status::Error("level " + std::to_string(level) + " has no launch " +
                         std::to_string(launch) + " (it has " + std::to_string(launches.size()) +
                         ")");
  }
  *row = &launches[launch];
  return Status::Ok();
}

// Enqueues launch `launch` of `level` on `ws` (a launch without variants).
template <class Ws>
Status launch_from(const LevelTable<Ws>& table, Ws& ws, int level, int launch,
                   cudaStream_t stream) {
  const LaunchRow<Ws>* row = nullptr;
  FL_TRY(find_launch(table, level, launch, &row));
  return row->launch(ws, stream);
}

// Enqueues the variant of `row` that `forced` names, or else the table's choice at `where`
// (moving on to the next choice when a variant's launcher finds it cannot run here); *ran gets
// the variant's name.
template <class Ws>
Status launch_variant(const LaunchRow<Ws>& row, Ws& ws, const Where& where,
                      const std::string& forced, const std::string& unit, cudaStream_t stream,
                      std::string* ran) {
  const auto& variants = row.variants;
  if (!forced.empty()) {
    for (const VariantRow<Ws>& v : variants) {
      if (v.name != forced) continue;
      const std::string why = variant_cannot_run(variant_info(row, v), where, v.shape_check);
      if (!why.empty()) return Status::Error(forced + " cannot run here: " + why);
      *ran = v.name;
      FL_TRY(v.launch(ws, stream).with_context(forced));
      if (!v.phases.empty()) ws.declare_phases(v.phases);
      return Status::Ok();
    }
    return Status::Error(row.kernel + " has no variant '" + forced + "'");
  }
  const std::vector<VariantInfo> infos = variant_infos(row);
  const auto checks = variant_checks(row);
  std::vector<bool> skip(variants.size(), false);
  std::string why_not = row.kernel + ": no kernel variant can run here";
  for (size_t tries = 0; tries < variants.size(); ++tries) {
    const VariantChoice choice = choose_variant(infos, where, checks, unit, skip);
    if (choice.index < 0) break;
    *ran = choice.name;
    const VariantRow<Ws>& v = variants[choice.index];
    const Status st = v.launch(ws, stream).with_context(choice.name);
    if (st.ok() && !v.phases.empty()) ws.declare_phases(v.phases);
    if (!st.unsupported()) return st;
    why_not = st.message();
    skip[choice.index] = true;
  }
  ran->clear();
  return Status::Error(why_not);
}

// ---- the bases ---------------------------------------------------------------------------------

// A Workspace whose launch() is its level table's. Ws derives from LevelWorkspace<Ws> and has
// `static const LevelTable<Ws>& levels()`.
// A workspace whose table has variants states its shape and precision (set_where) in its
// constructor: the choice reads them.
template <class Ws>
class LevelWorkspace : public Workspace {
 public:
  Status launch(int level, int launch, cudaStream_t stream) final {
    const LaunchRow<Ws>* row = nullptr;
    FL_TRY(find_launch(Ws::levels(), level, launch, &row));
    if (row->variants.empty()) return row->launch(static_cast<Ws&>(*this), stream);
    // Without its shape every shape check would refuse, and the table would fall back silently.
    if (where_.dims.s == 0) {
      return Status::Error(row->kernel +
                           ": the workspace states no shape for its variants (set_where)");
    }
    if (where_.gpu.sms == 0) where_.gpu = current_gpu_facts();
    const auto forced = forced_.find(row->kernel);
    Where where = where_;
    // As an older GPU would choose: its compute capability, no wgmma. A forced variant is
    // checked against this GPU, where it runs.
    if (choose_as_cc_ > 0 && forced == forced_.end()) {
      where.gpu.cc_major = choose_as_cc_ / 10;
      where.gpu.cc_minor = choose_as_cc_ % 10;
      where.gpu.wgmma_build = false;
      // ... and its shared memory a block where that is less (the plans take the same:
      // planned_shared_optin), so that the choice asks whether their plans fit that GPU.
      const int chosen = shared_optin_of_cc(choose_as_cc_);
      if (chosen > 0 && (where.gpu.shared_optin == 0 || chosen < where.gpu.shared_optin)) {
        where.gpu.shared_optin = chosen;
      }
    }
    std::string& ran = ran_[{level, launch}];
    const ChosenGpuSharedOptin shared(
        choose_as_cc_ > 0 && forced == forced_.end() ? shared_optin_of_cc(choose_as_cc_) : 0);
    return launch_variant(*row, static_cast<Ws&>(*this), where,
                          forced == forced_.end() ? std::string() : forced->second, unit_, stream,
                          &ran);
  }

  Status force_variant(const std::string& launch, const std::string& variant) final {
    bool found = false;
    for (const LevelRow<Ws>& level : Ws::levels()) {
      for (const LaunchRow<Ws>& row : level.launches) {
        if (row.kernel != launch || row.variants.empty()) continue;
        for (const VariantRow<Ws>& v : row.variants) found = found || v.name == variant;
        if (variant.empty()) found = true;
      }
    }
    if (!found) return Status::Error("no launch '" + launch + "' with a variant '" + variant + "'");
    if (variant.empty()) {
      forced_.erase(launch);
    } else {
      forced_[launch] = variant;
    }
    return Status::Ok();
  }

  void choose_as(int cc) final { choose_as_cc_ = cc; }

  std::string variant_ran(int level, int launch) const final {
    const auto it = ran_.find({level, launch});
    return it == ran_.end() ? std::string() : it->second;
  }

  // The GPU the choice reads (tests name one; by default the current device's, on first use).
  void set_gpu(const GpuFacts& gpu) { where_.gpu = gpu; }

 protected:
  void set_where(const Dims& dims, Precision p, std::string unit) {
    where_.dims = dims;
    where_.precision = p;
    unit_ = std::move(unit);
  }

 private:
  Where where_;
  std::string unit_;
  int choose_as_cc_ = 0;                            // 0: this GPU's choice
  std::map<std::string, std::string> forced_;       // launch name -> variant
  std::map<std::pair<int, int>, std::string> ran_;  // (level, launch) -> variant
};

// A Lesson whose levels and traffic() come from its workspace's level table. Ws is the
// lesson's workspace for one element type: the table's names and formulas are the same for
// every element type, so lessons name their fp32 workspace here.
template <class Ws>
class LevelLesson : public Lesson {
 public:
  const LessonInfo& info() const final { return info_; }
  std::vector<LaunchTraffic> traffic(int level, Shape shape, Precision p) const final {
    return level_traffic(Ws::levels(), level, resolve(shape), p);
  }
  // The table's choice, with its variants' shape checks.
  VariantChoice choose_variant(int level, int launch, Shape shape, Precision p,
                               const GpuFacts& gpu) const final {
    const LaunchRow<Ws>* row = nullptr;
    if (!find_launch(Ws::levels(), level, launch, &row).ok() || row->variants.empty()) return {};
    shape = resolve(shape);
    const Where where{{shape.size, shape.inner, bytes_per_element(p)}, p, gpu};
    VariantChoice choice =
        fl::choose_variant(variant_infos(*row), where, variant_checks(*row), info_.size_axis.unit);
    // An index into the level's variants: those of the launches before this one come first.
    for (int k = 0; k < launch && choice.index >= 0; ++k) {
      choice.index += static_cast<int>(Ws::levels()[level].launches[k].variants.size());
    }
    return choice;
  }

 protected:
  // The lesson's facts but its levels, which are the table's.
  LevelLesson(std::string id, std::string title, std::string formula, const SizeAxis& axis,
              std::vector<Precision> precisions = {Precision::fp32, Precision::bf16}) {
    info_.id = std::move(id);
    info_.title = std::move(title);
    info_.formula = std::move(formula);
    info_.size_axis = axis;
    info_.levels = fusion_levels(Ws::levels());
    info_.precisions = std::move(precisions);
  }

 private:
  LessonInfo info_;
};

}  // namespace fl
