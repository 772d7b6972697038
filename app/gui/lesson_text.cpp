#include "app/gui/lesson_text.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>
#include <utility>

#include "app/gui/backend_choice.h"
#include "app/measure/choices.h"
#include "model/file_io.h"

namespace fl::gui {
namespace {

namespace fs = std::filesystem;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

// Punctuation that may sit outside an emphasis star: before the opening one, after the closing
// one. Bytes of multi-byte UTF-8 characters count too (quotes, dashes and letters of other
// scripts), so "*word*’s" and "„*wort*“" work.
bool opens_after(char c) {
  return is_space(c) || c == '(' || c == '[' || c == '{' || c == '"' || c == '\'' || c == '/' ||
         c == '-' || static_cast<unsigned char>(c) >= 0x80;
}
bool closes_before(char c) {
  return is_space(c) || c == '.' || c == ',' || c == ';' || c == ':' || c == '!' || c == '?' ||
         c == ')' || c == ']' || c == '}' || c == '(' || c == '[' || c == '"' || c == '\'' ||
         c == '/' || c == '-' || static_cast<unsigned char>(c) >= 0x80;
}

// One character of a paragraph after escapes are resolved: a star that came from "\*" is
// `literal` and never markup.
struct Char {
  char c;
  bool literal;
};

std::vector<Char> unescape(const std::string& text) {
  std::vector<Char> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '*') {
      out.push_back({'*', true});
      ++i;
    } else {
      out.push_back({text[i], false});
    }
  }
  return out;
}

bool markup_star(const std::vector<Char>& s, size_t i) {
  return s[i].c == '*' && !s[i].literal;
}

// The closing star of an emphasis opened at `open`, or 0 when there is none.
size_t closing_star(const std::vector<Char>& s, size_t open) {
  const bool can_open = open + 1 < s.size() && !is_space(s[open + 1].c) &&
                        !markup_star(s, open + 1) && (open == 0 || opens_after(s[open - 1].c));
  if (!can_open) return 0;
  for (size_t j = open + 2; j < s.size(); ++j) {
    if (!markup_star(s, j)) continue;
    if (!is_space(s[j - 1].c) && (j + 1 == s.size() || closes_before(s[j + 1].c))) return j;
  }
  return 0;
}

void append_span(std::vector<TextSpan>* spans, const std::string& text, bool emphasis) {
  if (text.empty()) return;
  if (!spans->empty() && spans->back().emphasis == emphasis) {
    spans->back().text += text;
  } else {
    spans->push_back({text, emphasis});
  }
}

// Collapses runs of whitespace to one space (across spans) and trims both ends; drops spans left
// empty. The space stays in the span where its run began: "*x* and" keeps " and" plain,
// "the *fused*" keeps "the " plain.
std::vector<TextSpan> collapse_spaces(const std::vector<TextSpan>& spans) {
  std::vector<TextSpan> out;
  bool pending_space = false;
  size_t pending_from = 0;  // the input span where the pending space began
  for (size_t k = 0; k < spans.size(); ++k) {
    std::string text;
    for (char c : spans[k].text) {
      if (is_space(c) || c == '\n') {
        if (!pending_space && !(out.empty() && text.empty())) {
          pending_space = true;
          pending_from = k;
        }
        continue;
      }
      if (pending_space) {
        if (pending_from == k || out.empty()) {
          text += ' ';
        } else {
          out.back().text += ' ';
        }
        pending_space = false;
      }
      text += c;
    }
    if (!text.empty()) {
      if (!out.empty() && out.back().emphasis == spans[k].emphasis) {
        out.back().text += text;
      } else {
        out.push_back({text, spans[k].emphasis});
      }
    }
  }
  return out;
}

std::vector<TextSpan> parse_inline(const std::string& text) {
  const std::vector<Char> s = unescape(text);
  std::vector<TextSpan> spans;
  std::string plain;
  for (size_t i = 0; i < s.size(); ++i) {
    if (markup_star(s, i)) {
      if (const size_t close = closing_star(s, i); close != 0) {
        append_span(&spans, plain, false);
        plain.clear();
        std::string emphasized;
        for (size_t k = i + 1; k < close; ++k) emphasized += s[k].c;
        append_span(&spans, emphasized, true);
        i = close;
        continue;
      }
    }
    plain += s[i].c;
  }
  append_span(&spans, plain, false);
  return collapse_spaces(spans);
}

