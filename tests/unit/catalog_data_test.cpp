// The lesson catalog as data (kernels/catalog_data.h): the committed assets/lessons/catalog.json
// is what the kernels say (in the full build: the drift check; in the replay-only build, whose
// lessons come from that file: the round trip), the lessons read back from it give the same info
// and textbook traffic at any shape, and what cannot be written down or read back is refused
// with one sentence.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "kernels/catalog.h"
#include "kernels/catalog_data.h"

namespace fl {
namespace {

const std::filesystem::path kCommitted =
    std::filesystem::path(FUSIONLAB_SOURCE_DIR) / "assets" / "lessons" / "catalog.json";

std::string committed_text() {
  std::ifstream in(kCommitted, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

#ifdef FUSIONLAB_REPLAY_ONLY
constexpr const char* kHowToFix =
    "the replay-only build's lessons, read from the committed catalog, do not write it back "
    "unchanged";
#else
constexpr const char* kHowToFix =
    "assets/lessons/catalog.json differs from what the lessons in kernels/ say; rewrite it with "
    "`build/fusionlab lessons --json > assets/lessons/catalog.json` and commit it";
#endif

TEST(CatalogData, CommittedCatalogIsWhatTheLessonsSay) {
  const std::string committed = committed_text();
  ASSERT_FALSE(committed.empty()) << kCommitted << " is missing or empty";
  std::string now;
  const Status st = catalog_to_json(lessons(), &now);
  ASSERT_TRUE(st.ok()) << st.message();
  // Compared line by line so a failure shows the first line that differs.
  std::istringstream a(committed), b(now);
  std::string line_a, line_b;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(a, line_a));
    const bool more_b = static_cast<bool>(std::getline(b, line_b));
    if (!more_a && !more_b) break;
    ASSERT_EQ(line_a, line_b) << kHowToFix << " (first difference at line " << line << ")";
  }
}

// Info and traffic of the lessons read back from the committed file, against this build's
// catalog: the CUDA lessons themselves in the full build.
TEST(CatalogData, LessonsReadBackGiveTheSameInfoAndTraffic) {
  std::vector<std::unique_ptr<Lesson>> data;
  const Status st = catalog_from_json(committed_text(), &data);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(data.size(), lessons().size());
  std::mt19937_64 rng(15);
  for (size_t n = 0; n < data.size(); ++n) {
    const Lesson& real = *lessons()[n];
    const Lesson& read = *data[n];
    const LessonInfo& a = real.info();
    const LessonInfo& b = read.info();
    SCOPED_TRACE(a.id);
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.title, b.title);
    EXPECT_EQ(a.formula, b.formula);
    EXPECT_EQ(a.size_axis.unit, b.size_axis.unit);
    EXPECT_EQ(a.size_axis.min, b.size_axis.min);
    EXPECT_EQ(a.size_axis.max, b.size_axis.max);
    EXPECT_EQ(a.size_axis.default_size, b.size_axis.default_size);
    EXPECT_EQ(a.size_axis.inner_name, b.size_axis.inner_name);
    EXPECT_EQ(a.size_axis.inner_default, b.size_axis.inner_default);
    EXPECT_EQ(a.size_axis.inner_max, b.size_axis.inner_max);
    EXPECT_EQ(a.precisions, b.precisions);
    ASSERT_EQ(a.levels.size(), b.levels.size());
    for (size_t l = 0; l < a.levels.size(); ++l) {
      EXPECT_EQ(a.levels[l].name, b.levels[l].name);
      EXPECT_EQ(a.levels[l].summary, b.levels[l].summary);
      EXPECT_EQ(a.levels[l].launches, b.levels[l].launches);
      EXPECT_EQ(a.levels[l].on_chip, b.levels[l].on_chip);
      ASSERT_EQ(a.levels[l].variants.size(), b.levels[l].variants.size());
      for (size_t k = 0; k < a.levels[l].variants.size(); ++k) {
        const VariantInfo &va = a.levels[l].variants[k], &vb = b.levels[l].variants[k];
        EXPECT_EQ(va.launch, vb.launch);
        EXPECT_EQ(va.name, vb.name);
        EXPECT_EQ(va.what, vb.what);
        EXPECT_EQ(va.function, vb.function);
        EXPECT_EQ(va.phases, vb.phases);
        EXPECT_EQ(va.range.min_cc, vb.range.min_cc);
        EXPECT_EQ(va.range.max_cc, vb.range.max_cc);
        EXPECT_EQ(va.range.wgmma_build, vb.range.wgmma_build);
        EXPECT_EQ(va.range.precisions, vb.range.precisions);
        EXPECT_EQ(va.range.max_size, vb.range.max_size);
        EXPECT_EQ(va.range.prefer_from, vb.range.prefer_from);
        EXPECT_EQ(va.range.prefer_to, vb.range.prefer_to);
        EXPECT_EQ(va.range.prefer_max_cc, vb.range.prefer_max_cc);
        EXPECT_EQ(va.range.shared_plan, vb.range.shared_plan);
        ASSERT_EQ(va.range.prefer_by_inner.size(), vb.range.prefer_by_inner.size());
        for (size_t k = 0; k < va.range.prefer_by_inner.size(); ++k) {
          EXPECT_EQ(va.range.prefer_by_inner[k].inner_from, vb.range.prefer_by_inner[k].inner_from);
          EXPECT_EQ(va.range.prefer_by_inner[k].prefer_from,
                    vb.range.prefer_by_inner[k].prefer_from);
          EXPECT_EQ(va.range.prefer_by_inner[k].prefer_to, vb.range.prefer_by_inner[k].prefer_to);
        }
      }
    }
    // Random sizes over the whole axis, the default row length (inner 0) and odd ones.
    std::uniform_int_distribution<int64_t> size(a.size_axis.min, a.size_axis.max);
    std::uniform_int_distribution<int64_t> inner(
        1, a.size_axis.inner_max > 0 ? a.size_axis.inner_max : 4096);
    for (int trial = 0; trial < 40; ++trial) {
      const Shape shape(size(rng), trial % 4 == 0 ? 0 : inner(rng));
      for (Precision p : a.precisions) {
        for (int level = 0; level < real.level_count(); ++level) {
          const auto want = real.traffic(level, shape, p);
          const auto got = read.traffic(level, shape, p);
          ASSERT_EQ(want.size(), got.size()) << "level " << level;
          for (size_t k = 0; k < want.size(); ++k) {
            SCOPED_TRACE("level " + std::to_string(level) + " " + to_string(p) + " size " +
                         std::to_string(shape.size) + " inner " + std::to_string(shape.inner));
            EXPECT_EQ(want[k].kernel, got[k].kernel);
            EXPECT_EQ(want[k].bytes_read, got[k].bytes_read);
            EXPECT_EQ(want[k].bytes_written, got[k].bytes_written);
            EXPECT_NEAR(want[k].flops, got[k].flops, 1e-12 * std::max(1.0, want[k].flops));
          }
        }
      }
    }
  }
}

TEST(CatalogData, LessonsReadBackCannotRun) {
  std::vector<std::unique_ptr<Lesson>> data;
  ASSERT_TRUE(catalog_from_json(committed_text(), &data).ok());
  std::unique_ptr<Workspace> ws;
  const Status st = data.front()->create_workspace(Shape(1024), Precision::fp32, &ws);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("this build of fusionlab has no CUDA"), std::string::npos)
      << st.message();
  EXPECT_EQ(ws, nullptr);
  EXPECT_TRUE(data.front()->traffic(99, Shape(1024), Precision::fp32).empty());
}

