// Fuzz test of the script reader, fl::gui::load_script: the parser of `fusionlab --script FILE`
// (docs/SCRIPTING.md), which a learner or a lecturer writes by hand.
//
// Seeds: docs/examples/*.fls and tests/ui/scripts/*.fls. Mutants mix byte-level damage (bit
// flips, truncation, inserted NUL/CR/UTF-8 bytes) with edits by line and by word: lines deleted,
// repeated, swapped or made up, words replaced by tokens that probe each check (absurd sizes and
// levels, output names with folders and "..", recordings that are missing, truncated, folders or
// devices). Each mutant is written into a fresh temporary folder (the test's working directory
// is inside it too), and read with an --out-dir inside that folder.
//
// What the script reader promises, checked for every mutant: it returns a Status and never
// crashes or throws; a refusal is one line that starts with the script's file name; a script it
// accepts holds only known commands with plain output names inside --out-dir; and reading a
// script creates nothing but the --out-dir folder itself: nothing outside the temporary folder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "app/gui/script.h"
#include "tests/fuzz/fuzz_common.h"

namespace fl::gui {
namespace {

namespace fs = std::filesystem;
using fuzz::below;
using fuzz::chance;
using fuzz::pick;

// Mutants per seed in CI (FL_FUZZ_ITERATIONS overrides): 10 seeds x 150 = 1500 mutants, about
// 3 s under the sanitizers in a Release build on one core.
constexpr int kDefaultIterations = 150;

struct Seed {
  std::string name;
  std::string text;
};

std::vector<Seed> all_seeds() {
  std::vector<fs::path> files;
  for (const char* folder : {"docs/examples", "tests/ui/scripts"}) {
    for (const auto& entry : fs::directory_iterator(fs::path(FUSIONLAB_SOURCE_DIR) / folder)) {
      if (entry.path().extension() == ".fls") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Seed> seeds;
  for (const fs::path& file : files) {
    seeds.push_back({file.parent_path().filename().string() + "_" + file.stem().string(),
                     fuzz::read_file(file)});
  }
  return seeds;
}

// Every file and folder under `root`, relative, with sizes: what "nothing changed here" compares.
std::map<std::string, uintmax_t> listing(const fs::path& root, bool recursive) {
  std::map<std::string, uintmax_t> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  const auto add = [&](const fs::directory_entry& e) {
    std::error_code size_ec;
    const uintmax_t size = e.is_regular_file(size_ec) ? e.file_size(size_ec) : 0;
    out[fs::relative(e.path(), root, size_ec).string()] = size;
  };
  if (recursive) {
    for (const auto& e : fs::recursive_directory_iterator(root, ec)) add(e);
  } else {
    for (const auto& e : fs::directory_iterator(root, ec)) add(e);
  }
  return out;
}

// The scratch folder of the whole test: <work dir>/run-XXXXXX holding
//   scripts/   the mutant being read
//   data/      recordings a mutant may open: good, truncated, not JSON, an empty folder
//   cwd/       the working directory while scripts are read (relative paths land here)
//   out...     the --out-dir (made by load_script, removed after each mutant)
class Sandbox {
 public:
  Sandbox() {
    std::string templ = (fs::path(FUSIONLAB_FUZZ_WORK_DIR) / "run-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) return;
    root_ = templ;
    fs::create_directories(root_ / "scripts");
    fs::create_directories(root_ / "cwd");
    fs::create_directories(root_ / "data" / "empty_folder");
    // A small good recording (two measurements of the shipped one) and broken ones.
    const std::string shipped =
        fuzz::read_file(fs::path(FUSIONLAB_SHIPPED_RECORDING) / "elementwise_fp32_cold.json");
    nlohmann::json good = nlohmann::json::parse(shipped, nullptr, false);
    if (good.is_object() && good["measurements"].is_array() && good["measurements"].size() > 2) {
      good["measurements"].erase(good["measurements"].begin() + 2, good["measurements"].end());
    }
    fuzz::write_file(root_ / "data" / "good.json", good.dump(1));
    fuzz::write_file(root_ / "data" / "truncated.json", good.dump(1).substr(0, 700));
    fuzz::write_file(root_ / "data" / "not_json.json", "lesson gelu_scale\n");
    fuzz::write_file(root_ / "data" / "no_measurements.json", [&] {
      nlohmann::json j = good;
      j["measurements"] = nlohmann::json::array();
      return j.dump();
    }());
    data_listing_ = listing(root_ / "data", true);
  }
  ~Sandbox() {
    std::error_code ec;
    if (!root_.empty() && !keep_) fs::remove_all(root_, ec);
  }
  bool ok() const { return !root_.empty(); }
  const fs::path& root() const { return root_; }
  void keep() { keep_ = true; }
  const std::map<std::string, uintmax_t>& data_listing() const { return data_listing_; }

 private:
  fs::path root_;
  bool keep_ = false;
  std::map<std::string, uintmax_t> data_listing_;
};

// ---- mutations ------------------------------------------------------------------------------

// Words that probe each check of the reader; `data` is the sandbox's recordings folder.
std::vector<std::string> tokens(const fs::path& data) {
  const std::string d = data.string();
  return {// verbs, right and wrong
          "lesson", "size", "level", "precision", "cache", "view", "sweep", "cancel-sweep", "wait",
          "caption", "screenshot", "open", "compare", "export-trace", "export-csv", "save-session",
          "phases", "quit", "dance", "Lesson", "screenshot\tview",
          // values
          "gelu_scale", "residual_layernorm", "ffn", "no_such_lesson", "fp32", "bf16", "fp16",
          "cold", "warm", "on", "off", "top", "speedup", "bandwidth", "flow", "timeline", "memory",
          "roofline", "view", "0", "-1", "1", "7", "99999999999", "9223372036854775807",
          "18446744073709551616", "-9223372036854775809", "1K", "64M", "1G", "4611686018427387904",
          "999999999999999", "9999999999999999", "1000000000000000G", "16Q", "0x10", "1e309", "nan",
          "inf", "-inf", "3600", "3600.0000001", "0.999", "1e-320", "180",
          // output names
          "x.png", "x.json", "x.json.gz", "x.csv", "../x.png", "/tmp/x.png", "sub/x.png",
          "a..b.png", ".png", ".hidden.csv", "x.PNG", "x.png.", "x", std::string(300, 'n') + ".png",
          "\xC3\xA9.png", "x.png\r",
          // recordings
          d + "/good.json", d + "/truncated.json", d + "/not_json.json",
          d + "/no_measurements.json", d + "/empty_folder", d + "/missing.json",
          d + "/good.json," + d + "/good.json", d + "/good.json," + d + "/truncated.json",
          "../data/good.json", ",,,", ",", ".", "..", "/dev/null",
          "assets/recordings/" FUSIONLAB_SHIPPED_RECORDING_NAME "/softmax_fp32_cold.json",
          "assets/recordings", "bad_sessions/truncated.json",
          // syntax
          "#", "# comment", "", "\t", "\r", std::string(1, '\0'), "\xFF\xFE", "\xF0\x9F\x98\x80"};
}

// Lines split on '\n' (kept as they are, so a lone '\r' or NUL survives).
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (;;) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return lines;
    start = end + 1;
  }
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return out;
}

// Words split on spaces and tabs.
std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  for (char c : line) {
    if (c == ' ' || c == '\t') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? " " : "") + words[i];
  return out;
}

void mutate_lines(std::string* text, std::mt19937_64& rng,
                  const std::vector<std::string>& dictionary, std::string* log) {
  std::vector<std::string> lines = split_lines(*text);
  const size_t at = below(rng, lines.size());
  switch (below(rng, 6)) {
    case 0: {  // replace a word (the verb or an argument)
      std::vector<std::string> words = split_words(lines[at]);
      const std::string token = pick(rng, dictionary);
      if (words.empty()) {
        words.push_back(token);
      } else {
        words[below(rng, words.size())] = token;
      }
      lines[at] = join_words(words);
      *log += "word on line " + std::to_string(at + 1) + "; ";
      break;
    }
    case 1: {  // a made-up line: a verb and up to three tokens
      std::vector<std::string> words = {pick(rng, dictionary)};
      const size_t args = below(rng, 4);
      for (size_t k = 0; k < args; ++k) words.push_back(pick(rng, dictionary));
      lines.insert(lines.begin() + static_cast<long>(at), join_words(words));
      *log += "new line " + std::to_string(at + 1) + "; ";
      break;
    }
    case 2:
      *log += "delete line " + std::to_string(at + 1) + "; ";
      lines.erase(lines.begin() + static_cast<long>(at));
      break;
    case 3:
      *log += "repeat line " + std::to_string(at + 1) + "; ";
      lines.insert(lines.begin() + static_cast<long>(below(rng, lines.size() + 1)), lines[at]);
      break;
    case 4:
      *log += "swap lines; ";
      std::swap(lines[at], lines[below(rng, lines.size())]);
      break;
    default: {  // a very long line, or words added to one
      if (chance(rng, 30)) {
        lines[at] += " " + std::string(size_t(1) << (8 + below(rng, 10)), 'w');
        *log += "long line " + std::to_string(at + 1) + "; ";
      } else {
        lines[at] += " " + pick(rng, dictionary);
        *log += "extra word on line " + std::to_string(at + 1) + "; ";
      }
      break;
    }
  }
  *text = join_lines(lines);
}

std::string make_mutant(const Seed& seed, std::mt19937_64& rng,
                        const std::vector<std::string>& dictionary, std::string* log) {
  std::string text = seed.text;
  const size_t edits = 1 + below(rng, 4);
  for (size_t k = 0; k < edits; ++k) {
    if (chance(rng, 70)) {
      mutate_lines(&text, rng, dictionary, log);
    } else {
      fuzz::mutate_bytes(&text, rng, dictionary, log);
    }
  }
  return text;
}

// ---- what the reader promises ---------------------------------------------------------------

using Problems = std::vector<std::string>;

const std::map<std::string, std::vector<std::string>>& output_extensions() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"screenshot", {".png"}},
      {"export-trace", {".json", ".json.gz"}},
      {"export-csv", {".csv"}},
      {"save-session", {".json"}},
      {"svg", {".svg"}}};
  return table;
}

