// The live speedup-vs-size plot: this GPU's measurements, the byte-ratio limit, and where a
// lesson has one, the tutorial's published figures as a labelled reference series.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app/gui/backend_choice.h"
#include "app/gui/panels.h"
#include "app/gui/widgets.h"
#include "model/portable.h"
#include "viz/speedup_view.h"

namespace fl::gui {
namespace {

struct PublishedReference {
  const char* lesson;
  const char* label;
  std::vector<viz::SpeedupPoint> points;
};

// Figures published by the original tutorial (shared/seeds/), measured on a Tesla V100, fp32.
// No V100 is lent to us, so they are shown as a reference series, never as our measurement.
const std::vector<PublishedReference>& published_references() {
  static const std::vector<PublishedReference> table = {
      {"gelu_scale",
       "tutorial, V100 (published)",
       {{int64_t(1) << 10, 1.72}, {int64_t(1) << 20, 1.59}, {int64_t(1) << 24, 1.91}}},
  };
  return table;
}

std::optional<PeerFile> loaded_peers;
bool show_peers = true;  // the panel's "PyTorch peers" checkbox
PortableSeries loaded_portable;
bool show_portable = true;  // the panel's "Portable kernels" checkbox

// Whether the portable series holds what the window shows now.
bool portable_here(const Lab& lab) {
  return loaded_portable.has(lab.lesson().info().id, lab.precision(), lab.cache());
}

}  // namespace

Status load_window_peers(const std::string& path) {
  const std::string file = path.empty() ? find_shipped_peer_file(find_assets_folder(), "") : path;
  if (file.empty()) return Status::Ok();
  PeerFile peers;
  const Status st = load_peer_file(file, &peers);
  if (!st.ok()) return path.empty() ? Status::Ok() : st;  // a broken shipped file: no peers
  loaded_peers = std::move(peers);
  return Status::Ok();
}

Status load_window_portable(const std::vector<std::string>& replay_paths) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const std::string& path : replay_paths) {
    if (fs::is_directory(fs::path(path) / "portable", ec)) {
      return load_portable_series(path, &loaded_portable);  // a chosen folder: its errors count
    }
  }
  const std::string shipped = find_shipped_portable_recording(find_assets_folder());
  if (!shipped.empty() && !load_portable_series(shipped, &loaded_portable).ok()) {
    loaded_portable = PortableSeries{};  // a broken shipped series: none
  }
  return Status::Ok();
}

const PeerFile* window_peers() {
  return loaded_peers ? &*loaded_peers : nullptr;
}

bool window_peers_shown() {
  return loaded_peers && show_peers;
}

void set_window_peers_shown(bool shown) {
  show_peers = shown;
}

bool window_peers_ticked() {
  return show_peers;
}

std::string peers_recorded_note(const PeerFile& peers, const Lab& lab) {
  const std::string& device =
      lab.replay() ? lab.replay()->recording.device.name : lab.status().device.name;
  return device == peers.device_name ? "" : " (recorded on " + peers.recorded_on() + ")";
}

void draw_speedup_title_line(const Lab& lab) {
  const bool portable = portable_here(lab);
  if (window_peers() == nullptr && !portable) {
    ImGui::NewLine();
    return;
  }
  if (window_peers() != nullptr) {
    ImGui::Checkbox("PyTorch peers", &show_peers);
    record_widget_label("PyTorch peers", LabelPlace::after_box);
    help_marker(
        "What PyTorch takes for the same formula: eager, torch.compile and the eager ops in a "
        "CUDA graph, measured with scripts/peers.py, drawn as speedups over our level 0. Cold L2 "
        "only.");
  }
  if (portable) {
    // Beside the peers' box where it fits (a narrow pane, two views side by side, has room for
    // a shorter label only, or none: the series then follows the box as last set).
    const ImGuiStyle& style = ImGui::GetStyle();
    const float marker = ImGui::CalcTextSize("(?)").x + style.ItemSpacing.x;
    const auto needs = [&](const char* label) {
      return style.ItemSpacing.x + ImGui::GetFrameHeight() + style.ItemInnerSpacing.x +
             ImGui::CalcTextSize(label).x + marker;
    };
    if (window_peers() != nullptr) ImGui::SameLine();  // after the peers' help marker
    const float room = ImGui::GetContentRegionAvail().x + style.ItemSpacing.x;
    const char* label = needs("Portable kernels") <= room ? "Portable kernels"
                        : needs("Portable") <= room       ? "Portable"
                                                          : nullptr;
    if (label == nullptr) {
      ImGui::NewLine();
      return;
    }
    ImGui::Checkbox(label, &show_portable);
    record_widget_label(label, LabelPlace::after_box);
    const std::string help =
        "What a GPU before Hopper runs: the level table's choice of kernels as on compute "
        "capability " +
        cc_words(loaded_portable.chosen_as_cc) +
        " (no cluster, TMA or wgmma kernels), measured on " + loaded_portable.gpu + " on " +
        loaded_portable.date +
        " with bench --choose-as. Dashed: the same level against level 0, both measured in that "
        "run.";
    help_marker(help.c_str());
  }
}