// A lesson whose traffic the catalog's terms cannot hold.
class OddLesson final : public Lesson {
 public:
  explicit OddLesson(int kind) : kind_(kind) {
    info_.id = "odd";
    info_.title = "Odd";
    info_.size_axis = {"elements", 1, 1 << 20, 1024, "", 0, 0};
    info_.levels = {{"unfused", "one launch", {"k"}}};
    info_.precisions = {Precision::fp32};
  }
  const LessonInfo& info() const override { return info_; }
  std::vector<LaunchTraffic> traffic(int, Shape shape, Precision) const override {
    if (kind_ == 0) return {{"k", shape.size * shape.size, 0, 0}};              // s^2
    if (kind_ == 1) return {{shape.size > 5 ? "big" : "k", shape.size, 0, 0}};  // name changes
    return {{"k", (shape.size + 1) / 2, 0, 0}};                                 // not whole-number
  }
  int64_t workspace_bytes(Shape, Precision) const override { return 0; }
  Status create_workspace(Shape, Precision, std::unique_ptr<Workspace>*) const override {
    return Status::Error("no");
  }
  std::vector<HostTensor> reference(const std::vector<HostTensor>&) const override { return {}; }
  double tolerance(Precision) const override { return 0; }

 private:
  int kind_;
  LessonInfo info_;
};

TEST(CatalogData, TrafficOfAnotherFormIsRefusedByName) {
  for (int kind = 0; kind < 3; ++kind) {
    OddLesson odd(kind);
    std::string out;
    const Status st = catalog_to_json({&odd}, &out);
    ASSERT_FALSE(st.ok()) << "kind " << kind;
    EXPECT_EQ(st.message().rfind("odd level 0 fp32", 0), 0u) << st.message();
  }
}

TEST(CatalogData, MalformedCatalogsAreRefusedWithOneSentence) {
  const std::string good = committed_text();
  std::string wrong_version = good;
  const auto at = wrong_version.find("\"catalog_version\": 1");
  ASSERT_NE(at, std::string::npos);
  wrong_version.replace(at, 20, "\"catalog_version\": 7");
  std::string bad_term = good;
  const auto s_at = bad_term.find("\"s\":");
  ASSERT_NE(s_at, std::string::npos);
  bad_term.replace(s_at, 4, "\"q\":");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "malformed"},
      {"not json", "malformed"},
      {good.substr(0, good.size() / 2), "malformed"},
      {"{\"catalog_version\": 1}", "malformed"},
      {"{\"catalog_version\": 1, \"lessons\": []}", "holds no lessons"},
      {"{\"catalog_version\": 1, \"lessons\": [{\"id\": 3}]}", "malformed"},
      {wrong_version, "version 7 is not supported"},
      {bad_term, "unknown traffic term 'q'"},
  };
  for (const auto& [text, expected] : cases) {
    std::vector<std::unique_ptr<Lesson>> out;
    const Status st = catalog_from_json(text, &out);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(expected), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
    EXPECT_TRUE(out.empty());
  }
}

}  // namespace
}  // namespace fl
