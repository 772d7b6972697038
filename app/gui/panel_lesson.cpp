// The lesson list and the selected lesson's title, formula and teaching text.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/gui/lesson_text.h"
#include "app/gui/panels.h"
#include "app/gui/widgets.h"
#include "kernels/catalog.h"

namespace fl::gui {
namespace {

// FUSIONLAB_LESSON_TEXT_DUMP=PATH (the UI test of teachers' copies, tests/ui/CMakeLists.txt):
// each time the panel shows a different text (lesson, file, note or width), the lines it laid
// out are appended to PATH: a "text" line naming the lesson and its file, the note if any, then
// one "line" per laid-out line, "visible" when it lies inside the panel's scrolled view.
void dump_lines(const std::string& id, const LessonText& text, const std::vector<TextLine>& lines,
                const std::vector<bool>& visible, float width) {
  static const char* path = std::getenv("FUSIONLAB_LESSON_TEXT_DUMP");
  static std::string last_key;
  if (!path || !*path) return;
  const std::string key = id + "\n" + text.source + "\n" + text.note + "\n" + std::to_string(width);
  if (key == last_key) return;
  last_key = key;
  std::FILE* f = std::fopen(path, "a");
  if (!f) return;
  std::fprintf(f, "text lesson=%s source=%s overridden=%d\n", id.c_str(), text.source.c_str(),
               text.overridden ? 1 : 0);
  if (!text.note.empty()) std::fprintf(f, "note %s\n", text.note.c_str());
  for (size_t i = 0; i < lines.size(); ++i) {
    const char* kind = lines[i].kind == BlockKind::heading1   ? "h1"
                       : lines[i].kind == BlockKind::heading2 ? "h2"
                                                              : "p";
    std::fprintf(f, "line %s %s %s\n", visible[i] ? "visible" : "hidden", kind,
                 lines[i].plain().c_str());
  }
  std::fclose(f);
}

void draw_teaching_text(const std::string& id) {
  const LessonText& text = lesson_text(id);
  if (!text.note.empty()) draw_text_note(text.note);
  const float width = std::max(ImGui::GetContentRegionAvail().x, ImGui::GetFontSize() * 4);
  std::vector<bool> visible;
  const std::vector<TextLine> lines = draw_text_blocks(text.blocks, width, &visible);
  dump_lines(id, text, lines, visible, width);
}

// Which kernel runs the shown level's launches that have several (the level table's variants,
// kernels/level_table.h) at the current size and precision on this GPU, and why. The GPU is the
// engine's (live) or the recording's; a compute capability 9.0 GPU is taken to run the sm_90a
// kernels that the default build has.
void draw_variant_choice(const Lab& lab) {
  const Lesson& lesson = lab.lesson();
  const int level = lab.shown_level();
  if (level < 0 || level >= lesson.level_count()) return;
  const FusionLevel& fl = lesson.info().levels[level];
  if (fl.variants.empty()) return;
  const DeviceFacts device = lab.session_snapshot_head().device;
  if (device.sm_count <= 0) return;
  const GpuFacts gpu{device.cc_major, device.cc_minor, device.sm_count,
                     device.cc_major == 9 && device.cc_minor == 0};
  for (int k = 0; k < static_cast<int>(fl.launches.size()); ++k) {
    const VariantChoice c = lesson.choose_variant(level, k, {lab.size(), 0}, lab.precision(), gpu);
    if (c.reason.empty()) continue;
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("Level %d: %s.", level, c.reason.c_str());
    ImGui::PopTextWrapPos();
  }
}

}  // namespace

void draw_lesson_panel(Lab& lab, double now) {
  section_title("Lessons", lesson_text(panel_text_id("lessons")));
  const auto& all = lessons();
  // Every lesson when the panel has room for them and for the lesson's title, formula, ladder
  // and a few lines of its text (at 1080p it has); fewer rows, scrolled, in a short window.
  const float row_h = ImGui::GetTextLineHeightWithSpacing();
  const float below = ImGui::GetTextLineHeightWithSpacing() * 9.0f;  // title .. some teaching text
  const float fit = std::floor((ImGui::GetContentRegionAvail().y - below) / row_h);
  const float rows = std::clamp(fit, 3.0f, static_cast<float>(all.size()));
  if (ImGui::BeginListBox("##lessons",
                          ImVec2(-1, row_h * rows + ImGui::GetStyle().FramePadding.y * 2))) {
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
      record_widget_label(label, LabelPlace::from_left);
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
  draw_variant_choice(lab);
  ImGui::Spacing();
  // The teaching text (assets/lessons/<id>.md, or a teacher's copy: app/gui/lesson_text.h)
  // scrolls inside what is left of the column.
  ImGui::BeginChild("##teaching", ImVec2(0, 0), false);
  draw_teaching_text(info.id);
  ImGui::EndChild();
}

}  // namespace fl::gui
