// libFuzzer target: the script reader, fl::gui::script_from_text (app/gui/script.h), the checks
// behind `fusionlab --script FILE` on the text of a script.
//
// It runs in a fresh temporary folder (made once, removed at exit) that holds recording.json, a
// small recording (FUSIONLAB_FUZZ_RECORDING, a seed of the session corpus), so the seeds' `open
// recording.json` and `compare recording.json` load a real recording; --out-dir is "out" inside.
// Properties: never crashes; a refusal is one line that starts with the script's name; an
// accepted script holds only known verbs and writes only plain names; reading a script creates
// nothing but the --out-dir folder.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <system_error>

#include "app/gui/script.h"
#include "tests/fuzz/libfuzzer/fuzz_check.h"

namespace {

namespace fs = std::filesystem;

const std::set<std::string> kOutputVerbs = {"screenshot", "export-trace", "export-csv", "svg",
                                            "save-session"};
const std::set<std::string> kVerbs = {
    "lesson", "size",         "level",      "precision",    "cache",       "view",        "sweep",
    "wait",   "open",         "compare",    "quit",         "window-size", "key",         "caption",
    "svg",    "cancel-sweep", "screenshot", "export-trace", "export-csv",  "save-session"};

fs::path work_dir;

void remove_work_dir() {
  std::error_code ec;
  if (!work_dir.empty()) fs::remove_all(work_dir, ec);
}

// What the folder holds besides out/: recording.json only.
size_t entries_in_work_dir() {
  std::error_code ec;
  size_t n = 0;
  for (auto it = fs::directory_iterator(work_dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string dir = (fs::temp_directory_path() / "fusionlab-fuzz-script-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) fl::fuzz::fail("cannot make a temporary folder", dir);
  work_dir = dir;
  std::atexit(remove_work_dir);
  fs::copy_file(FUSIONLAB_FUZZ_RECORDING, work_dir / "recording.json");
  fs::current_path(work_dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fl::gui::Script script;
  const fl::Status st = fl::gui::script_from_text(text, "fuzz.fls", "out", &script);
  fl::fuzz::expect_one_line(st, 4000);
  if (!st.ok()) {
    fl::fuzz::expect(st.message().rfind("fuzz.fls:", 0) == 0, "a refusal names the script",
                     st.message());
  }
  for (const fl::gui::ScriptCommand& c : script.commands) {
    fl::fuzz::expect(kVerbs.count(c.verb) == 1, "only known verbs", c.verb);
    if (kOutputVerbs.count(c.verb)) {
      fl::fuzz::expect(
          c.arg.find('/') == std::string::npos && c.arg.find("..") == std::string::npos,
          "outputs are plain names", c.arg);
    }
  }
  // recording.json and out/ (made by the reader): nothing else may appear.
  fl::fuzz::expect(entries_in_work_dir() <= 2, "reading a script creates only --out-dir");
  return 0;
}
