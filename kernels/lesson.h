// The lesson interface (DESIGN.md §3). A lesson is one source file holding, in this order: the
// CPU reference in double precision, the kernels of every fusion level, its level table (each
// level's launches and textbook traffic, declared once: level_table.h derives info(), traffic()
// and Workspace::launch from it), and a Workspace that owns the device buffers for one (size,
// precision). A new lesson is one new file plus one line in catalog.cpp, and its teaching text
// is assets/lessons/<id>.md (read by the window, app/gui/lesson_text.h; a teacher may override
// it without a compiler). docs/ARCHITECTURE.md, "Adding a lesson", walks through it.
//
// Nothing here knows about timing, CUPTI or the UI: the measurement engine (app/measure) drives
// a Workspace launch by launch, so it can time each launch on its own.
#pragma once

#ifdef FUSIONLAB_REPLAY_ONLY
// The replay-only build (FUSIONLAB_CUDA=OFF) has no CUDA headers: only the stream type is named.
typedef struct CUstream_st* cudaStream_t;
#else
#include <cuda_runtime_api.h>
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/phases.h"
#include "kernels/status.h"

namespace fl {

enum class Precision { fp32, bf16 };

const char* to_string(Precision p);
bool parse_precision(const std::string& text, Precision* out);
int bytes_per_element(Precision p);

// What the GPU must offer for a precision; empty when supported. Shown to the learner verbatim.
std::string precision_unsupported_reason(Precision p, int cc_major, int cc_minor);

// The axis the size slider moves along, in the lesson's own units.
struct SizeAxis {
  std::string unit;  // "elements" or "rows"
  int64_t min = 0;
  int64_t max = 0;
  int64_t default_size = 0;
  // Row-wise lessons also have a row length (hidden size C, or keys per score row). It is fixed
  // for the slider (inner_default) but tests use odd ones. Elementwise lessons leave it 0.
  std::string inner_name;  // e.g. "hidden size C"
  int64_t inner_default = 0;
  int64_t inner_max = 0;
};

// The problem size of one run: `size` along the size axis, `inner` the row length (0 means the
// lesson's default; Lesson::resolve fills it in). Converts from a plain size.
struct Shape {
  Shape(int64_t size_ = 0, int64_t inner_ = 0) : size(size_), inner(inner_) {}  // NOLINT: implicit
  int64_t size;
  int64_t inner;
};

// What a launch's kernel variants are chosen by, besides the shape and precision: the GPU and
// the build (kernels/variants.h).
struct GpuFacts {
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  bool wgmma_build = false;  // this build compiled the sm_90a (wgmma) kernels
  int shared_optin = 0;  // bytes of shared memory a block may opt in to; 0: shared_optin_of_cc's
};

// The shared memory a block may opt in to on a GPU of compute capability `cc` (x 10): 96 KiB on
// Volta, 64 KiB on Turing, 163 KiB on an A100 or Orin (8.0, 8.7), 99 KiB on RTX 30/40 cards (8.6,
// 8.9), 227 KiB on Hopper; 0 where not known.
int shared_optin_of_cc(int cc);
// While the level table chooses as an older GPU (`bench --choose-as`), that GPU's opt-in shared
// memory (shared_optin_of_cc), for this thread; else 0. A kernel whose form depends on how much
// shared memory it may take reads it beside this GPU's limit and takes the smaller, so that the
// form measured here is the one that GPU would run (ln_mma_tiles: W resident or streamed).
int chosen_gpu_shared_optin();
// The shared memory a kernel's plan may take on this GPU, whose opt-in limit is `device_optin`:
// that, or chosen_gpu_shared_optin() where a choice as an older GPU is in force and it is smaller.
int planned_shared_optin(int device_optin);
// The opt-in limits a plan may be made for on this GPU (`device_optin`, then every smaller one
// shared_optin_of_cc knows, largest first): a buffer sized when a workspace is made, before any
// choice as an older GPU, takes the largest of their plans' needs.
std::vector<int> plannable_shared_optins(int device_optin);
// Sets chosen_gpu_shared_optin() for this thread for its lifetime (0: none).
class ChosenGpuSharedOptin {
 public:
  explicit ChosenGpuSharedOptin(int bytes);
  ~ChosenGpuSharedOptin();
  ChosenGpuSharedOptin(const ChosenGpuSharedOptin&) = delete;
  ChosenGpuSharedOptin& operator=(const ChosenGpuSharedOptin&) = delete;

