// The lesson list and the selected lesson's title, formula and teaching text.
#include <algorithm>
#include <cmath>
#include <string>

#include "app/gui/panels.h"
#include "app/gui/widgets.h"
#include "kernels/catalog.h"

namespace fl::gui {

void draw_lesson_panel(Lab& lab, double now) {
  section_title(
      "Lessons",
      "Each lesson is one chain of GPU operations, measured at every fusion level: level 0 runs "
      "every operation as its own kernel (unfused), the top level runs them as one (fused). "
      "More lessons arrive later. When replaying, lessons the recording lacks are greyed out.");
  const auto& all = lessons();
  // Every lesson when the panel has room for them and for the lesson's title, formula, ladder
  // and a few lines of its text (at 1080p it has); fewer rows, scrolled, in a short window.
  const float row_h = ImGui::GetTextLineHeightWithSpacing();
  const float below = ImGui::GetTextLineHeightWithSpacing() * 9.0f;  // title .. some teaching text
  const float fit = std::floor((ImGui::GetContentRegionAvail().y - below) / row_h);
  const float rows = std::clamp(fit, 3.0f, static_cast<float>(all.size()));
  if (ImGui::BeginListBox("##lessons", ImVec2(-1, row_h * rows +
                                                      ImGui::GetStyle().FramePadding.y * 2))) {
    ImGuiStorage* storage = ImGui::GetStateStorage();
    const ImGuiID shown_id = ImGui::GetID("##lesson_in_view");
    for (int i = 0; i < static_cast<int>(all.size()); ++i) {
      const LessonInfo& info = all[i]->info();
      // In replay a lesson the recording lacks is greyed out (it can still be picked: the
      // controls then say what is recorded).
      const bool recorded = !lab.replay() || lab.replay()->recording.has_lesson(info.id);
      const std::string full = info.title + "   (" + info.id + ")";
      // Shortened with an ellipsis in a narrow column; the tooltip shows all of it.
      const std::string label = fit_text(full, ImGui::GetContentRegionAvail().x) + "##" + info.id;
      if (!recorded) {
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      }
      if (ImGui::Selectable(label.c_str(), i == lab.lesson_index())) lab.select_lesson(i, now);
      if (!recorded) {
        ImGui::PopStyleColor();
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: not in this recording.", full.c_str());
      } else if (label.compare(0, full.size(), full) != 0 && ImGui::IsItemHovered()) {
        ImGui::SetTooltip("%s", full.c_str());
      }
      // Keep the chosen lesson in view when it changes other than by a click here (a script, or
      // replay moving to a recorded lesson).
      if (i == lab.lesson_index() && storage->GetInt(shown_id, -1) != i) {
        ImGui::SetScrollHereY(0.5f);
        storage->SetInt(shown_id, i);
      }
    }
    ImGui::EndListBox();
  }

  const LessonInfo& info = lab.lesson().info();
  ImGui::Spacing();
  ImGui::TextUnformatted(info.title.c_str());
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.85f, 0.85f, 0.6f, 1.0f));
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(info.formula.c_str());
  ImGui::PopTextWrapPos();
  ImGui::PopStyleColor();
  std::string ladder;
  for (size_t i = 0; i < info.levels.size(); ++i) {
    ladder += (i ? "  |  " : "") + std::to_string(i) + " " + info.levels[i].name + ": " +
              std::to_string(info.levels[i].launches.size()) +
              (info.levels[i].launches.size() == 1 ? " kernel" : " kernels");
  }
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextDisabled("%s", ladder.c_str());
  ImGui::PopTextWrapPos();
  ImGui::Spacing();
  // The teaching text scrolls inside what is left of the column.
  ImGui::BeginChild("##teaching", ImVec2(0, 0), false);
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(info.teaching_text.c_str());
  ImGui::PopTextWrapPos();
  ImGui::EndChild();
}

}  // namespace fl::gui