std::string trim(const std::string& text) {
  size_t a = 0, b = text.size();
  while (a < b && is_space(text[a])) ++a;
  while (b > a && is_space(text[b - 1])) --b;
  return text.substr(a, b - a);
}

// The length of the UTF-8 sequence starting at `text[i]` (1 for a byte that starts none: the
// text was validated, so that does not happen in practice).
size_t utf8_length(const std::string& text, size_t i) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  return std::min(n, text.size() - i);
}

}  // namespace

std::string TextBlock::plain() const {
  std::string out;
  for (const TextSpan& span : spans) out += span.text;
  return out;
}

std::string TextLine::plain() const {
  std::string out;
  float end = 0;
  for (const LineRun& run : runs) {
    if (!out.empty() && run.x > end + 0.01f) out += ' ';
    out += run.text;
    end = run.x + run.width;
  }
  return out;
}

int64_t first_invalid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return static_cast<int64_t>(i);  // a continuation byte, 0xC0/0xC1 or 0xF5..0xFF
    }
    if (i + len > n) return static_cast<int64_t>(i);
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return static_cast<int64_t>(i);
    }
    i += len;
  }
  return -1;
}

Status parse_lesson_text(const std::string& input, std::vector<TextBlock>* out) {
  out->clear();
  if (const int64_t bad = first_invalid_utf8(input); bad >= 0) {
    return Status::Error("not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  if (const size_t nul = input.find('\0'); nul != std::string::npos) {
    return Status::Error("a NUL byte at byte " + std::to_string(nul));
  }
  std::string text = input;
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // a byte-order mark

  std::string paragraph;
  auto end_paragraph = [&] {
    if (!trim(paragraph).empty()) {
      TextBlock block;
      block.spans = parse_inline(paragraph);
      if (!block.spans.empty()) out->push_back(std::move(block));
    }
    paragraph.clear();
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = trim(text.substr(start, end - start));
    start = end + 1;
    if (line.empty()) {
      end_paragraph();
      continue;
    }
    size_t hashes = 0;
    while (hashes < line.size() && line[hashes] == '#') ++hashes;
    if (hashes > 0 && (hashes == line.size() || is_space(line[hashes]))) {
      end_paragraph();
      TextBlock block;
      block.kind = hashes == 1 ? BlockKind::heading1 : BlockKind::heading2;
      block.spans = parse_inline(line.substr(hashes));
      if (!block.spans.empty()) out->push_back(std::move(block));
      continue;
    }
    paragraph += (paragraph.empty() ? "" : " ") + line;
  }
  end_paragraph();
  if (out->empty()) return Status::Error("no text (the file is empty or blank)");
  return Status::Ok();
}

// ---- wrapping ----------------------------------------------------------------------------------

namespace {

// A word as the layout sees it: pieces of one or both emphases with no space between them
// ("*GELU*(x)"), and whether a space comes before it.
struct Word {
  std::vector<TextSpan> pieces;
  bool space_before = false;
};

std::vector<Word> words_of(const TextBlock& block) {
  std::vector<Word> words;
  bool pending_space = false;
  bool in_word = false;
  for (const TextSpan& span : block.spans) {
    for (char c : span.text) {
      if (c == ' ') {
        pending_space = true;
        in_word = false;
        continue;
      }
      if (!in_word) {
        words.push_back({{}, pending_space && !words.empty()});
        pending_space = false;
        in_word = true;
      }
      std::vector<TextSpan>& pieces = words.back().pieces;
      if (pieces.empty() || pieces.back().emphasis != span.emphasis) {
        pieces.push_back({"", span.emphasis});
      }
      pieces.back().text += c;
    }
  }
  return words;
}

class LineBuilder {
 public:
  LineBuilder(BlockKind kind, float width, const MeasureText& measure, std::vector<TextLine>* out)
      : kind_(kind), width_(width), measure_(measure), out_(out) {
    new_line();
    out_->back().first_of_block = true;
  }

  void add(const Word& word) {
    float word_w = 0;
    for (const TextSpan& piece : word.pieces) word_w += measure_(piece.text, kind_, piece.emphasis);
    const float space_w =
        word.space_before && !line().runs.empty() ? measure_(" ", kind_, false) : 0;
    if (!line().runs.empty() && x_ + space_w + word_w > width_) {
      new_line();
      add(Word{word.pieces, false});
      return;
    }
    if (line().runs.empty() && word_w > width_) {
      add_broken(word);
      return;
    }
    x_ += space_w;
    bool first = true;
    for (const TextSpan& piece : word.pieces) {
      place(piece.text, piece.emphasis, first && space_w > 0);
      first = false;
    }
  }

 private:
  TextLine& line() { return out_->back(); }
  void new_line() {
    out_->push_back(TextLine{kind_, {}, false});
    x_ = 0;
  }
  // Appends `text` at x_, joining the last run when it has the same emphasis.
  void place(const std::string& text, bool emphasis, bool after_space) {
    const float w = measure_(text, kind_, emphasis);
    std::vector<LineRun>& runs = line().runs;
    if (!runs.empty() && runs.back().emphasis == emphasis) {
      LineRun& run = runs.back();
      run.text += (after_space ? " " : "") + text;
      run.width = x_ + w - run.x;
    } else {
      runs.push_back({text, emphasis, x_, w});
    }
    x_ += w;
  }
  // A word wider than a whole line: as many characters per line as fit (at least one).
  void add_broken(const Word& word) {
    for (const TextSpan& piece : word.pieces) {
      size_t i = 0;
      while (i < piece.text.size()) {
        const size_t len = utf8_length(piece.text, i);
        const std::string ch = piece.text.substr(i, len);
        const float w = measure_(ch, kind_, piece.emphasis);
        if (!line().runs.empty() && x_ + w > width_) new_line();
        place(ch, piece.emphasis, false);
        i += len;
      }
    }
  }

  BlockKind kind_;
  float width_;
  const MeasureText& measure_;
  std::vector<TextLine>* out_;
  float x_ = 0;
};

}  // namespace

std::vector<TextLine> wrap_text(const std::vector<TextBlock>& blocks, float width,
                                const MeasureText& measure) {
  std::vector<TextLine> lines;
  for (const TextBlock& block : blocks) {
    const std::vector<Word> words = words_of(block);
    if (words.empty()) continue;
    LineBuilder builder(block.kind, width, measure, &lines);
    for (const Word& word : words) builder.add(word);
  }
  return lines;
}

// ---- loading -----------------------------------------------------------------------------------

namespace {

// Reads and parses `path`; the error names the file.
Status read_lesson_file(const std::string& path, std::vector<TextBlock>* blocks) {
  std::string text;
  FL_TRY(read_file_checked(path, kMaxLessonTextBytes, "lesson text", &text));
  if (Status st = parse_lesson_text(text, blocks); !st.ok()) {
    return Status::Error(shorten_for_message(path, kShownPathChars) + ": " + st.message());
  }
  return Status::Ok();
}

}  // namespace

namespace {

// How the messages name the text `id`: "lesson gelu_scale", "view flow", "panel gpu".
std::string text_name(const std::string& id) {
  for (const char* folder : {"views/", "panels/"}) {
    const std::string prefix = folder;
    if (id.compare(0, prefix.size(), prefix) == 0) {
      return prefix.substr(0, prefix.size() - 2) + " " + id.substr(prefix.size());
    }
  }
  return "lesson " + id;
}

}  // namespace

const std::vector<std::string>& window_text_ids() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> out;
    for (const std::string& view : view_names()) out.push_back(view_text_id(view));
    for (const char* panel : {"lessons", "gpu", "gpu-recorded", "controls", "controls-recorded",
                              "measurement", "precision", "cache", "sweep", "sweep-recorded"}) {
      out.push_back(panel_text_id(panel));
    }
    return out;
  }();
  return ids;
}

