// Every view drawn once into an offscreen ImGui frame (no display, no GL): an ImGui context, a
// display size, a built font atlas, NewFrame, the views in a window, Render; then the draw data
// must hold the vertices each view added. Catches crashes and asserts in the drawing code, with
// the mouse over each view so that the hover read-outs (tooltips) run too.
#include <gtest/gtest.h>

#include <functional>

#include "tests/viz/viz_test_data.h"
#include "viz/flow_view.h"
#include "viz/memory_chart.h"
#include "viz/roofline_view.h"
#include "viz/timeline_view.h"

namespace fl::viz {
namespace {

using testing::add_counters;
using testing::add_records;
using testing::h200;
using testing::lesson_level;

class Offscreen : public ::testing::Test {
 protected:
  void SetUp() override {
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1280, 720);
    io.DeltaTime = 1.0f / 60;
    io.Fonts->AddFontDefault();
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);  // builds the atlas
  }
  void TearDown() override { ImGui::DestroyContext(); }

  // One frame with `draw` in a full-screen window; the vertices `draw` added to the window.
  int frame(const std::function<void()>& draw, ImVec2 mouse = ImVec2(-1, -1)) {
    ImGui::GetIO().MousePos = mouse;
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
    ImGui::Begin("views", nullptr, ImGuiWindowFlags_NoDecoration);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const int before = dl->VtxBuffer.Size;
    draw();
    const int added = dl->VtxBuffer.Size - before;
    ImGui::End();
    ImGui::Render();
    EXPECT_GT(ImGui::GetDrawData()->TotalVtxCount, 0);
    return added;
  }
};

TEST_F(Offscreen, EveryViewDrawsAtLevelZeroAndTheTopLevel) {
  for (const char* lesson_id : {"gelu_scale", "residual_layernorm"}) {
    const Lesson& lesson = *find_lesson(lesson_id);
    const int64_t size = lesson.info().size_axis.default_size;
    std::vector<Measurement> levels;
    for (int level = 0; level < lesson.level_count(); ++level) {
      Measurement m = lesson_level(lesson_id, size, level, 20.0);
      add_counters(&m, level == 0 ? 1.02 : 1.0);
      add_records(&m, 1.5);
      levels.push_back(m);
    }
    for (const Measurement* shown : {&levels.front(), &levels.back()}) {
      const FlowInput flow = flow_input(*shown, &lesson, h200(), &levels.front());
      const TimelineInput timeline = timeline_input(*shown);
      const MemoryInput memory = memory_input(*shown, levels.front());
      const RooflineInput roofline = roofline_input(levels, 4315, shown->level);
      // Twice each: once still, once with the mouse in the middle of the view.
      for (ImVec2 mouse : {ImVec2(-1, -1), ImVec2(640, 150)}) {
        EXPECT_GT(frame([&] { draw_flow("##flow", flow, 1.3, 300); }, mouse), 0) << lesson_id;
        EXPECT_GT(frame([&] { draw_timeline("##timeline", timeline, 300); }, mouse), 0);
        EXPECT_GT(frame([&] { draw_memory_chart("##memory", memory, 300); }, mouse), 0);
        EXPECT_GT(frame([&] { draw_roofline("##roofline", roofline, 300); }, mouse), 0);
      }
    }
  }
}

TEST_F(Offscreen, TheFlowViewReportsAnimationAndTheClockPauses) {
  const Measurement m = lesson_level("gelu_scale", 1 << 24, 0, 30.0);
  const FlowInput in = flow_input(m, find_lesson("gelu_scale"), h200(), &m);
  FlowResult result;
  frame([&] { result = draw_flow("##flow", in, 0.4, 260); });
  EXPECT_TRUE(result.animating);
  FlowClock clock;
  clock.toggle_pause(0.0);
  frame([&] { result = draw_flow("##flow", in, &clock, 5.0, 260); });
  EXPECT_FALSE(result.animating) << "paused: the app may stop redrawing";
  frame([&] { result = draw_flow("##flow", FlowInput(), 1.0, 260); });
  EXPECT_FALSE(result.animating) << "nothing to animate";
}

TEST_F(Offscreen, EmptyInputsDrawWithoutCrashing) {
  EXPECT_GT(frame([&] { draw_flow("##flow", FlowInput(), 0.0, 0); }), 0);
  EXPECT_GT(frame([&] { draw_timeline("##timeline", TimelineInput(), 0); }), 0);
  const Measurement empty;
  EXPECT_GT(frame([&] { draw_memory_chart("##memory", memory_input(empty, empty), 0); }), 0);
  EXPECT_GT(frame([&] { draw_roofline("##roofline", RooflineInput(), 0); }), 0);
}

}  // namespace
}  // namespace fl::viz
