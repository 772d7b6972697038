// The NVML watch (gpu_watch.h). NVML's C API is declared here by the few entry points used, with
// the types its documentation gives them, and looked up in libnvidia-ml.so.1 with dlsym.
#include "app/measure/gpu_watch.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "model/caps.h"

namespace fl {
namespace {

using nvmlReturn = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
using nvmlDevice = void*;
constexpr nvmlReturn kNvmlSuccess = 0;
constexpr nvmlReturn kNvmlInsufficientSize = 7;
constexpr int kNvmlClockSm = 1;   // NVML_CLOCK_SM
constexpr int kNvmlClockMem = 2;  // NVML_CLOCK_MEM

// nvmlProcessInfo_t as the _v3 process queries fill it.
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

struct Nvml {
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*by_pci_bus_id)(const char*, nvmlDevice*) = nullptr;
  nvmlReturn (*clock)(nvmlDevice, int, unsigned int*) = nullptr;
  nvmlReturn (*max_clock)(nvmlDevice, int, unsigned int*) = nullptr;
  nvmlReturn (*reasons)(nvmlDevice, unsigned long long*) = nullptr;
  nvmlReturn (*compute_processes)(nvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
  nvmlReturn (*graphics_processes)(nvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
  std::string why_not;  // empty: loaded and initialised
};

// Loaded and initialised once per process; the library stays loaded (NVML is not unloaded
// while its threads may run).
const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      n.why_not = "NVML (libnvidia-ml.so.1, part of the NVIDIA driver) is not installed";
      return;
    }
    auto find = [&](const char* name, auto* fn) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib, name));
    };
    find("nvmlInit_v2", &n.init);
    find("nvmlDeviceGetHandleByPciBusId_v2", &n.by_pci_bus_id);
    find("nvmlDeviceGetClockInfo", &n.clock);
    find("nvmlDeviceGetMaxClockInfo", &n.max_clock);
    find("nvmlDeviceGetCurrentClocksEventReasons", &n.reasons);
    if (n.reasons == nullptr) find("nvmlDeviceGetCurrentClocksThrottleReasons", &n.reasons);
    find("nvmlDeviceGetComputeRunningProcesses_v3", &n.compute_processes);
    find("nvmlDeviceGetGraphicsRunningProcesses_v3", &n.graphics_processes);
    if (n.init == nullptr || n.by_pci_bus_id == nullptr || n.clock == nullptr ||
        n.reasons == nullptr) {
      n.why_not = "this NVML is too old (it lacks the clock queries Fusion Lab uses)";
      return;
    }
    if (const nvmlReturn r = n.init(); r != kNvmlSuccess)
      n.why_not = "NVML did not start (error " + std::to_string(r) + ")";
  });
  return n;
}

class NvmlWatch final : public GpuWatch {
 public:
  explicit NvmlWatch(nvmlDevice device) : device_(device) {
    unsigned int mhz = 0;
    if (nvml().max_clock != nullptr &&
        nvml().max_clock(device_, kNvmlClockSm, &mhz) == kNvmlSuccess)
      sm_max_mhz_ = static_cast<int>(mhz);
  }

  bool sample(GpuSample* out, bool processes) override {
    const Nvml& n = nvml();
    unsigned int sm = 0, mem = 0;
    unsigned long long reasons = 0;
    if (n.clock(device_, kNvmlClockSm, &sm) != kNvmlSuccess ||
        n.clock(device_, kNvmlClockMem, &mem) != kNvmlSuccess ||
        n.reasons(device_, &reasons) != kNvmlSuccess)
      return false;
    out->sm_clock_mhz = static_cast<int>(sm);
    out->memory_clock_mhz = static_cast<int>(mem);
    out->sm_clock_max_mhz = sm_max_mhz_;
    out->throttle_reasons = reasons;
    out->other_processes = processes ? other_processes() : 0;
    return true;
  }

 private:
  // Processes with a context on the GPU, this one left out. In a container NVML may list the
  // processes by the host's process ids, so our own id is not among them: then one of them is
  // taken to be us (we hold a context whenever we sample).
  int other_processes() {
    std::vector<unsigned int> pids;
    // The buffer holds 3x the entries NVML is told of: a newer NVML with a larger entry still
    // writes inside it.
    for (auto query : {nvml().compute_processes, nvml().graphics_processes}) {
      if (query == nullptr) continue;
      unsigned int count = static_cast<unsigned int>(infos_.size() / 3);
      nvmlReturn r = query(device_, &count, infos_.data());
      if (r == kNvmlInsufficientSize && count <= kMaxWatchedProcesses) {
        infos_.resize(3 * (count + 8));  // Cap: kMaxWatchedProcesses (caps.h)
        count = static_cast<unsigned int>(infos_.size() / 3);
        r = query(device_, &count, infos_.data());
      }
      if (r != kNvmlSuccess) continue;
      for (unsigned int i = 0; i < count && i < infos_.size() / 3; ++i)
        pids.push_back(infos_[i].pid);
    }
    std::sort(pids.begin(), pids.end());
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    // Listed or not, one of them is this process.
    return pids.empty() ? 0 : static_cast<int>(pids.size()) - 1;
  }

  nvmlDevice device_;
  int sm_max_mhz_ = 0;
  std::vector<NvmlProcessInfo> infos_ = std::vector<NvmlProcessInfo>(3 * 32);
};

}  // namespace

void ConditionsRecorder::begin(GpuConditions* into) {
  into_ = into;
  sample(true);
}

void ConditionsRecorder::tick() {
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_).count() >= every_s_) sample(true);
}

void ConditionsRecorder::end() {
  sample(false);
  into_ = nullptr;
}

void ConditionsRecorder::sample(bool processes) {
  if (watch_ == nullptr || into_ == nullptr) return;
  last_ = std::chrono::steady_clock::now();
  GpuSample s;
  if (watch_->sample(&s, processes)) into_->add(s);
}

std::unique_ptr<GpuWatch> open_nvml_watch(const std::string& pci_bus_id, std::string* why_not) {
  if (const char* env = std::getenv("FL_GPU_WATCH");
      env != nullptr && std::strcmp(env, "off") == 0) {
    *why_not = "the GPU watch is off (FL_GPU_WATCH=off)";
    return nullptr;
  }
  const Nvml& n = nvml();
  if (!n.why_not.empty()) {
    *why_not = n.why_not;
    return nullptr;
  }
  nvmlDevice device = nullptr;
  if (const nvmlReturn r = n.by_pci_bus_id(pci_bus_id.c_str(), &device); r != kNvmlSuccess) {
    *why_not = "NVML does not know the GPU at PCI bus id " + pci_bus_id + " (error " +
               std::to_string(r) + ")";
    return nullptr;
  }
  return std::make_unique<NvmlWatch>(device);
}

}  // namespace fl