LessonText load_lesson_text(const std::string& id, const LessonTextSources& sources,
                            std::string* message) {
  LessonText out;
  std::string problem;        // with the teacher's copy, for stderr
  std::string short_problem;  // the same for the panel
  if (!sources.override_dir.empty()) {
    const std::string path = (fs::path(sources.override_dir) / (id + ".md")).string();
    std::error_code ec;
    const fs::file_status link = fs::symlink_status(path, ec);
    if (fs::exists(link)) {  // no file at all is normal: the teacher did not override this one
      const Status st = read_lesson_file(path, &out.blocks);
      if (st.ok()) {
        out.source = path;
        out.overridden = true;
        return out;
      }
      problem = st.message();
      // The panel's note names the file only (the stderr line has the whole path).
      const std::string prefix = shorten_for_message(path, kShownPathChars) + ": ";
      short_problem =
          id + ".md: " +
          (problem.compare(0, prefix.size(), prefix) == 0 ? problem.substr(prefix.size())
                                                          : problem);
      out.blocks.clear();
    }
  }
  const std::string shipped = (fs::path(sources.shipped_dir) / (id + ".md")).string();
  const Status st = sources.shipped_dir.empty() ? Status::Error("no assets folder was found")
                                                : read_lesson_file(shipped, &out.blocks);
  std::string line;  // for stderr
  if (st.ok()) {
    out.source = shipped;
    if (!problem.empty()) {
      out.note = "Your copy " + short_problem + "; showing the shipped text.";
      line = problem + "; " + text_name(id) + " shows the shipped text";
    }
  } else {
    out.blocks.clear();
    if (!problem.empty()) {
      out.note = "Your copy " + short_problem + ". ";
      line = problem + "; and ";
    }
    out.note += "The shipped text could not be read (" + st.message() + ").";
    line += text_name(id) + " has no teaching text: " + st.message();
  }
  if (message) *message = line;
  return out;
}

