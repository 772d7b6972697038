#include "viz/flow_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/measure/sizes.h"

namespace fl::viz {
namespace {

constexpr double kLoopSeconds = 3.0;

ImVec2 center(const FlowLayout& l, FlowPlace p) {
  const int i = static_cast<int>(p);
  return ImVec2((l.place_min[i].x + l.place_max[i].x) / 2, (l.place_min[i].y + l.place_max[i].y) / 2);
}

ImVec2 lerp(ImVec2 a, ImVec2 b, float t) { return ImVec2(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t); }

}  // namespace

FlowInput flow_input(const Measurement& m, int64_t l2_bytes) {
  FlowInput in;
  in.level_name = std::to_string(m.level) + " " + m.level_name;
  in.l2_bytes = static_cast<double>(l2_bytes);
  for (size_t k = 0; k < m.launches.size(); ++k) {
    const LaunchResult& l = m.launches[k];
    FlowTrip trip;
    trip.kernel = l.textbook.kernel;
    trip.textbook_bytes = static_cast<double>(l.textbook.bytes());
    trip.duration_us = l.time_us.median;
    if (l.counters) {
      trip.measured = true;
      trip.read_bytes = static_cast<double>(l.counters->dram_read_bytes);
      trip.write_bytes = static_cast<double>(l.counters->dram_write_bytes);
      trip.stays_in_l2 = trip.read_bytes + trip.write_bytes < 0.5 * trip.textbook_bytes;
    } else {
      trip.read_bytes = static_cast<double>(l.textbook.bytes_read);
      trip.write_bytes = static_cast<double>(l.textbook.bytes_written);
    }
    trip.writes_intermediate = k + 1 < m.launches.size();  // read back by the next launch
    in.trips.push_back(trip);
  }
  return in;
}

FlowLayout layout_flow(const FlowInput& input, double t, ImVec2 min, ImVec2 max, float max_band) {
  FlowLayout out;
  out.loop_seconds = kLoopSeconds;
  // Three places side by side: HBM | L2 | SM, with room between them for the flow.
  const float w = max.x - min.x, box = w * 0.27f;
  const float xs[3] = {min.x, min.x + (w - box) / 2, max.x - box};
  for (int i = 0; i < 3; ++i) {
    out.place_min[i] = ImVec2(xs[i], min.y);
    out.place_max[i] = ImVec2(xs[i] + box, max.y);
  }
  if (input.trips.empty()) return out;
  double total_us = 0, largest = 0;
  for (const auto& trip : input.trips) {
    total_us += std::max(trip.duration_us, 1e-3);
    largest = std::max({largest, trip.read_bytes, trip.write_bytes});
  }
  // Where in the loop we are: launches take their share of the loop by measured time.
  const double phase = std::fmod(std::max(t, 0.0), kLoopSeconds) / kLoopSeconds * total_us;
  double start = 0;
  for (size_t k = 0; k < input.trips.size(); ++k) {
    const double len = std::max(input.trips[k].duration_us, 1e-3);
    if (phase < start + len || k + 1 == input.trips.size()) {
      out.trip = static_cast<int>(k);
      const double f = std::clamp((phase - start) / len, 0.0, 1.0);
      out.writing = f >= 0.5;
      out.progress = static_cast<float>(out.writing ? (f - 0.5) * 2 : f * 2);
      break;
    }
    start += len;
  }
  const FlowTrip& trip = input.trips[out.trip];
  const double bytes = out.writing ? trip.write_bytes : trip.read_bytes;
  out.band = largest > 0 ? std::max(1.0f, static_cast<float>(bytes / largest) * max_band) : 1.0f;
  out.turn_at = trip.stays_in_l2 ? FlowPlace::l2 : FlowPlace::hbm;
  const ImVec2 far = center(out, out.turn_at), sm = center(out, FlowPlace::sm);
  out.token = out.writing ? lerp(sm, far, out.progress) : lerp(far, sm, out.progress);
  // HBM's contents this loop: the input, every intermediate written so far, the output at the end.
  out.hbm_tensors.push_back("inputs");
  for (int k = 0; k < out.trip || (k == out.trip && out.writing && out.progress > 0.99f); ++k) {
    if (input.trips[k].writes_intermediate) {
      out.hbm_tensors.push_back(input.trips[k].kernel + ": intermediate");
    }
  }
  if (input.trips.size() == 1) out.sm_note = "no HBM round trip";  // short: the SM box is narrow
  return out;
}

void draw_flow(const char* id, const FlowInput& input, double t, float height) {
  const float fs = ImGui::GetFontSize();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(ImGui::GetContentRegionAvail().x, 200.0f);
  ImGui::InvisibleButton(id, ImVec2(width, height));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 min(origin.x + 4, origin.y + fs * 1.4f), max(origin.x + width - 4, origin.y + height - 4);
  const FlowLayout layout = layout_flow(input, t, min, max, fs * 2.5f);
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const char* names[3] = {"HBM (global memory)", "L2 cache", "SM: registers / shared"};
  const ImU32 fills[3] = {IM_COL32(40, 55, 85, 255), IM_COL32(45, 70, 60, 255), IM_COL32(70, 50, 80, 255)};
  for (int i = 0; i < 3; ++i) {
    dl->AddRectFilled(layout.place_min[i], layout.place_max[i], fills[i], 6.0f);
    dl->AddText(ImVec2(layout.place_min[i].x + 6, layout.place_min[i].y + 4), text, names[i]);
  }
  char l2[48];
  std::snprintf(l2, sizeof(l2), "%s", format_bytes(input.l2_bytes).c_str());
  dl->AddText(ImVec2(layout.place_min[1].x + 6, layout.place_min[1].y + 4 + fs * 1.1f), dim, l2);
  if (layout.trip < 0) {
    dl->AddText(origin, dim, "No measurement yet.");
    return;
  }
  const FlowTrip& trip = input.trips[layout.trip];
  // The band in flight, from where it started to its head.
  const auto c = [&](FlowPlace p) {
    const int i = static_cast<int>(p);
    return ImVec2((layout.place_min[i].x + layout.place_max[i].x) / 2, (layout.place_min[i].y + layout.place_max[i].y) / 2);
  };
  const ImVec2 from = layout.writing ? c(FlowPlace::sm) : c(layout.turn_at);
  const ImU32 band = layout.writing ? IM_COL32(240, 150, 40, 230) : IM_COL32(66, 150, 250, 230);
  dl->AddLine(from, layout.token, band, layout.band);
  dl->AddCircleFilled(layout.token, layout.band * 0.6f + 2, band);
  // HBM's tensors.
  float y = layout.place_min[0].y + fs * 2.4f;
  for (const std::string& tensor : layout.hbm_tensors) {
    const bool intermediate = tensor.find("intermediate") != std::string::npos;
    dl->AddText(ImVec2(layout.place_min[0].x + 6, y), intermediate ? IM_COL32(240, 150, 40, 255) : dim, tensor.c_str());
    y += fs * 1.1f;
  }
  if (!layout.sm_note.empty()) {
    dl->AddText(ImVec2(layout.place_min[2].x + 6, layout.place_min[2].y + 4 + fs * 1.1f), IM_COL32(90, 200, 120, 255),
                layout.sm_note.c_str());
  }
  char caption[200];
  std::snprintf(caption, sizeof(caption), "level %s, launch %d of %zu: %s, %s %s%s (%.1f us)",
                input.level_name.c_str(), layout.trip + 1, input.trips.size(), trip.kernel.c_str(),
                layout.writing ? "writing" : "reading",
                format_bytes(layout.writing ? trip.write_bytes : trip.read_bytes).c_str(),
                trip.measured ? " (measured DRAM)" : " (textbook bytes: counters off)",
                trip.duration_us);
  dl->AddText(origin, text, caption);
  if (trip.stays_in_l2) {
    dl->AddText(ImVec2(layout.place_min[1].x + 6, layout.place_max[1].y - fs * 1.3f), IM_COL32(90, 200, 120, 255),
                "fits in L2: stops here");
  }
}

}  // namespace fl::viz
