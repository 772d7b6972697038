// The GPU panel: what the engine found, or why there is no usable GPU. When replaying, a banner
// says whose GPU the numbers come from and why this machine's is not used.
#include <string>

#include "app/gui/panels.h"
#include "app/gui/widgets.h"
#include "model/sizes.h"

namespace fl::gui {
namespace {

void fact(const char* name, const std::string& value) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextDisabled("%s", name);
  ImGui::TableNextColumn();
  text_fitted(value);  // a narrow column shortens it, the tooltip shows all of it
}

std::string without_final_period(std::string text) {
  while (!text.empty() && (text.back() == '.' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string no_gpu_text(const EngineStatus& st) {
  return without_final_period(st.unavailable_reason) +
         ". fusionlab --replay SESSION.json shows a recording made on another machine.";
}

std::string replay_text(const ReplayNotice& notice) {
  return replay_headline(notice) + ". Every number shown is as measured there.";
}

// Rows of the facts table: name, compute capability, SMs, L2, memory, driver / runtime, backend;
// the copy roof once known; the recording's date when replaying; the clocks now when watched.
int fact_rows(const Lab& lab) {
  return 7 + (lab.status().device.roof_gbps > 0 ? 1 : 0) + (lab.replay() ? 1 : 0) +
         (lab.status().gpu_watch ? 1 : 0);
}

// The GPU's clocks now (NVML, read at most once a second on the UI thread), with any throttle
// reason and the other processes on it.
std::string clocks_now(GpuWatch& watch) {
  static double last_read = -1;
  static std::string text = "-";
  const double now = ImGui::GetTime();
  if (last_read >= 0 && now - last_read < 1.0) return text;
  last_read = now;
  GpuSample s;
  if (!watch.sample(&s, true)) return text = "not readable now";
  text = "SM " + std::to_string(s.sm_clock_mhz) +
         (s.sm_clock_max_mhz > 0 ? " of " + std::to_string(s.sm_clock_max_mhz) : "") +
         " MHz, memory " + std::to_string(s.memory_clock_mhz) + " MHz";
  if ((s.throttle_reasons & kSlowingThrottleReasons) != 0)
    text += "; held down: " + throttle_reason_words(s.throttle_reasons);
  if (s.other_processes > 0)
    text += "; " + std::to_string(s.other_processes) + " other process" +
            (s.other_processes == 1 ? "" : "es") + " on it";
  return text;
}

// The height banner() gives `text` inside a child `width` wide, and the spacing after it.
float banner_height(const std::string& text, float width) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float wrap = width - style.WindowPadding.x * 4;  // the child's padding and the banner's
  return ImGui::CalcTextSize(text.c_str(), nullptr, false, wrap).y + style.WindowPadding.y * 2 +
         style.ItemSpacing.y;
}

const ImVec4 kReplayBackground(0.10f, 0.24f, 0.42f, 0.65f);
const ImVec4 kReplayBorder(0.45f, 0.70f, 1.0f, 0.9f);
const ImVec4 kNoGpuBackground(0.45f, 0.28f, 0.08f, 0.55f);
const ImVec4 kNoGpuBorder(0.95f, 0.62f, 0.2f, 0.9f);

}  // namespace

float gpu_panel_height(const Lab& lab, float width) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float line = ImGui::GetTextLineHeightWithSpacing();
  const float title = line + style.ItemSpacing.y * 2;  // title and separator
  const float frame = style.WindowPadding.y * 2;
  const EngineStatus& st = lab.status();
  if (st.state == EngineState::unavailable) {
    return frame + title + banner_height(no_gpu_text(st), width);
  }
  // "starting" fits the room of a live table, so the live panel does not jump.
  const int rows = st.state == EngineState::starting ? 8 : fact_rows(lab);
  float height = frame + title + rows * (ImGui::GetTextLineHeight() + style.CellPadding.y * 2) +
                 style.ItemSpacing.y;
  if (lab.replay()) height += banner_height(replay_text(*lab.replay()), width);
  return height;
}

void draw_gpu_panel(const Lab& lab) {
  if (lab.replay()) {
    section_title("GPU (recorded)", lesson_text(panel_text_id("gpu-recorded")));
  } else {
    section_title("GPU", lesson_text(panel_text_id("gpu")));
  }
  const EngineStatus& st = lab.status();
  if (st.state == EngineState::starting) {
    spinner(ImGui::GetFontSize() * 0.4f, ImGui::GetColorU32(ImGuiCol_Text));
    ImGui::SameLine();
    ImGui::TextUnformatted("starting... (looking for a GPU)");
    return;
  }
  if (st.state == EngineState::unavailable) {
    banner("##no_gpu", no_gpu_text(st), kNoGpuBackground, kNoGpuBorder);
    return;
  }
  if (lab.replay())
    banner("##replay", replay_text(*lab.replay()), kReplayBackground, kReplayBorder);
  const DeviceFacts& d = st.device;
  if (ImGui::BeginTable("##gpu_facts", 2, ImGuiTableFlags_SizingFixedFit)) {
    fact("name", d.name);
    if (lab.replay()) fact("recorded", lab.replay()->recording.date_text());
    fact("compute capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
    fact("SMs", std::to_string(d.sm_count));
    fact("L2 cache", format_bytes(static_cast<double>(d.l2_bytes)));
    fact("memory", format_bytes(static_cast<double>(d.memory_bytes)));
    fact("driver / runtime",
         "CUDA " + version_text(d.driver_version) + " / CUDA " + version_text(d.runtime_version));
    if (d.roof_gbps > 0) fact("copy roof (1 GiB, cold)", fixed(d.roof_gbps, 0) + " GB/s");
    if (st.gpu_watch) fact("clocks now", clocks_now(*st.gpu_watch));
    if (st.backend_kind == "live") {
      fact("backend", "live: runs the kernels now");
    } else if (st.backend_kind == "recorded") {
      fact("backend", "recorded: replays, runs nothing");
    } else {
      fact("backend", st.backend_kind);
    }
    ImGui::EndTable();
  }
}

}  // namespace fl::gui