std::string default_lessons_override_dir() {
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg && xdg[0] == '/') return (fs::path(xdg) / "fusionlab" / "lessons").string();
  const char* home = std::getenv("HOME");
  if (home && home[0] == '/') {
    return (fs::path(home) / ".local" / "share" / "fusionlab" / "lessons").string();
  }
  return "";
}

namespace {

struct Loaded {
  std::mutex mutex;
  std::map<std::string, LessonText> texts;
};
Loaded& loaded() {
  static Loaded l;
  return l;
}

}  // namespace

void load_lesson_texts(const std::vector<std::string>& ids, const LessonTextSources& sources) {
  std::map<std::string, LessonText> texts;
  std::string missing;  // lessons a named --lessons-dir has no file for
  std::error_code ec;
  const bool dir_ok = sources.override_dir.empty() || fs::is_directory(sources.override_dir, ec);
  if (sources.override_named && !dir_ok) {
    std::fprintf(stderr,
                 "fusionlab: --lessons-dir %s: not a folder; the lessons show the shipped text\n",
                 shorten_for_message(sources.override_dir, kShownPathChars).c_str());
  }
  for (const std::string& id : ids) {
    std::string message;
    texts[id] = load_lesson_text(id, sources, &message);
    if (!message.empty()) std::fprintf(stderr, "fusionlab: %s\n", message.c_str());
    // A teacher's folder that holds no copy of a view's or panel's text is the usual case.
    const bool lesson = id.find('/') == std::string::npos;
    if (lesson && sources.override_named && dir_ok && !texts[id].overridden &&
        texts[id].note.empty()) {
      missing += (missing.empty() ? "" : ", ") + id + ".md";
    }
  }
  if (!missing.empty()) {
    std::fprintf(
        stderr, "fusionlab: --lessons-dir %s has no %s: those lessons show the shipped text\n",
        shorten_for_message(sources.override_dir, kShownPathChars).c_str(), missing.c_str());
  }
  std::lock_guard<std::mutex> lock(loaded().mutex);
  loaded().texts = std::move(texts);
}

const LessonText& lesson_text(const std::string& id) {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mutex);
  auto it = l.texts.find(id);
  if (it == l.texts.end()) {
    LessonTextSources shipped;
    const std::string assets = find_assets_folder();
    if (!assets.empty()) shipped.shipped_dir = (fs::path(assets) / "lessons").string();
    it = l.texts.emplace(id, load_lesson_text(id, shipped)).first;
  }
  return it->second;  // std::map: references stay valid until load_lesson_texts runs again
}

}  // namespace fl::gui
