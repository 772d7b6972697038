// Teaching text as assets (app/gui/lesson_text.h): the Markdown-subset parser, the wrapping, the
// loader's choice between a teacher's copy and the shipped text, and the shipped files themselves.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/gui/lesson_text.h"
#include "app/gui/panels.h"
#include "app/measure/choices.h"
#include "kernels/catalog.h"

#ifndef FUSIONLAB_SOURCE_DIR
#error "FUSIONLAB_SOURCE_DIR must name the source tree"
#endif

namespace fl::gui {
namespace {

namespace fs = std::filesystem;

std::vector<TextBlock> parse_ok(const std::string& text) {
  std::vector<TextBlock> blocks;
  const Status st = parse_lesson_text(text, &blocks);
  EXPECT_TRUE(st.ok()) << st.message();
  return blocks;
}

TEST(LessonTextParse, ParagraphsAreSeparatedByBlankLinesAndTheirLinesJoined) {
  const auto blocks = parse_ok("one\ntwo  three\n\n\n  four\t five \n");
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].kind, BlockKind::paragraph);
  EXPECT_EQ(blocks[0].plain(), "one two three");
  EXPECT_EQ(blocks[1].plain(), "four five");
}

TEST(LessonTextParse, HeadingsAreBlocksOfTheirOwn) {
  const auto blocks = parse_ok("# Big title\ntext under it\n## Smaller\nmore\n#not a heading\n");
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0].kind, BlockKind::heading1);
  EXPECT_EQ(blocks[0].plain(), "Big title");
  EXPECT_EQ(blocks[1].kind, BlockKind::paragraph);
  EXPECT_EQ(blocks[1].plain(), "text under it");
  EXPECT_EQ(blocks[2].kind, BlockKind::heading2);
  EXPECT_EQ(blocks[2].plain(), "Smaller");
  EXPECT_EQ(blocks[3].plain(), "more #not a heading");
}

TEST(LessonTextParse, EmphasisBetweenStars) {
  const auto blocks = parse_ok("*Unfused*, the kernel reads *x once* and (*y*).");
  ASSERT_EQ(blocks.size(), 1u);
  const std::vector<TextSpan> want = {{"Unfused", true}, {", the kernel reads ", false},
                                      {"x once", true},  {" and (", false},
                                      {"y", true},       {").", false}};
  EXPECT_EQ(blocks[0].spans, want);
}

TEST(LessonTextParse, FormulasKeepTheirStars) {
  // Stars with spaces around them, inside words, unmatched or escaped are text.
  const auto blocks = parse_ok("y = s * GELU(x), a*b*c, 2 * 3 *, \\*literal\\* and * lone");
  ASSERT_EQ(blocks.size(), 1u);
  ASSERT_EQ(blocks[0].spans.size(), 1u);
  EXPECT_FALSE(blocks[0].spans[0].emphasis);
  EXPECT_EQ(blocks[0].plain(), "y = s * GELU(x), a*b*c, 2 * 3 *, *literal* and * lone");
}

TEST(LessonTextParse, EmphasisInAHeading) {
  const auto blocks = parse_ok("## Why *fusion* pays\n");
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].kind, BlockKind::heading2);
  ASSERT_EQ(blocks[0].spans.size(), 3u);
  EXPECT_TRUE(blocks[0].spans[1].emphasis);
  EXPECT_EQ(blocks[0].spans[1].text, "fusion");
}

TEST(LessonTextParse, WindowsLineEndsAndAByteOrderMark) {
  const auto blocks = parse_ok("\xEF\xBB\xBF# T\r\nline one\r\nline two\r\n\r\nnext\r\n");
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].plain(), "T");
  EXPECT_EQ(blocks[1].plain(), "line one line two");
  EXPECT_EQ(blocks[2].plain(), "next");
}

TEST(LessonTextParse, UnicodeTextIsKept) {
  const auto blocks = parse_ok("µs, ≈ 2×, “quoted” *Größe* café");
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].plain(), "µs, ≈ 2×, “quoted” Größe café");
  ASSERT_EQ(blocks[0].spans.size(), 3u);
  EXPECT_TRUE(blocks[0].spans[1].emphasis);
}

