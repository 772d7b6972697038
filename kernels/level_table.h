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
// Plain C++: no CUDA header, so the table machinery is tested on the CPU in both builds.
#pragma once

#include <cstdint>
#include <functional>
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
template <class Ws>
struct LaunchRow {
  std::string kernel;                               // the name the timeline and memory chart show
  std::function<Status(Ws&, cudaStream_t)> launch;  // enqueues it on the workspace's buffers
  std::function<Textbook(const Dims&)> textbook;    // its textbook traffic at a shape and precision
};

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
    FusionLevel info{level.name, level.summary, {}, level.on_chip};
    for (const LaunchRow<Ws>& launch : level.launches) info.launches.push_back(launch.kernel);
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

// Enqueues launch `launch` of `level` on `ws`.
template <class Ws>
Status launch_from(const LevelTable<Ws>& table, Ws& ws, int level, int launch,
                   cudaStream_t stream) {
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
  return launches[launch].launch(ws, stream);
}

// ---- the bases ---------------------------------------------------------------------------------

// A Workspace whose launch() is its level table's. Ws derives from LevelWorkspace<Ws> and has
// `static const LevelTable<Ws>& levels()`.
template <class Ws>
class LevelWorkspace : public Workspace {
 public:
  Status launch(int level, int launch, cudaStream_t stream) final {
    return launch_from(Ws::levels(), static_cast<Ws&>(*this), level, launch, stream);
  }
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