void check_accepted(const Script& script, const fs::path& out_dir, Problems* problems) {
  static const std::set<std::string> verbs = {
      "lesson",       "size",         "level",   "precision",   "cache", "view",    "sweep",
      "cancel-sweep", "wait",         "caption", "screenshot",  "open",  "compare", "export-trace",
      "export-csv",   "save-session", "quit",    "window-size", "key",   "svg",     "phases"};
  for (const ScriptCommand& c : script.commands) {
    const std::string where = "line " + std::to_string(c.line) + ": ";
    if (!verbs.count(c.verb)) {
      problems->push_back(where + "accepted an unknown command '" + c.verb + "'");
    }
    if (c.args.size() > 3) {
      problems->push_back(where + "accepted " + std::to_string(c.args.size()) + " words");
    }
    const auto out = output_extensions().find(c.verb);
    if (out != output_extensions().end()) {
      const fs::path target = (out_dir / c.arg).lexically_normal();
      if (!plain_output_name(c.arg, out->second) ||
          target.parent_path() != out_dir.lexically_normal()) {
        problems->push_back(where + "accepted an output outside --out-dir: '" + c.arg + "'");
      }
    }
    if ((c.verb == "open" || (c.verb == "compare" && c.arg != "off")) && c.paths.empty()) {
      problems->push_back(where + "accepted '" + c.verb + "' with no recording");
    }
  }
  if (script.out_dir != out_dir.string()) {
    problems->push_back("the script's out_dir is not the one given");
  }
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) problems->push_back("--out-dir was not made");
  if (!fs::is_empty(out_dir, ec)) problems->push_back("reading the script wrote into --out-dir");
}