// The plot's note: how to draw the curve when live has one point, and why the series is empty
// when it is (no GPU yet, nothing recorded, no valid measurement); empty otherwise.
static std::string speedup_note(const Lab& lab, size_t measured_points) {
  // Live, one point is not a curve yet: say how to draw it (replaying, the window fills in
  // every recorded size by itself).
  if (measured_points == 1 && !lab.replay() && !lab.sweeping()) {
    return "One size so far: drag the Tensor size slider, or press Sweep sizes, to draw the "
           "curve.";
  }
  if (measured_points > 0) return "";
  switch (lab.status().state) {
    case EngineState::starting:
      return "Looking for a GPU...";
    case EngineState::unavailable:
      return "Nothing measured: no usable GPU.";
    case EngineState::ready:
      if (lab.replay()) {
        return lab.last_error().empty() ? "Looking up the recording..."
                                        : "Not in the recording: " + lab.last_error();
      }
      return lab.last_error().empty() ? "Measuring the first size..." : "No valid measurement yet.";
  }
  return "";
}

void draw_speedup_panel(const Lab& lab) {
  const LessonInfo& info = lab.lesson().info();
  viz::SpeedupView view;
  view.size_unit = info.size_axis.unit;
  view.size_min = info.size_axis.min;
  view.size_max = info.size_axis.max;
  std::string where = lab.replay() ? "recorded on " + lab.replay()->recording.device.name
                                   : std::string("measured on this GPU");
  // Beside a compared recording, say when this one was made too.
  if (lab.replay() && lab.comparison()) where += ", " + lab.replay()->recording.date_text();
  const int level = lab.shown_level();
  view.level = level;
  view.top_level = lab.top_level();
  const std::string what = "level " + std::to_string(level) + " " + info.levels[level].name +
                           " vs 0 (" + to_string(lab.precision()) + ", " + to_string(lab.cache()) +
                           " L2)";
  view.measured_label = where + ": " + what;
  // The legend names the GPU only beside a compared recording; the banner and the caption say
  // it otherwise, and a shorter row leaves the plot more height.
  if (!lab.comparison()) view.measured_legend = what;
  view.measured =
      viz::speedup_series(lab.history(), info.id, lab.precision(), lab.cache(), lab.shown_level());
  // Where fusion stops (or starts) paying, e.g. the fused FFN against the unfused chain.
  const std::string crossover = viz::crossover_text(view.measured, info.size_axis.unit);
  if (!crossover.empty()) {
    view.measured_label += "; " + crossover;
    if (!view.measured_legend.empty()) view.measured_legend += "; " + crossover;
  }
  for (const auto& ref : published_references()) {
    if (info.id != ref.lesson) continue;
    view.reference_label = ref.label;
    view.reference = ref.points;
  }
  // A compared recording (another GPU, another day): dashed, with its GPU and date.
  if (const ComparedSeries compared = lab.compared_series(); compared.found) {
    viz::SpeedupOverlay overlay;
    overlay.label = "compared: " + compared.label;  // the same level against level 0
    overlay.points = viz::speedup_series(lab.comparison()->measurements, info.id,
                                         compared.precision, compared.cache, level);
    view.overlays.push_back(std::move(overlay));
  } else if (lab.comparison()) {
    ImGui::TextDisabled("The compared recording (%s, %s) holds no %s.",
                        lab.comparison()->summary.device.name.c_str(),
                        lab.comparison()->summary.date_text().c_str(), info.id.c_str());
  }
  // PyTorch on the same formula (scripts/peers.py): grey reference series, speedup over our
  // level 0; "recorded on" when they were not measured on this GPU model.
  if (const PeerFile* peers = window_peers()) {
    const std::string suffix = peers_recorded_note(*peers, lab);
    if (show_peers) {
      view.peers = viz::peer_speedup_series(lab.history(), *peers, info.id, lab.precision(),
                                            lab.cache(), suffix);
    }
  }
  if (show_portable && portable_here(lab)) {
    view.portable.label = loaded_portable.label() + ": " + what;
    view.portable.points = viz::speedup_series(loaded_portable.measurements, info.id,
                                               lab.precision(), lab.cache(), level);
    view.portable_legend =
        "portable kernels (as on " + cc_words(loaded_portable.chosen_as_cc) + ")";
  }
  view.byte_ratio_limit =
      viz::byte_ratio_limit(lab.lesson(), lab.size(), lab.precision(), lab.shown_level());
  view.current_size = lab.size();
  view.note = speedup_note(lab, view.measured.size());
  viz::draw_speedup_view("##speedup_plot", view, ImVec2(0, 0));
}

}  // namespace fl::gui
