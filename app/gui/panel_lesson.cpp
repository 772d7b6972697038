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

// Headings are larger than the body text and drawn brighter; emphasis has a colour of its own.
float font_scale(BlockKind kind) {
  return kind == BlockKind::heading1 ? 1.3f : kind == BlockKind::heading2 ? 1.12f : 1.0f;
}
ImU32 text_color(BlockKind kind, bool emphasis) {
  if (emphasis) return IM_COL32(140, 200, 255, 255);
  return kind == BlockKind::paragraph ? IM_COL32(214, 214, 214, 255) : IM_COL32(255, 255, 255, 255);
}

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
  if (!text.note.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.72f, 0.35f, 1.0f));
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(text.note.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
    ImGui::Spacing();
  }
  ImFont* font = ImGui::GetFont();
  const float base = ImGui::GetFontSize();
  const float width = std::max(ImGui::GetContentRegionAvail().x, base * 4);
  const MeasureText measure = [&](const std::string& s, BlockKind kind, bool) {
    return font->CalcTextSizeA(base * font_scale(kind), FLT_MAX, 0.0f, s.c_str(), s.c_str() + s.size()).x;
  };
  const std::vector<TextLine> lines = wrap_text(text.blocks, width, measure);
  std::vector<bool> visible(lines.size(), false);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 clip_min = dl->GetClipRectMin(), clip_max = dl->GetClipRectMax();
  for (size_t i = 0; i < lines.size(); ++i) {
    const TextLine& line = lines[i];
    const float size = base * font_scale(line.kind);
    if (line.first_of_block && i > 0) ImGui::Dummy(ImVec2(0, base * 0.45f));  // between blocks
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    for (const LineRun& run : line.runs) {
      dl->AddText(font, size, ImVec2(pos.x + run.x, pos.y), text_color(line.kind, run.emphasis),
                  run.text.c_str(), run.text.c_str() + run.text.size());
    }
    ImGui::Dummy(ImVec2(width, size + ImGui::GetStyle().ItemSpacing.y * 0.5f));
    visible[i] = pos.y >= clip_min.y - 0.5f && pos.y + size <= clip_max.y + 0.5f;
  }
  dump_lines(id, text, lines, visible, width);
}

}  // namespace

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
  // The teaching text (assets/lessons/<id>.md, or a teacher's copy: app/gui/lesson_text.h)
  // scrolls inside what is left of the column.
  ImGui::BeginChild("##teaching", ImVec2(0, 0), false);
  draw_teaching_text(info.id);
  ImGui::EndChild();
}

}  // namespace fl::gui
