// The level table (kernels/level_table.h): a lesson's info, traffic() and Workspace::launch are
// derived from one declaration. Checked on a small table of our own (no GPU, no CUDA header) and
// on every lesson of the catalog.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/catalog.h"
#include "kernels/level_table.h"

namespace fl {
namespace {

// A workspace that records which launcher ran, on which stream.
class RecordingWorkspace final : public LevelWorkspace<RecordingWorkspace> {
 public:
  static const LevelTable<RecordingWorkspace>& levels();

  Status fill_inputs(uint64_t, cudaStream_t) override { return Status::Ok(); }
  Status poison_outputs(cudaStream_t) override { return Status::Ok(); }
  Status check(cudaStream_t, CheckResult*) override { return Status::Ok(); }
  Status download(cudaStream_t, std::vector<HostTensor>*, std::vector<HostTensor>*) override {
    return Status::Ok();
  }

  std::vector<std::string> ran;
  cudaStream_t last_stream = nullptr;
};

const LevelTable<RecordingWorkspace>& RecordingWorkspace::levels() {
  using Ws = RecordingWorkspace;
  static const LevelTable<Ws> table = {
      {"unfused",
       "two kernels",
       "nothing",
       {{"first",
         [](Ws& w, cudaStream_t s) {
           w.ran.push_back("first");
           w.last_stream = s;
           return Status::Ok();
         },
         [](const Dims& d) {
           return Textbook{d.s * d.b, 3 * d.i * d.b, 2.0 * d.s};
         }},
        {"second",
         [](Ws& w, cudaStream_t) {
           w.ran.push_back("second");
           return Status::Error("second failed");
         },
         [](const Dims& d) {
           return Textbook{d.s * d.i, 0, 0};
         }}}},
      {"fused",
       "one kernel",
       "the intermediate, in a register",
       {{"both",
         [](Ws& w, cudaStream_t) {
           w.ran.push_back("both");
           return Status::Ok();
         },
         [](const Dims& d) {
           return Textbook{d.s * d.b, d.s * d.b + 1, 7.0};
         }}}},
  };
  return table;
}

class RecordingLesson final : public LevelLesson<RecordingWorkspace> {
 public:
  RecordingLesson()
      : LevelLesson("recording", "Recording", "y = x", {"rows", 1, 100, 10, "row length", 5, 50},
                    {Precision::fp32}) {}
  int64_t workspace_bytes(Shape, Precision) const override { return 0; }
  Status create_workspace(Shape, Precision, std::unique_ptr<Workspace>* out) const override {
    *out = std::make_unique<RecordingWorkspace>();
    return Status::Ok();
  }
  std::vector<HostTensor> reference(const std::vector<HostTensor>&) const override { return {}; }
  double tolerance(Precision) const override { return 0; }
};

TEST(LevelTable, InfoIsTheTables) {
  const RecordingLesson lesson;
  const LessonInfo& info = lesson.info();
  EXPECT_EQ(info.id, "recording");
  EXPECT_EQ(info.size_axis.inner_default, 5);
  EXPECT_EQ(info.precisions, std::vector<Precision>{Precision::fp32});
  ASSERT_EQ(lesson.level_count(), 2);
  EXPECT_EQ(info.levels[0].name, "unfused");
  EXPECT_EQ(info.levels[0].summary, "two kernels");
  EXPECT_EQ(info.levels[0].on_chip, "nothing");
  EXPECT_EQ(info.levels[0].launches, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(info.levels[1].name, "fused");
  EXPECT_EQ(info.levels[1].on_chip, "the intermediate, in a register");
  EXPECT_EQ(info.levels[1].launches, (std::vector<std::string>{"both"}));
}

TEST(LevelTable, TrafficEvaluatesTheFormulasAtTheResolvedShape) {
  const RecordingLesson lesson;
  // Inner 0 is the lesson's default row length, 5; bf16 is 2 bytes, fp32 4.
  const auto unfused = lesson.traffic(0, Shape(7), Precision::bf16);
  ASSERT_EQ(unfused.size(), 2u);
  EXPECT_EQ(unfused[0].kernel, "first");
  EXPECT_EQ(unfused[0].bytes_read, 7 * 2);
  EXPECT_EQ(unfused[0].bytes_written, 3 * 5 * 2);
  EXPECT_EQ(unfused[0].flops, 14.0);
  EXPECT_EQ(unfused[1].kernel, "second");
  EXPECT_EQ(unfused[1].bytes_read, 7 * 5);
  const auto fused = lesson.traffic(1, Shape(7, 9), Precision::fp32);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(fused[0].kernel, "both");
  EXPECT_EQ(fused[0].bytes_read, 28);
  EXPECT_EQ(fused[0].bytes_written, 29);
  EXPECT_EQ(fused[0].flops, 7.0);
  EXPECT_TRUE(lesson.traffic(2, Shape(7), Precision::fp32).empty());
  EXPECT_TRUE(lesson.traffic(-1, Shape(7), Precision::fp32).empty());
}

TEST(LevelTable, LaunchRunsTheTablesLauncherAndPassesItsStatusOn) {
  RecordingWorkspace ws;
  int marker = 0;
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(&marker);
  ASSERT_TRUE(ws.launch(0, 0, stream).ok());
  EXPECT_EQ(ws.last_stream, stream);
  const Status second = ws.launch(0, 1, stream);
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(second.message(), "second failed");
  ASSERT_TRUE(ws.launch(1, 0, stream).ok());
  EXPECT_EQ(ws.ran, (std::vector<std::string>{"first", "second", "both"}));
}

TEST(LevelTable, LaunchRefusesWhatTheTableDoesNotHave) {
  RecordingWorkspace ws;
  for (auto [level, launch] : {std::pair{2, 0}, {-1, 0}, {1, 1}, {0, 2}, {0, -1}}) {
    const Status st = ws.launch(level, launch, nullptr);
    EXPECT_FALSE(st.ok()) << level << "," << launch;
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
  EXPECT_NE(ws.launch(1, 1, nullptr).message().find("level 1 has no launch 1 (it has 1)"),
            std::string::npos);
  EXPECT_NE(ws.launch(3, 0, nullptr).message().find("no fusion level 3 (levels 0..1)"),
            std::string::npos);
  EXPECT_TRUE(ws.ran.empty());
}

// Every lesson of the catalog says what stays on chip at every level, in words.
TEST(LevelTable, EveryLessonSaysWhatStaysOnChip) {
  for (const Lesson* lesson : lessons()) {
    for (const FusionLevel& level : lesson->info().levels) {
      EXPECT_FALSE(level.on_chip.empty()) << lesson->info().id << " " << level.name;
      EXPECT_FALSE(level.summary.empty()) << lesson->info().id << " " << level.name;
    }
  }
}

}  // namespace
}  // namespace fl
