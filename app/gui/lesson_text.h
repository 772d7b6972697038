// A lesson's teaching text (docs/ARCHITECTURE.md "Teaching text"): shipped as
// assets/lessons/<id>.md, overridable by a teacher's own copy, parsed here into blocks of spans
// and wrapped into lines for the lesson panel (app/gui/panel_lesson.cpp draws them). The window's
// other explanations (each view's and each panel's, shown by their "(?)" markers) are texts of the
// same kind under the same folders: views/<view>.md and panels/<panel>.md, with the same override
// and fallback rules (their ids are "views/flow", "panels/gpu", ...).
//
// The format is a small subset of Markdown, written for people who never heard of it:
//   - paragraphs are separated by blank lines; the lines of one paragraph are joined with spaces;
//   - a line starting with "# " is a heading, "## " a smaller one (each is a block of its own);
//   - *words between single stars* are emphasis. A star is only markup where it touches a word on
//     the inside and a space or punctuation on the outside, so formulas such as "s * x" or
//     "a*b" stay as written; "\*" is a literal star;
//   - everything else (formulas, numbers, units) is plain text, shown as written.
// A file that is not valid UTF-8, holds a NUL byte, or has no text is refused ("broken").
//
// Nothing here needs ImGui: the parser, the wrapping and the loader are plain C++ and tested on
// the CPU (tests/ui/lesson_text_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/status.h"

namespace fl::gui {

enum class BlockKind { heading1, heading2, paragraph };

struct TextSpan {
  std::string text;
  bool emphasis = false;
  bool operator==(const TextSpan& o) const { return text == o.text && emphasis == o.emphasis; }
};

struct TextBlock {
  BlockKind kind = BlockKind::paragraph;
  std::vector<TextSpan> spans;  // adjacent spans differ in emphasis; whitespace collapsed
  std::string plain() const;    // the spans' text run together
};

// Parses `text` (see the top of this file). Errors, one line each: "not valid UTF-8 (byte N)",
// "a NUL byte at byte N", "no text (the file is empty or blank)".
Status parse_lesson_text(const std::string& text, std::vector<TextBlock>* out);

// Byte offset of the first byte that is not part of a valid UTF-8 sequence (overlong forms,
// surrogates and code points past U+10FFFF are invalid), or -1 when all of `text` is valid.
int64_t first_invalid_utf8(const std::string& text);

// ---- wrapping ----------------------------------------------------------------------------------

// One piece of a laid-out line: `text` starts `x` pixels from the line's left edge.
struct LineRun {
  std::string text;
  bool emphasis = false;
  float x = 0;
  float width = 0;
};
struct TextLine {
  BlockKind kind = BlockKind::paragraph;
  std::vector<LineRun> runs;
  bool first_of_block = false;  // the panel leaves a gap above it
  std::string plain() const;
};

// The width of `text` in pixels as it would be drawn for a block of `kind` (headings use a larger
// font) and emphasis.
using MeasureText = std::function<float(const std::string& text, BlockKind kind, bool emphasis)>;

// Lays out `blocks` greedily into lines at most `width` pixels wide: words move to the next line
// when they do not fit; a single word wider than the line is broken between characters (never
// inside a UTF-8 sequence). Spaces at a line's end are dropped.
std::vector<TextLine> wrap_text(const std::vector<TextBlock>& blocks, float width,
                                const MeasureText& measure);

// ---- loading -----------------------------------------------------------------------------------

// The largest lesson text read (a teacher's copy or the shipped one).
constexpr int64_t kMaxLessonTextBytes = int64_t(256) << 10;

struct LessonText {
  std::vector<TextBlock> blocks;
  std::string source;       // the file shown; empty when none could be read
  bool overridden = false;  // a teacher's copy is shown
  // For the panel: why the teacher's copy (or the shipped file) is not shown. Empty when all is
  // well.
  std::string note;
};

struct LessonTextSources {
  std::string shipped_dir;   // <assets>/lessons
  std::string override_dir;  // a teacher's folder; empty: none
  // Whether override_dir was named on the command line (--lessons-dir): then a folder that does
  // not exist is reported, and so are the lessons it has no file for.
  bool override_named = false;
};

// The text of lesson `id`: the teacher's <override_dir>/<id>.md when it exists and is usable,
// else the shipped <shipped_dir>/<id>.md. A teacher's copy that exists but cannot be used (not a
// regular file, unreadable, over kMaxLessonTextBytes, broken) falls back to the shipped text with
// a `note`, and `message` (when given) receives the one line for stderr.
LessonText load_lesson_text(const std::string& id, const LessonTextSources& sources,
                            std::string* message = nullptr);

// Where a teacher's copies live when no --lessons-dir is given: $XDG_DATA_HOME/fusionlab/lessons,
// or ~/.local/share/fusionlab/lessons when XDG_DATA_HOME is unset or not absolute. Empty when
// neither is known.
std::string default_lessons_override_dir();

// ---- the window's texts ------------------------------------------------------------------------

// The ids of the views' and panels' explanations (the lessons' ids are the lessons' own).
inline std::string view_text_id(const std::string& view) {
  return "views/" + view;
}
inline std::string panel_text_id(const std::string& panel) {
  return "panels/" + panel;
}
// Every view's (app/measure/choices.h's view_names()) and panel's explanation the window shows.
const std::vector<std::string>& window_text_ids();

// Loads every text in `ids` once (the window calls this at start with the lessons' ids and
// window_text_ids()), printing one line on stderr per problem (and, with a named --lessons-dir,
// one line listing the lessons it has no file for: a teacher rarely copies a view's text).
void load_lesson_texts(const std::vector<std::string>& ids, const LessonTextSources& sources);
// The text of `id` as loaded; a lesson never loaded (a test harness that skipped
// load_lesson_texts) is loaded from the shipped assets on first use.
const LessonText& lesson_text(const std::string& id);

}  // namespace fl::gui