TEST(LessonTextParse, BrokenTextIsRefusedWithTheReason) {
  std::vector<TextBlock> blocks;
  Status st = parse_lesson_text("good start \xC3\x28 bad", &blocks);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "not valid UTF-8 (byte 11)");
  st = parse_lesson_text(std::string("a\0b", 3), &blocks);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "a NUL byte at byte 1");
  st = parse_lesson_text("  \n\n\t\n", &blocks);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "no text (the file is empty or blank)");
  st = parse_lesson_text("", &blocks);
  EXPECT_FALSE(st.ok());
  st = parse_lesson_text("##\n#\n", &blocks);  // headings without text
  EXPECT_FALSE(st.ok());
}

TEST(LessonTextParse, Utf8Validation) {
  EXPECT_EQ(first_invalid_utf8("plain ascii"), -1);
  EXPECT_EQ(first_invalid_utf8("\xF0\x9F\x98\x80 emoji"), -1);
  EXPECT_EQ(first_invalid_utf8("ab\x80"), 2);            // a lone continuation byte
  EXPECT_EQ(first_invalid_utf8("\xC0\xAF"), 0);          // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xE0\x80\xAF"), 0);      // overlong, three bytes
  EXPECT_EQ(first_invalid_utf8("x\xED\xA0\x80"), 1);     // a UTF-16 surrogate
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0);  // past U+10FFFF
  EXPECT_EQ(first_invalid_utf8("abc\xE2\x82"), 3);       // cut short at the end
  EXPECT_EQ(first_invalid_utf8("\xFF"), 0);
}

// ---- wrapping: every byte is 10 px wide, headings' bytes 20 px

float fixed_width(const std::string& s, BlockKind kind, bool) {
  return static_cast<float>(s.size()) * (kind == BlockKind::paragraph ? 10.0f : 20.0f);
}

std::vector<std::string> plains(const std::vector<TextLine>& lines) {
  std::vector<std::string> out;
  for (const TextLine& line : lines) out.push_back(line.plain());
  return out;
}

TEST(LessonTextWrap, WordsMoveToTheNextLineWhenTheyDoNotFit) {
  const auto blocks = parse_ok("aaa bbb ccc dddd e");
  // 100 px = 10 characters per line.
  const auto lines = wrap_text(blocks, 100, fixed_width);
  EXPECT_EQ(plains(lines), (std::vector<std::string>{"aaa bbb", "ccc dddd e"}));
  EXPECT_TRUE(lines[0].first_of_block);
  EXPECT_FALSE(lines[1].first_of_block);
  for (const TextLine& line : lines) {
    for (const LineRun& run : line.runs) EXPECT_LE(run.x + run.width, 100.0f) << run.text;
  }
}

TEST(LessonTextWrap, HeadingsWrapAtTheirLargerSize) {
  const auto blocks = parse_ok("# aa bb cc\n\naa bb cc");
  const auto lines = wrap_text(blocks, 100, fixed_width);
  // A heading's "aa bb" is 100 px: it fits; the paragraph's whole line is 80 px.
  EXPECT_EQ(plains(lines), (std::vector<std::string>{"aa bb", "cc", "aa bb cc"}));
  EXPECT_EQ(lines[0].kind, BlockKind::heading1);
  EXPECT_EQ(lines[2].kind, BlockKind::paragraph);
  EXPECT_TRUE(lines[2].first_of_block);
}

TEST(LessonTextWrap, EmphasisRunsKeepTheirPlaceAndWordsStayWhole) {
  const auto blocks = parse_ok("the *fused* kernel *GELU*(x) wins");
  const auto lines = wrap_text(blocks, 160, fixed_width);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].plain(), "the fused kernel");
  ASSERT_EQ(lines[0].runs.size(), 3u);
  EXPECT_EQ(lines[0].runs[1].text, "fused");
  EXPECT_TRUE(lines[0].runs[1].emphasis);
  EXPECT_FLOAT_EQ(lines[0].runs[1].x, 40.0f);  // "the " before it
  // "GELU(x)" is one word of two emphases: it moved to the next line whole.
  EXPECT_EQ(lines[1].plain(), "GELU(x) wins");
  ASSERT_GE(lines[1].runs.size(), 2u);
  EXPECT_EQ(lines[1].runs[0].text, "GELU");
  EXPECT_TRUE(lines[1].runs[0].emphasis);
  EXPECT_FLOAT_EQ(lines[1].runs[1].x, 40.0f);
}

