// The controls: tensor size (log slider), which level's details to show, precision, cache mode,
// and one status line (starting, measuring, the last error).
#include <cstdio>
#include <string>
#include <vector>

#include "app/gui/panels.h"
#include "app/gui/widgets.h"
#include "model/sizes.h"

namespace fl::gui {
namespace {

// Why bf16 cannot be chosen here, in words for the learner; empty when it can.
std::string bf16_unavailable(const Lab& lab) {
  const EngineStatus& st = lab.status();
  if (st.state != EngineState::ready) {
    return "bf16 needs a usable GPU of compute capability 8.0 or newer.";
  }
  const std::string gpu_reason =
      precision_unsupported_reason(Precision::bf16, st.device.cc_major, st.device.cc_minor);
  if (!gpu_reason.empty()) return gpu_reason + ".";
  for (Precision p : lab.lesson().info().precisions) {
    if (p == Precision::bf16) return "";
  }
  return lab.lesson().info().id + " has no bf16 kernels.";
}

// In replay, why (precision, cache) cannot be chosen for this lesson: it is not recorded.
std::string not_recorded(const Lab& lab, Precision p, CacheMode c) {
  if (!lab.replay() || lab.recorded(lab.lesson().info().id, p, c)) return "";
  return "The recording holds no " + lab.lesson().info().id + " in " + to_string(p) + " with " +
         to_string(c) + " L2.";
}

// A radio button that is greyed out (but still shows its state) when `why_not` is non-empty.
bool radio(const char* label, bool active, const std::string& why_not) {
  if (!why_not.empty()) ImGui::BeginDisabled();
  const bool clicked = ImGui::RadioButton(label, active);
  record_widget_label(label, LabelPlace::after_box);
  if (!why_not.empty()) ImGui::EndDisabled();
  // A greyed-out choice says why on hover (ImGui hides hover from disabled items unless asked).
  if (!why_not.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 28.0f);
    ImGui::TextUnformatted(why_not.c_str());
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
  return clicked && why_not.empty();
}

std::string sizes_list(const Lab& lab, const std::vector<int64_t>& sizes) {
  std::string out;
  for (int64_t s : sizes) out += (out.empty() ? "" : ", ") + size_text(s);
  return out + " " + lab.lesson().info().size_axis.unit;
}

void status_line(const Lab& lab) {
  const EngineStatus& st = lab.status();
  const float fs = ImGui::GetFontSize();
  if (st.state == EngineState::starting) {
    spinner(fs * 0.4f, ImGui::GetColorU32(ImGuiCol_Text));
    ImGui::SameLine();
    ImGui::TextUnformatted("starting the engine...");
  } else if (st.state == EngineState::unavailable) {
    ImGui::TextDisabled("Nothing is measured: no usable GPU.");
  } else if (st.busy || lab.waiting_for_result()) {
    const MeasureRequest& r = lab.last_request();
    spinner(fs * 0.4f, ImGui::GetColorU32(ImGuiCol_PlotLinesHovered));
    ImGui::SameLine();
    // After the timing result, the engine rests and then reads the counters (a second pass).
    const bool counters =
        !lab.waiting_for_result() && st.busy_with.rfind("DRAM/L2 counters", 0) == 0;
    // Every line here is shortened with an ellipsis when the panel is narrow (the tooltip shows
    // all of it).
    text_fitted(
        std::string(lab.replay() ? "looking up"
                                 : (counters ? "reading DRAM/L2 counters of" : "measuring")) +
        " " + r.lesson + " at " + size_text(r.size) + " " + lab.lesson().info().size_axis.unit +
        " (" + to_string(r.precision) + ", " + to_string(r.cache) + " L2), every fusion level...");
  } else if (!lab.last_error().empty()) {
    text_fitted(
        std::string(lab.replay() ? "Not recorded: " : "Measurement failed: ") + lab.last_error(), 0,
        false, IM_COL32(255, 115, 102, 255));
  } else if (lab.replay() && lab.results_received() > 0) {
    text_fitted(
        "replay: the slider stops at the recorded sizes, " + sizes_list(lab, lab.recorded_sizes()),
        0, true);
  } else if (lab.results_received() > 0) {
    text_fitted("idle: move the size slider to measure another size", 0, true);
  } else {
    text_fitted("waiting for the first measurement", 0, true);
  }
  if (!lab.note.empty()) text_fitted(lab.note, 0, false, IM_COL32(255, 204, 77, 255));
}

// The tensor size: a log slider (stopping at the recorded sizes when replaying), its help and
// the tensor it makes.
void draw_size_control(Lab& lab, double now, float label_w) {
  const LessonInfo& info = lab.lesson().info();
  ImGui::TextUnformatted("Tensor size");
  ImGui::SameLine(label_w);
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.5f);
  int64_t size = lab.size();
  bool released = false;
  if (log_size_slider("##size", &size, info.size_axis.min, info.size_axis.max, &released,
                      lab.recorded_sizes())) {
    lab.set_size(size, now);
  }
  if (released) lab.release_size(now);
  std::string size_help = "Number of " + info.size_axis.unit +
                          " in the tensor, on a log scale. When the slider rests for a quarter "
                          "second (or you let go), every fusion level is measured at that size "
                          "and a point is added to the speedup plot. The L2 cache holds tens of "
                          "MiB: tensors smaller than that need not leave the chip.";
  if (lab.replay()) {
    size_help += lab.recorded_sizes().empty()
                     ? " This lesson is not recorded in this precision and cache mode."
                     : " Replaying a recording, the slider stops only at the recorded sizes "
                       "(the ticks): " +
                           sizes_list(lab, lab.recorded_sizes()) + ".";
  }
  if (!info.size_axis.inner_name.empty()) {
    size_help += " Each row holds " + info.size_axis.inner_name + " = " +
                 std::to_string(lab.lesson().resolve(Shape(lab.size())).inner) + " values.";
  }
  help_marker(size_help.c_str());
  ImGui::SameLine();
  text_fitted(tensor_text(lab.lesson(), lab.size(), lab.precision()));
}

// The fusion slider: 0 = every op its own kernel ... top = fully fused.
void draw_fusion_control(Lab& lab, float label_w) {
  const LessonInfo& info = lab.lesson().info();
  ImGui::TextUnformatted("Fusion");
  ImGui::SameLine(label_w);
  int level = lab.shown_level();
  const FusionLevel& shown = info.levels[level];
  const std::string level_text = std::to_string(level) + ": " + shown.name + " (" +
                                 std::to_string(shown.launches.size()) +
                                 (shown.launches.size() == 1 ? " kernel)" : " kernels)");
  // Half the line, or wider where the level's words need it beside a handle of 1 / (levels)
  // of the slider (its "(?)" keeps its room).
  const float avail = ImGui::GetContentRegionAvail().x;
  const float need = static_cast<float>(lab.top_level() + 1) *
                     (ImGui::CalcTextSize(level_text.c_str()).x +
                      ImGui::GetStyle().FramePadding.x * 2 + 4.0f);
  ImGui::SetNextItemWidth(
      std::max(avail * 0.5f, std::min(need, avail - ImGui::GetFontSize() * 3.0f)));
  const bool moved = ImGui::SliderInt("##fusion", &level, 0, lab.top_level(), "");
  {
    // The level's name beside the handle, never under it (the handle is a third of the frame
    // at three levels); ImGui 1.86's integer slider: a handle of (width - 4) / (levels) px.
    const float frame_w = ImGui::GetItemRectSize().x;
    const float grab_w = std::max((frame_w - 4.0f) / static_cast<float>(lab.top_level() + 1),
                                  ImGui::GetStyle().GrabMinSize);
    slider_value_text(level_text,
                      lab.top_level() > 0 ? float(level) / float(lab.top_level()) : 0.0f,
                      std::min(grab_w, frame_w - 4.0f), std::to_string(level) + ": " + shown.name);
  }
  if (moved) lab.set_shown_level(level);
  std::string fusion_help =
      "The fusion ladder of this lesson, from every op its own kernel (0) to fully fused (" +
      std::to_string(lab.top_level()) +
      "). Every level is measured at each size; the slider "
      "picks which level's launches are detailed and whose speedup over level 0 is plotted.";
  for (int l = 0; l <= lab.top_level(); ++l) {
    fusion_help +=
        "\n" + std::to_string(l) + " " + info.levels[l].name + ": " + info.levels[l].summary;
  }
  help_marker(fusion_help.c_str());
}

// Precision and cache mode, each a pair of radio buttons; in replay a choice the recording lacks
// is greyed out (the one in use never is).
void draw_precision_and_cache(Lab& lab, double now, float label_w) {
  const float fs = ImGui::GetFontSize();
  ImGui::TextUnformatted("Precision");
  ImGui::SameLine(label_w);
  const bool fp32_on = lab.precision() == Precision::fp32;
  const std::string fp32_why = fp32_on ? "" : not_recorded(lab, Precision::fp32, lab.cache());
  if (radio("fp32", fp32_on, fp32_why)) lab.choose_precision(Precision::fp32, now);
  ImGui::SameLine();
  const bool bf16_on = lab.precision() == Precision::bf16;
  std::string bf16_why = bf16_unavailable(lab);
  // A live GPU without bf16 falls back to fp32; not while the engine starts (a remembered bf16
  // must survive until we know what the backend offers).
  if (!bf16_why.empty() && bf16_on && !lab.replay() && lab.status().state == EngineState::ready) {
    lab.set_precision(Precision::fp32, now);
  }
  if (bf16_why.empty() && !bf16_on) bf16_why = not_recorded(lab, Precision::bf16, lab.cache());
  if (radio("bf16", bf16_on, bf16_why)) lab.choose_precision(Precision::bf16, now);
  // The precisions' explanation, then what this window offers of them.
  const std::string offered = !bf16_why.empty()   ? bf16_why
                              : !fp32_why.empty() ? fp32_why
                              : lab.replay()      ? "Both are recorded."
                                                  : "Both run on this GPU.";
  help_marker(lesson_text(panel_text_id("precision")), offered);
  ImGui::SameLine(0, fs * 2.0f);
  ImGui::TextUnformatted("L2 cache");
  ImGui::SameLine();
  const bool cold_on = lab.cache() == CacheMode::cold;
  const std::string cold_why = cold_on ? "" : not_recorded(lab, lab.precision(), CacheMode::cold);
  const std::string warm_why = cold_on ? not_recorded(lab, lab.precision(), CacheMode::warm) : "";
  if (radio("cold", cold_on, cold_why)) lab.set_cache(CacheMode::cold, now);
  ImGui::SameLine();
  if (radio("warm", !cold_on, warm_why)) lab.set_cache(CacheMode::warm, now);
  help_marker(lesson_text(panel_text_id("cache")), cold_why + warm_why);
}

// Sweep: fills the whole curve, one size after another, with a progress bar; then the status.
void draw_sweep_and_status(Lab& lab) {
  const float fs = ImGui::GetFontSize();
  const bool engine_ready = lab.status().state == EngineState::ready;
  if (lab.sweeping()) {
    if (ImGui::Button("Cancel sweep")) lab.cancel_sweep();
    record_widget_label("Cancel sweep", LabelPlace::in_frame);
    ImGui::SameLine();
    char overlay[64];
    std::snprintf(overlay, sizeof(overlay), "sweeping sizes: %.0f%%", 100.0 * lab.sweep_progress());
    ImGui::ProgressBar(static_cast<float>(lab.sweep_progress()), ImVec2(fs * 14.0f, 0), overlay);
  } else {
    if (!engine_ready) ImGui::BeginDisabled();
    if (ImGui::Button("Sweep sizes")) lab.start_sweep();
    record_widget_label("Sweep sizes", LabelPlace::in_frame);
    if (!engine_ready) ImGui::EndDisabled();
    if (!engine_ready && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
      ImGui::SetTooltip("%s", lab.status().state == EngineState::starting
                                  ? "Nothing to sweep yet: the engine is starting."
                                  : "Nothing to sweep: no usable GPU and no recording.");
    }
  }
  ImGui::SameLine();
  help_marker(lesson_text(panel_text_id(lab.replay() != nullptr ? "sweep-recorded" : "sweep")));
  ImGui::SameLine();
  status_line(lab);
}

}  // namespace

void draw_controls_panel(Lab& lab, double now) {
  const float label_w = ImGui::GetFontSize() * 6.5f;
  section_title("Controls",
                lesson_text(panel_text_id(lab.replay() ? "controls-recorded" : "controls")));
  draw_size_control(lab, now, label_w);
  draw_fusion_control(lab, label_w);
  draw_precision_and_cache(lab, now, label_w);
  ImGui::Spacing();
  draw_sweep_and_status(lab);
}

}  // namespace fl::gui
