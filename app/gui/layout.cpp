#include "app/gui/layout.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>

namespace fl::gui {
namespace {

// Splits `total` into a first part near `want` that leaves both parts their minimums; when both
// minimums do not fit, in proportion to them.
float split_length(float total, float want, float min_first, float min_second) {
  if (total <= 0) return 0;
  if (min_first + min_second > total) return total * min_first / (min_first + min_second);
  return std::clamp(want, min_first, total - min_second);
}

// `box` cut in two along x (side_by_side) or y, with `gap` between; the first part is `fraction`
// of what is left after the gap, each part at least its need's minimum when there is room, and a
// part whose content has a maximum (a timeline's lanes) no larger than that: the other one gets
// the rest.
void split_box(const Box& box, bool side_by_side, float fraction, float gap,
               const LayoutInput::PaneNeed need[2], Box* first, Box* bar, Box* second) {
  const float total = (side_by_side ? box.w : box.h) - gap;
  float a = split_length(total, total * fraction, need[0].min, need[1].min);
  if (need[1].max > 0 && total - a > need[1].max) a = total - need[1].max;
  if (need[0].max > 0 && a > need[0].max && total - need[0].max >= need[1].min) a = need[0].max;
  a = std::floor(std::max(0.0f, a));
  if (side_by_side) {
    *first = {box.x, box.y, a, box.h};
    *bar = {box.x + a, box.y, gap, box.h};
    *second = {box.x + a + gap, box.y, std::max(0.0f, total - a), box.h};
  } else {
    *first = {box.x, box.y, box.w, a};
    *bar = {box.x, box.y + a, box.w, gap};
    *second = {box.x, box.y + a + gap, box.w, std::max(0.0f, total - a)};
  }
}

}  // namespace

float fraction_of(float pixels, float total, float lo, float hi) {
  if (!(total > 0) || !std::isfinite(pixels)) return lo;
  return std::clamp(pixels / total, lo, hi);
}

FrameLayout layout_frame(const LayoutInput& in) {
  FrameLayout L;
  const Box& a = in.area;
  const float fs = in.font_size, gap = in.gap;
  // Two views: each pane at least its view's need (and kMinPaneFonts); one above the other, the
  // views panel needs both and the gap between them, and the measurement panel gives way.
  const bool stacked = in.panels.split && !in.panels.side_by_side;
  LayoutInput::PaneNeed need[2];
  for (int i = 0; i < 2; ++i) {
    need[i] = in.panes[i];
    need[i].min = std::max(need[i].min, fs * kMinPaneFonts);
    if (need[i].max > 0) need[i].max = std::max(need[i].max, need[i].min);
  }
  const float min_views = std::max(fs * kMinViewsFonts,
                                   stacked ? need[0].min + need[1].min + gap : 0.0f);
  if (in.maximized) {
    L.maximized = true;
    L.views = a;
  } else {
    // Columns.
    const float columns = a.w - gap;
    const float left_w = std::floor(
        split_length(columns, in.panels.left_width * a.w, fs * kMinLeftFonts, fs * kMinRightFonts));
    const float right_x = a.x + left_w + gap, right_w = std::max(0.0f, columns - left_w);
    L.column_splitter = {a.x + left_w, a.y, gap, a.h};

    // Left: the title line, the GPU panel (at most half the column), the lessons below.
    L.title = {a.x, a.y, left_w, std::min(in.title_height, a.h)};
    const float below_title = std::max(0.0f, a.h - L.title.h);
    const float gpu_h = std::floor(std::min(in.gpu_height(left_w), below_title * 0.5f));
    L.gpu = {a.x, L.title.bottom(), left_w, gpu_h};
    const float lessons_y = L.gpu.bottom() + gap;
    L.lessons = {a.x, lessons_y, left_w, std::max(0.0f, a.bottom() - lessons_y)};

    // Right: the controls at their natural height (at most a third), then views over the
    // measurement, with the splitter between.
    const float controls_h = std::floor(std::min(in.controls_height, a.h / 3.0f));
    L.controls = {right_x, a.y, right_w, controls_h};
    const float rest_y = L.controls.bottom() + gap;
    const float rest = std::max(0.0f, a.bottom() - rest_y - gap);  // views + measurement
    const float measurement_h =
        std::floor(rest - split_length(rest, rest * (1.0f - in.panels.measurement_height),
                                       min_views,
                                       fs * (stacked ? kMinMeasurementSplitFonts
                                                     : kMinMeasurementFonts)));
    L.views = {right_x, rest_y, right_w, rest - measurement_h};
    L.measurement_splitter = {right_x, L.views.bottom(), right_w, gap};
    L.measurement = {right_x, L.views.bottom() + gap, right_w, measurement_h};
  }
  if (in.panels.split) {
    const Box whole = L.views;
    split_box(whole, in.panels.side_by_side, in.panels.split_fraction, gap, need, &L.views,
              &L.views_splitter, &L.views2);
  }
  return L;
}

bool splitter(const char* id, const Box& bar, bool vertical, float* position, bool* reset) {
  ImGui::SetCursorScreenPos(ImVec2(bar.x, bar.y));
  ImGui::InvisibleButton(id, ImVec2(std::max(1.0f, bar.w), std::max(1.0f, bar.h)));
  const bool hovered = ImGui::IsItemHovered(), active = ImGui::IsItemActive();
  if (hovered || active) {
    ImGui::SetMouseCursor(vertical ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
    // A line along the middle of the gap says "this moves".
    const ImU32 color =
        ImGui::GetColorU32(active ? ImGuiCol_SeparatorActive : ImGuiCol_SeparatorHovered);
    const float t = std::max(2.0f, ImGui::GetFontSize() * 0.15f);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    if (vertical) {
      const float x = bar.x + bar.w * 0.5f;
      dl->AddRectFilled(ImVec2(x - t * 0.5f, bar.y), ImVec2(x + t * 0.5f, bar.bottom()), color);
    } else {
      const float y = bar.y + bar.h * 0.5f;
      dl->AddRectFilled(ImVec2(bar.x, y - t * 0.5f), ImVec2(bar.right(), y + t * 0.5f), color);
    }
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) *reset = true;
  if (!active) return false;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const float at = vertical ? mouse.x - bar.w * 0.5f : mouse.y - bar.h * 0.5f;
  if (at == *position) return false;
  *position = at;
  return true;
}

}  // namespace fl::gui