 private:
  int before_;
};

// A size range that a kernel variant's table prefers for rows from some length on (Shape::inner:
// a head size, a hidden size): VariantRange::prefer_by_inner.
struct PreferByInner {
  int64_t inner_from = 0;
  int64_t prefer_from = 1;
  int64_t prefer_to = 0;
};

// Where a kernel variant can run, and the size range in which its level table prefers it: data,
// so that the replay-only build (which has the table only as catalog.json) and the command line
// can say which variant runs where. kernels/variants.h turns it into cannot_run / preferred.
struct VariantRange {
  int min_cc = 0;                     // compute capability x 10 (90 = sm_90); 0: any GPU
  int max_cc = 0;                     // 0: no upper bound
  bool wgmma_build = false;           // needs a build with the sm_90a kernels
  std::vector<Precision> precisions;  // empty: every precision of the lesson
  int64_t max_size = 0;               // the most it takes along the size axis; 0: any size
  int64_t prefer_from = 1;            // the table prefers it from this size ...
  int64_t prefer_to = 0;              // ... up to this one (0: no upper end)
  int prefer_max_cc = 0;  // ... on GPUs up to this compute capability (0: every GPU it runs on)
  // Rows from some length on may move the preferred size range: the last entry whose inner_from
  // the row length reaches replaces prefer_from .. prefer_to (an attention kernel that pays off
  // sooner at d = 128 than at d = 64).
  std::vector<PreferByInner> prefer_by_inner;
  // The plan (kernels/variants.cpp: shared_plan_cannot_fit) that sizes its shared memory to the
  // GPU's opt-in limit, where it has one: the choice then asks whether that plan fits (an RTX
  // card's 99 KiB a block holds less than an H100's 227). "" for none.
  std::string shared_plan;
};

// One kernel that a launch may run (a launch with several is listed with its variants; a
// launch with none runs one kernel). kernels/level_table.h's VariantRow adds the launcher.
struct VariantInfo {
  std::string launch;    // the launch's kernel name in the level ("ffn_fused")
  std::string name;      // "ffn_cluster"
  std::string what;      // one sentence: what it does differently
  std::string function;  // the kernel function's name, as CUPTI reports it ("ffn_small_kernel")
  VariantRange range;
  std::vector<std::string> phases;  // the phases it declares (kernels/phases.h); may be empty
};

// One rung of the fusion ladder: a named variant that is a list of kernel launches.
// A lesson declares its levels once, in its level table (kernels/level_table.h).
struct FusionLevel {
  std::string name;                   // "unfused", "fused"
  std::string summary;                // one sentence for the learner
  std::vector<std::string> launches;  // kernel names, in launch order
  std::string on_chip;                // what stays in registers or shared memory, not in HBM
  std::vector<VariantInfo> variants;  // of every launch that has several, in the table's order
};

// The variant of launch `launch` among `variants` whose kernel function CUPTI named `kernel`
// ("ffn_small_kernel<16>", "void fl::ffn_cluster_kernel<...>(...)"), or a second kernel named
// after a variant's ("ffn_hidden_slice_exchange_kernel": ffn_hidden_slice's); "" when none.
std::string variant_of_kernel(const std::vector<VariantInfo>& variants, const std::string& launch,
                              const std::string& kernel);

// Which variant of a launch runs (kernels/variants.h): its index in the level's `variants`
// (-1: none can run, or the launch has none) and a sentence saying why.
struct VariantChoice {
  int index = -1;
  std::string name;
  std::string reason;
};

struct LessonInfo {
  std::string id;     // "gelu_scale"
  std::string title;  // "GELU + scale"
  std::string formula;
  SizeAxis size_axis;
  std::vector<FusionLevel> levels;  // levels[0] is the unfused chain, the last is fully fused
  std::vector<Precision> precisions;
};

// The textbook traffic of one launch: the fewest bytes it must move through device memory
// (each input read once, each output written once) and the arithmetic it must do.
struct LaunchTraffic {
  std::string kernel;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  double flops = 0;
  int64_t bytes() const { return bytes_read + bytes_written; }
};

// ||out - ref|| / ||ref||, with an absolute floor: the reference's RMS counts as at least
// `rms_floor` (1e-3 unless the lesson says otherwise, Lesson::rms_floor), so a handful of
// outputs that are all nearly zero (GELU's negative tail) cannot turn rounding into a large
// "relative" error. For data of unit scale the floor changes nothing.
constexpr double kDefaultRmsFloor = 1e-3;
double relative_l2_error(double err2, double ref2, int64_t count,
                         double rms_floor = kDefaultRmsFloor);

// The output of one level compared with the fp64 reference computed on the GPU.
struct CheckResult {
  double rel_l2_error = 0;   // ||out - ref|| / ||ref||
  double max_abs_error = 0;  // max |out - ref|
  int64_t non_finite = 0;    // outputs that are NaN/Inf (poisoned outputs never written land here)
  double tolerance = 0;      // rel_l2_error must stay at or below this
  bool passed = false;
};

// A host copy of one tensor, upcast to double, for CPU-reference checks in the gpu tests.
struct HostTensor {
  std::string name;
  std::vector<double> values;
};

// Device buffers and launches for one (size, precision).
class Workspace {
 public:
  virtual ~Workspace() = default;
  // Fresh random inputs, generated on the GPU from `seed`.
  virtual Status fill_inputs(uint64_t seed, cudaStream_t stream) = 0;
  // Fills every output and intermediate with NaN so an unwritten element cannot pass a check.
  virtual Status poison_outputs(cudaStream_t stream) = 0;
  // Enqueues launch `launch` of fusion level `level` (0 <= launch < levels[level].launches.size()).
  virtual Status launch(int level, int launch, cudaStream_t stream) = 0;
  // Compares the outputs with an fp64 reference computed on the GPU. Synchronizes `stream`.
  virtual Status check(cudaStream_t stream, CheckResult* result) = 0;
  // Copies inputs and outputs to the host (for CPU-reference tests). Synchronizes `stream`.
  virtual Status download(cudaStream_t stream, std::vector<HostTensor>* inputs,
                          std::vector<HostTensor>* outputs) = 0;
  // Only the outputs (what a test compares with a reference it already holds): a lesson whose
  // inputs are large (gpt2_decode's 170 MB of weights and its cache) copies just these. The
  // default downloads both. Synchronizes `stream`.
  virtual Status download_outputs(cudaStream_t stream, std::vector<HostTensor>* outputs) {
    std::vector<HostTensor> inputs;
    return download(stream, &inputs, outputs);
  }
  // Runs `variant` for every launch named `launch` (a level's launch kernel name) instead of
  // the table's choice; an empty `variant` gives the choice back to the table. Fails with one
  // line when no launch of that name has such a variant.
  virtual Status force_variant(const std::string& launch, const std::string& variant) {
    (void)variant;
    return Status::Error("no launch named '" + launch + "' has kernel variants");
  }
  // Device memory that level `level`'s launches hold at their peak, in bytes: the workspace
  // buffers they read or write, as allocated, and the library workspaces they use (cuBLASLt's).
  // 0: not known (lessons that do not say).
  virtual int64_t level_device_bytes(int level) const {
    (void)level;
    return 0;
  }
  // Chooses every launch's variant as on a GPU of compute capability `cc` (x 10) without the
  // sm_90a kernels (the portable kernels an older GPU runs; MeasureRequest::choose_as_cc);
  // 0 gives the choice back to this GPU. Forced variants still win.
  virtual void choose_as(int cc) { (void)cc; }
  // The variant that the last run of launch `launch` of `level` ran; "" when it has none.
  virtual std::string variant_ran(int level, int launch) const {
    (void)level;
    (void)launch;
    return "";
  }