Problems check_mutant(const fs::path& script_path, const fs::path& out_dir, bool* accepted) {
  Problems problems;
  *accepted = false;
  Script script;
  Status st;
  try {
    st = load_script(script_path.string(), out_dir.string(), &script);
  } catch (const std::exception& e) {
    problems.push_back(std::string("load_script threw: ") + e.what());
    return problems;
  } catch (...) {
    problems.push_back("load_script threw something");
    return problems;
  }
  if (!st.ok()) {
    const std::string& m = st.message();
    if (m.rfind(script_path.string() + ":", 0) != 0 ||
        m.size() <= script_path.string().size() + 2) {
      problems.push_back("the refusal does not start with the script's file name: '" + m + "'");
    }
    if (m.find('\n') != std::string::npos) {
      problems.push_back("the refusal is not one line: '" + m + "'");
    }
    return problems;
  }
  *accepted = true;
  check_accepted(script, out_dir, &problems);
  return problems;
}

// ---- the test -------------------------------------------------------------------------------

TEST(ScriptFuzz, MutantsAreRefusedWithOneLineNamingTheFileAndWriteNothingOutside) {
  const std::vector<Seed> seeds = all_seeds();
  ASSERT_GE(seeds.size(), 8u) << "the example scripts were not found under " FUSIONLAB_SOURCE_DIR;
  Sandbox sandbox;
  ASSERT_TRUE(sandbox.ok()) << "cannot make a folder under " FUSIONLAB_FUZZ_WORK_DIR;
  const fs::path root = sandbox.root();
  const std::vector<std::string> dictionary = tokens(root / "data");
  const int iterations = fuzz::iterations_per_seed(kDefaultIterations);

  // What must not change: the folder holding the sandbox (the test's working directory), and the
  // source folders the seeds and recordings come from.
  fuzz::install_crash_reporting();  // makes <work dir>/failures before the snapshot
  const fs::path started_in = fs::current_path();
  const fs::path beside = root.parent_path();
  auto beside_before = listing(beside, false);
  const std::vector<fs::path> sources = {fs::path(FUSIONLAB_SOURCE_DIR) / "docs/examples",
                                         fs::path(FUSIONLAB_SOURCE_DIR) / "tests/ui/scripts",
                                         fs::path(FUSIONLAB_SOURCE_DIR) / "assets"};
  std::vector<std::map<std::string, uintmax_t>> sources_before;
  for (const fs::path& s : sources) sources_before.push_back(listing(s, true));
  const std::set<std::string> sandbox_entries = {"scripts", "data", "cwd"};
  const fs::path script_path = root / "scripts" / "mutant.fls";

  fs::current_path(root / "cwd");
  int failures = 0, accepted_count = 0, refused_count = 0;
  for (const Seed& seed : seeds) {
    for (int iteration = 0; iteration < iterations && failures < 10; ++iteration) {
      if (!fuzz::selected(seed.name, iteration)) continue;
      std::mt19937_64 rng(fuzz::stream_seed(seed.name, iteration));
      std::string log;
      const std::string mutant = make_mutant(seed, rng, dictionary, &log);
      // --out-dir: a new folder, or one nested deeper, always inside the sandbox.
      const fs::path out_dir = root / (chance(rng, 70) ? "out" : "out/nested/deeper");
      const std::string file_name =
          "script-" + seed.name + "-" + std::to_string(iteration) + ".fls";
      fuzz::write_file(script_path, mutant);
      fuzz::arm("script_fuzz", seed.name, iteration, file_name, mutant);
      bool accepted = false;
      Problems problems = check_mutant(script_path, out_dir, &accepted);
      fuzz::disarm();
      (accepted ? accepted_count : refused_count) += 1;

      // Nothing but the --out-dir appeared: in the sandbox, in the working directory, beside.
      std::error_code ec;
      fs::remove_all(root / "out", ec);
      for (const auto& [name, size] : listing(root, false)) {
        if (!sandbox_entries.count(name)) {
          problems.push_back("reading the script created " + (root / name).string());
        }
      }
      if (!fs::is_empty(root / "cwd", ec)) {
        problems.push_back("reading the script created files in its working directory");
      }
      if (listing(root / "data", true) != sandbox.data_listing()) {
        problems.push_back("reading the script changed a recording");
      }
      if (listing(root / "scripts", false).size() != 1) {
        problems.push_back("reading the script created files beside it");
      }
      if (listing(beside, false) != beside_before) {
        problems.push_back("reading the script created files beside the sandbox");
      }
      if (fuzz::read_file(script_path) != mutant) {
        problems.push_back("reading the script changed it");
      }

      if (problems.empty()) continue;
      ++failures;
      sandbox.keep();
      std::string all;
      for (const std::string& p : problems) all += "\n  - " + fuzz::excerpt(p, 400);
      ADD_FAILURE() << "seed " << seed.name << " iteration " << iteration
                    << " (rerun alone with FL_FUZZ_ONLY=" << seed.name << ":" << iteration
                    << ")\n  mutations: " << log << all << "\n  mutant saved to "
                    << fuzz::save_failure(file_name, mutant) << "\n  sandbox kept at "
                    << root.string() << "\n  mutant:\n"
                    << fuzz::excerpt(mutant, 2000);
      beside_before = listing(beside, false);  // the saved mutant is expected there
    }
  }
  fs::current_path(started_in);

  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ(listing(sources[i], true), sources_before[i])
        << "something was created or changed under " << sources[i].string();
  }
  std::printf("script fuzz: %zu seeds x %d iterations: %d mutants accepted, %d refused\n",
              seeds.size(), iterations, accepted_count, refused_count);
}

}  // namespace
}  // namespace fl::gui
