#include "viz/roofline_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fl::viz {
namespace {

std::string power_label(int p, const char* unit) {
  char buf[32];
  if (p >= 0 && p <= 5) std::snprintf(buf, sizeof(buf), "%.0f%s", std::pow(10.0, p), unit);
  else std::snprintf(buf, sizeof(buf), "1e%d%s", p, unit);
  return buf;
}

}  // namespace

RooflineInput roofline_input(const std::vector<Measurement>& levels, double roof_gbps,
                             int shown_level) {
  RooflineInput in;
  in.roof_gbps = roof_gbps;
  for (const Measurement& m : levels) {
    double flops = 0;
    for (const auto& l : m.launches) flops += l.textbook.flops;
    const double bytes = static_cast<double>(m.textbook_bytes());
    if (!m.check.passed || m.chain_time_us.median <= 0 || bytes <= 0 || flops <= 0) continue;
    RooflinePoint p;
    p.label = std::to_string(m.level) + " " + m.level_name;
    p.intensity = flops / bytes;
    p.gflops = flops / (m.chain_time_us.median * 1e3);  // FLOP per us -> GFLOP/s is 1e-3
    if (m.level == shown_level) in.highlighted = static_cast<int>(in.points.size());
    in.points.push_back(p);
  }
  return in;
}

RooflineLayout layout_roofline(const RooflineInput& input, ImVec2 min, ImVec2 max) {
  RooflineLayout out;
  if (input.points.empty()) return out;
  double xlo = 1e300, xhi = 0, ylo = 1e300, yhi = 0;
  for (const auto& p : input.points) {
    xlo = std::min(xlo, p.intensity);
    xhi = std::max(xhi, p.intensity);
    ylo = std::min(ylo, p.gflops);
    yhi = std::max(yhi, p.gflops);
  }
  if (input.roof_gbps > 0) yhi = std::max(yhi, xhi * input.roof_gbps);
  // Whole decades around the data, at least two wide.
  out.x_min = std::pow(10.0, std::floor(std::log10(xlo)) - 1);
  out.x_max = std::pow(10.0, std::ceil(std::log10(xhi)) + 1);
  out.y_min = std::pow(10.0, std::floor(std::log10(ylo)) - 1);
  out.y_max = std::pow(10.0, std::ceil(std::log10(yhi)) + 1);
  const auto sx = [&](double x) {
    return min.x + static_cast<float>(std::log10(x / out.x_min) / std::log10(out.x_max / out.x_min)) * (max.x - min.x);
  };
  const auto sy = [&](double y) {
    return max.y - static_cast<float>(std::log10(y / out.y_min) / std::log10(out.y_max / out.y_min)) * (max.y - min.y);
  };
  for (const auto& p : input.points) out.points.push_back(ImVec2(sx(p.intensity), sy(p.gflops)));
  if (input.roof_gbps > 0) {
    // y = x * roof, clipped to the plot: from x_min (or where y reaches y_min) to y_max.
    const double x0 = std::max(out.x_min, out.y_min / input.roof_gbps);
    const double x1 = std::min(out.x_max, out.y_max / input.roof_gbps);
    out.roof_from = ImVec2(sx(x0), sy(x0 * input.roof_gbps));
    out.roof_to = ImVec2(sx(x1), sy(x1 * input.roof_gbps));
  }
  for (int p = static_cast<int>(std::lround(std::log10(out.x_min))); std::pow(10.0, p) <= out.x_max * 1.0001; ++p) {
    out.x_ticks.push_back({sx(std::pow(10.0, p)), power_label(p, "")});
  }
  for (int p = static_cast<int>(std::lround(std::log10(out.y_min))); std::pow(10.0, p) <= out.y_max * 1.0001; ++p) {
    out.y_ticks.push_back({sy(std::pow(10.0, p)), power_label(p, "")});
  }
  return out;
}

void draw_roofline(const char* id, const RooflineInput& input, float height) {
  const float fs = ImGui::GetFontSize();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(ImGui::GetContentRegionAvail().x, 100.0f);
  ImGui::InvisibleButton(id, ImVec2(width, height));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 min(origin.x + fs * 4, origin.y + fs * 0.5f), max(origin.x + width - fs, origin.y + height - fs * 2.5f);
  dl->AddRectFilled(min, max, IM_COL32(22, 32, 52, 255));
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled), text = ImGui::GetColorU32(ImGuiCol_Text);
  if (input.points.empty()) {
    dl->AddText(ImVec2(min.x + fs, min.y + fs), dim, "No measured level with a correct output yet.");
    return;
  }
  const RooflineLayout layout = layout_roofline(input, min, max);
  for (const auto& [x, label] : layout.x_ticks) {
    dl->AddLine(ImVec2(x, min.y), ImVec2(x, max.y), IM_COL32(60, 70, 90, 255));
    dl->AddText(ImVec2(x - ImGui::CalcTextSize(label.c_str()).x / 2, max.y + 2), dim, label.c_str());
  }
  for (const auto& [y, label] : layout.y_ticks) {
    dl->AddLine(ImVec2(min.x, y), ImVec2(max.x, y), IM_COL32(60, 70, 90, 255));
    dl->AddText(ImVec2(min.x - ImGui::CalcTextSize(label.c_str()).x - 4, y - fs / 2), dim, label.c_str());
  }
  dl->AddText(ImVec2(min.x, max.y + fs * 1.2f), dim,
              "arithmetic intensity (FLOP per textbook byte, log)  |  y: achieved GFLOP/s (log)");
  if (input.roof_gbps > 0) {
    dl->AddLine(layout.roof_from, layout.roof_to, IM_COL32(240, 150, 40, 255), 2.0f);
    char roof[64];
    std::snprintf(roof, sizeof(roof), "bandwidth roof %.0f GB/s (measured copy)", input.roof_gbps);
    dl->AddText(ImVec2(layout.roof_to.x - ImGui::CalcTextSize(roof).x - 4, layout.roof_to.y + 2),
                IM_COL32(240, 150, 40, 255), roof);
  }
  for (size_t i = 0; i < layout.points.size(); ++i) {
    const bool hl = static_cast<int>(i) == input.highlighted;
    dl->AddCircleFilled(layout.points[i], hl ? 6.0f : 4.5f, hl ? IM_COL32(66, 150, 250, 255) : IM_COL32(170, 180, 200, 255));
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s: %.2f FLOP/B, %.0f GFLOP/s", input.points[i].label.c_str(),
                  input.points[i].intensity, input.points[i].gflops);
    dl->AddText(ImVec2(layout.points[i].x + 8, layout.points[i].y - fs * (0.5f + 1.1f * (i % 2))), text, buf);
  }
}

}  // namespace fl::viz