  // Phase timelines (kernels/phases.h). The engine hands the workspace a sink for a pass with
  // stamps on; by default its records are null (stamps off). A launcher whose kernel records
  // phases passes phase_sink() to it and names the phases with declare_phases (the names that a
  // record's `phase` indexes), so the engine knows what the records mean.
  void set_phase_sink(const PhaseSink& sink) {
    phase_sink_ = sink;
    declared_phases_.clear();
  }
  const PhaseSink& phase_sink() const { return phase_sink_; }
  void declare_phases(std::vector<std::string> names) { declared_phases_ = std::move(names); }
  // The phases the last launch since set_phase_sink declared; empty when it declared none.
  const std::vector<std::string>& declared_phases() const { return declared_phases_; }

 private:
  PhaseSink phase_sink_;
  std::vector<std::string> declared_phases_;
};

class Lesson {
 public:
  virtual ~Lesson() = default;
  virtual const LessonInfo& info() const = 0;
  // Textbook traffic of every launch of `level`, in launch order.
  virtual std::vector<LaunchTraffic> traffic(int level, Shape shape, Precision p) const = 0;
  // Device memory a workspace of this size needs, to refuse sizes that cannot fit.
  virtual int64_t workspace_bytes(Shape shape, Precision p) const = 0;
  virtual Status create_workspace(Shape shape, Precision p,
                                  std::unique_ptr<Workspace>* out) const = 0;
  // The CPU reference in double precision: outputs from inputs as `download` returns them.
  virtual std::vector<HostTensor> reference(const std::vector<HostTensor>& inputs) const = 0;
  // Relative-L2 tolerance for outputs of this precision against the reference.
  virtual double tolerance(Precision p) const = 0;
  // The RMS the reference counts as at least when the relative error is taken
  // (relative_l2_error); the GEMM lessons raise it (gemm::kOutputRmsFloor).
  virtual double rms_floor() const { return kDefaultRmsFloor; }

  // Which variant of launch `launch` of `level` runs at `shape` and precision `p` on `gpu`,
  // and why (kernels/variants.h): from the info's variant ranges; a lesson with a level table
  // also applies its variants' shape checks.
  virtual VariantChoice choose_variant(int level, int launch, Shape shape, Precision p,
                                       const GpuFacts& gpu) const;

  int level_count() const { return static_cast<int>(info().levels.size()); }
  // `shape` with inner == 0 replaced by the lesson's default row length.
  Shape resolve(Shape shape) const {
    if (shape.inner == 0) shape.inner = info().size_axis.inner_default;
    return shape;
  }
};

// Sum over a level's launches.
int64_t total_bytes(const std::vector<LaunchTraffic>& launches);

}  // namespace fl