TEST(LessonTextWrap, AWordWiderThanTheLineIsBrokenBetweenCharacters) {
  const auto blocks = parse_ok("xx abcdefghijklmnopqrstuvwxyz µµµµµµ");
  const auto lines = wrap_text(blocks, 100, fixed_width);
  // µ is two bytes (20 px here): never split inside it.
  EXPECT_EQ(plains(lines),
            (std::vector<std::string>{"xx", "abcdefghij", "klmnopqrst", "uvwxyz", "µµµµµ", "µ"}));
  for (const TextLine& line : lines) {
    for (const LineRun& run : line.runs) EXPECT_LE(run.x + run.width, 100.0f) << run.text;
  }
}

TEST(LessonTextWrap, ANarrowPanelStillShowsEveryCharacter) {
  const auto blocks = parse_ok("ab cd");
  const auto lines = wrap_text(blocks, 5, fixed_width);  // narrower than one character
  EXPECT_EQ(plains(lines), (std::vector<std::string>{"a", "b", "c", "d"}));
}

// ---- loading

class LessonTextLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("fusionlab_lesson_text_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "shipped");
    fs::create_directories(root_ / "teacher");
    write(root_ / "shipped" / "demo.md", "# Shipped\n\nThe shipped text.\n");
    sources_.shipped_dir = (root_ / "shipped").string();
    sources_.override_dir = (root_ / "teacher").string();
  }
  void TearDown() override { fs::remove_all(root_); }
  static void write(const fs::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  fs::path teacher(const std::string& name) const { return root_ / "teacher" / name; }

  fs::path root_;
  LessonTextSources sources_;
};

TEST_F(LessonTextLoad, TheTeachersCopyWins) {
  write(teacher("demo.md"), "My course's *own* words.\n");
  std::string message;
  const LessonText text = load_lesson_text("demo", sources_, &message);
  EXPECT_TRUE(text.overridden);
  EXPECT_EQ(text.source, teacher("demo.md").string());
  ASSERT_EQ(text.blocks.size(), 1u);
  EXPECT_EQ(text.blocks[0].plain(), "My course's own words.");
  EXPECT_TRUE(text.note.empty());
  EXPECT_TRUE(message.empty());
}

TEST_F(LessonTextLoad, NoCopyMeansTheShippedTextQuietly) {
  std::string message;
  const LessonText text = load_lesson_text("demo", sources_, &message);
  EXPECT_FALSE(text.overridden);
  EXPECT_EQ(text.source, (root_ / "shipped" / "demo.md").string());
  ASSERT_EQ(text.blocks.size(), 2u);
  EXPECT_EQ(text.blocks[1].plain(), "The shipped text.");
  EXPECT_TRUE(text.note.empty());
  EXPECT_TRUE(message.empty());
}

