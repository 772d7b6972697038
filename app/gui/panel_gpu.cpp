// The GPU panel: what the engine found, or why there is no usable GPU.
#include <string>

#include "app/gui/panels.h"
#include "app/gui/widgets.h"
#include "app/measure/sizes.h"

namespace fl::gui {
namespace {

void fact(const char* name, const std::string& value) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextDisabled("%s", name);
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(value.c_str());
}

std::string without_final_period(std::string text) {
  while (!text.empty() && (text.back() == '.' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string no_gpu_text(const EngineStatus& st) {
  return "No usable GPU: " + without_final_period(st.unavailable_reason) +
         ". Fusion Lab can still show recordings (coming with replay).";
}

constexpr int kFactRows = 8;

}  // namespace

float gpu_panel_height(const Lab& lab, float width) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float line = ImGui::GetTextLineHeightWithSpacing();
  const float title = line + style.ItemSpacing.y * 2;  // title and separator
  const float frame = style.WindowPadding.y * 2;
  const EngineStatus& st = lab.status();
  if (st.state == EngineState::unavailable) {
    const float wrap = width - style.WindowPadding.x * 4;
    const float text = ImGui::CalcTextSize(no_gpu_text(st).c_str(), nullptr, false, wrap).y;
    return frame + title + text + style.WindowPadding.y * 2 + style.ItemSpacing.y;
  }
  const float rows = kFactRows * (ImGui::GetTextLineHeight() + style.CellPadding.y * 2);
  return frame + title + rows + style.ItemSpacing.y;  // "starting" fits the same room
}

void draw_gpu_panel(const Lab& lab) {
  section_title(
      "GPU",
      "The GPU the kernels run on, as the CUDA runtime reports it. The live backend runs the "
      "lesson's real kernels on it and times them with CUDA events.");
  const EngineStatus& st = lab.status();
  if (st.state == EngineState::starting) {
    spinner(ImGui::GetFontSize() * 0.4f, ImGui::GetColorU32(ImGuiCol_Text));
    ImGui::SameLine();
    ImGui::TextUnformatted("starting... (looking for a GPU)");
    return;
  }
  if (st.state == EngineState::unavailable) {
    banner("##no_gpu", no_gpu_text(st), ImVec4(0.45f, 0.28f, 0.08f, 0.55f),
           ImVec4(0.95f, 0.62f, 0.2f, 0.9f));
    return;
  }
  const DeviceFacts& d = st.device;
  if (ImGui::BeginTable("##gpu_facts", 2, ImGuiTableFlags_SizingFixedFit)) {
    fact("name", d.name);
    fact("compute capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
    fact("SMs", std::to_string(d.sm_count));
    fact("L2 cache", format_bytes(static_cast<double>(d.l2_bytes)));
    fact("memory", format_bytes(static_cast<double>(d.memory_bytes)));
    fact("driver / runtime",
         "CUDA " + version_text(d.driver_version) + " / CUDA " + version_text(d.runtime_version));
    if (d.roof_gbps > 0) fact("copy roof (1 GiB, cold)", fixed(d.roof_gbps, 0) + " GB/s");
    fact("backend", st.backend_kind == "live" ? "live: runs the kernels now" : st.backend_kind);
    ImGui::EndTable();
  }
}

}  // namespace fl::gui