// A copy that exists but cannot be used: the shipped text, a note for the panel and one line
// for stderr, both naming the file and what is wrong with it.
void expect_fallback(const LessonText& text, const std::string& message, const std::string& path,
                     const std::string& why) {
  EXPECT_FALSE(text.overridden);
  ASSERT_EQ(text.blocks.size(), 2u);
  EXPECT_EQ(text.blocks[1].plain(), "The shipped text.");
  EXPECT_NE(text.note.find("Your copy demo.md: "), std::string::npos) << text.note;
  EXPECT_NE(text.note.find(why), std::string::npos) << text.note;
  EXPECT_NE(text.note.find("showing the shipped text"), std::string::npos) << text.note;
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find(why), std::string::npos) << message;
  EXPECT_NE(message.find("lesson demo shows the shipped text"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
}

TEST_F(LessonTextLoad, BrokenUtf8FallsBack) {
  write(teacher("demo.md"), "Bad \xFF byte\n");
  std::string message;
  const LessonText text = load_lesson_text("demo", sources_, &message);
  expect_fallback(text, message, teacher("demo.md").string(), "not valid UTF-8 (byte 4)");
}

TEST_F(LessonTextLoad, EmptyFallsBack) {
  write(teacher("demo.md"), "\n\n");
  std::string message;
  const LessonText text = load_lesson_text("demo", sources_, &message);
  expect_fallback(text, message, teacher("demo.md").string(), "no text");
}

TEST_F(LessonTextLoad, OversizedFallsBack) {
  write(teacher("demo.md"), std::string(kMaxLessonTextBytes + 1, 'a'));
  std::string message;
  const LessonText text = load_lesson_text("demo", sources_, &message);
  expect_fallback(text, message, teacher("demo.md").string(),
                  "larger than 256 KiB, the limit for a lesson text");
}

TEST_F(LessonTextLoad, AFifoFallsBackWithoutHanging) {
  ASSERT_EQ(::mkfifo(teacher("demo.md").c_str(), 0600), 0);
  std::string message;
  const LessonText text = load_lesson_text("demo", sources_, &message);
  expect_fallback(text, message, teacher("demo.md").string(), "a FIFO (named pipe)");
}

TEST_F(LessonTextLoad, AFolderOrADanglingLinkFallsBack) {
  fs::create_directories(teacher("demo.md"));
  std::string message;
  LessonText text = load_lesson_text("demo", sources_, &message);
  expect_fallback(text, message, teacher("demo.md").string(), "a folder");
  fs::remove(teacher("demo.md"));
  fs::create_symlink(root_ / "nowhere.md", teacher("demo.md"));
  message.clear();
  text = load_lesson_text("demo", sources_, &message);
  expect_fallback(text, message, teacher("demo.md").string(), "cannot open");
}

TEST_F(LessonTextLoad, AnUnreadableCopyFallsBack) {
  write(teacher("demo.md"), "Secret.\n");
  fs::permissions(teacher("demo.md"), fs::perms::none);
  if (::access(teacher("demo.md").c_str(), R_OK) == 0) GTEST_SKIP() << "root reads anything";
  std::string message;
  const LessonText text = load_lesson_text("demo", sources_, &message);
  expect_fallback(text, message, teacher("demo.md").string(), "cannot open");
}

TEST_F(LessonTextLoad, NoShippedTextEitherSaysSo) {
  fs::remove(root_ / "shipped" / "demo.md");
  write(teacher("demo.md"), "\xC3");
  std::string message;
  const LessonText text = load_lesson_text("demo", sources_, &message);
  EXPECT_TRUE(text.blocks.empty());
  EXPECT_NE(text.note.find("The shipped text could not be read"), std::string::npos) << text.note;
  EXPECT_NE(message.find("has no teaching text"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

// The views' and panels' explanations live in folders beside the lessons' texts and follow the
// same rules; their messages name them as views and panels.
TEST_F(LessonTextLoad, AViewsTextFollowsTheSameRulesAndIsNamedAsAView) {
  fs::create_directories(root_ / "shipped" / "views");
  fs::create_directories(root_ / "teacher" / "views");
  write(root_ / "shipped" / "views" / "demo.md", "The shipped explanation.\n");
  const std::string id = view_text_id("demo");
  std::string message;
  LessonText text = load_lesson_text(id, sources_, &message);
  EXPECT_FALSE(text.overridden);
  ASSERT_EQ(text.blocks.size(), 1u);
  EXPECT_EQ(text.blocks[0].plain(), "The shipped explanation.");
  EXPECT_TRUE(message.empty()) << message;

  write(teacher("views/demo.md"), "Our *own* explanation.\n");
  text = load_lesson_text(id, sources_, &message);
  EXPECT_TRUE(text.overridden);
  EXPECT_EQ(text.source, teacher("views/demo.md").string());
  ASSERT_EQ(text.blocks.size(), 1u);
  EXPECT_EQ(text.blocks[0].plain(), "Our own explanation.");

  write(teacher("views/demo.md"), "Bad \xFF byte\n");
  text = load_lesson_text(id, sources_, &message);
  EXPECT_FALSE(text.overridden);
  EXPECT_EQ(text.blocks[0].plain(), "The shipped explanation.");
  EXPECT_NE(text.note.find("Your copy views/demo.md: not valid UTF-8"), std::string::npos)
      << text.note;
  EXPECT_NE(message.find("view demo shows the shipped text"), std::string::npos) << message;

  fs::remove(root_ / "shipped" / "views" / "demo.md");
  text = load_lesson_text(panel_text_id("demo"), sources_, &message);
  EXPECT_TRUE(text.blocks.empty());
  EXPECT_NE(message.find("panel demo has no teaching text"), std::string::npos) << message;
}

// With a named --lessons-dir, the lessons it has no copy of are listed on one line; the views'
// and panels' texts, which a teacher rarely copies, are not.
TEST_F(LessonTextLoad, TheMissingCopiesLineListsLessonsOnly) {
  write(root_ / "shipped" / "other.md", "Another lesson.\n");
  fs::create_directories(root_ / "shipped" / "views");
  write(root_ / "shipped" / "views" / "demo.md", "An explanation.\n");
  write(teacher("demo.md"), "Our words.\n");
  sources_.override_named = true;
  ::testing::internal::CaptureStderr();
  load_lesson_texts({"demo", "other", view_text_id("demo")}, sources_);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("has no other.md: those lessons show the shipped text"), std::string::npos)
      << err;
  EXPECT_EQ(err.find("views/demo.md"), std::string::npos) << err;
  EXPECT_TRUE(lesson_text("demo").overridden);
  EXPECT_EQ(lesson_text(view_text_id("demo")).blocks.at(0).plain(), "An explanation.");
  load_lesson_texts({}, LessonTextSources());  // the next test starts from the shipped texts
}

TEST(LessonTextDirs, TheDefaultOverrideFolderFollowsXdg) {
  const char* old_xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved = old_xdg ? old_xdg : "";
  ::setenv("XDG_DATA_HOME", "/data/home", 1);
  EXPECT_EQ(default_lessons_override_dir(), "/data/home/fusionlab/lessons");
  ::setenv("XDG_DATA_HOME", "relative/ignored", 1);  // the spec: relative paths are invalid
  const char* home = std::getenv("HOME");
  if (home && home[0] == '/') {
    EXPECT_EQ(default_lessons_override_dir(),
              std::string(home) + "/.local/share/fusionlab/lessons");
  }
  if (old_xdg) {
    ::setenv("XDG_DATA_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_DATA_HOME");
  }
}

// ---- the shipped files: one per lesson, each parses, and none is a stub
TEST(LessonTextShipped, EveryLessonHasItsText) {
  LessonTextSources shipped;
  shipped.shipped_dir = std::string(FUSIONLAB_SOURCE_DIR) + "/assets/lessons";
  ASSERT_FALSE(lessons().empty());
  for (const Lesson* lesson : lessons()) {
    const std::string& id = lesson->info().id;
    std::string message;
    const LessonText text = load_lesson_text(id, shipped, &message);
    EXPECT_TRUE(message.empty()) << id << ": " << message;
    EXPECT_TRUE(text.note.empty()) << id << ": " << text.note;
    size_t chars = 0;
    for (const TextBlock& block : text.blocks) chars += block.plain().size();
    EXPECT_GT(chars, 500u) << id;
    EXPECT_GE(text.blocks.size(), 3u) << id << ": paragraphs";
  }
}

// Every explanation the window shows (each view's, each panel's) is shipped, parses and says
// something; the views panel's tabs are the views the command line and scripts name, in order.
TEST(LessonTextShipped, EveryViewAndPanelHasItsExplanation) {
  LessonTextSources shipped;
  shipped.shipped_dir = std::string(FUSIONLAB_SOURCE_DIR) + "/assets/lessons";
  for (const std::string& view : view_names()) {
    const auto& ids = window_text_ids();
    EXPECT_NE(std::find(ids.begin(), ids.end(), view_text_id(view)), ids.end()) << view;
  }
  for (const std::string& id : window_text_ids()) {
    std::string message;
    const LessonText text = load_lesson_text(id, shipped, &message);
    EXPECT_TRUE(message.empty()) << id << ": " << message;
    EXPECT_TRUE(text.note.empty()) << id << ": " << text.note;
    ASSERT_FALSE(text.blocks.empty()) << id;
    size_t chars = 0;
    for (const TextBlock& block : text.blocks) chars += block.plain().size();
    EXPECT_GT(chars, 80u) << id;
  }
}

TEST(ViewsPanel, TheTabsAreTheViewNamesInOrder) {
  EXPECT_EQ(views_panel_tabs(), view_names());
}

}  // namespace
}  // namespace fl::gui
