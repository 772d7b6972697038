// libFuzzer target: the session loader, fl::session_from_json (model/session_json.h), the
// parser behind --replay, --compare, export-trace/export-csv and a script's `open`.
// Properties: never crashes; a refusal is one line; a session it accepts is written back by
// session_to_json into text that loads again and writes back identically (what the app saves
// from a loaded recording, it can load).
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/session_json.h"
#include "tests/fuzz/libfuzzer/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fl::Session session;
  const fl::Status st = fl::session_from_json(text, &session);
  fl::fuzz::expect_one_line(st);
  if (!st.ok()) return 0;
  const std::string written = fl::session_to_json(session);
  fl::Session again;
  const fl::Status reread = fl::session_from_json(written, &again);
  fl::fuzz::expect(reread.ok(), "a loaded session, written back, loads again", reread.message());
  fl::fuzz::expect(fl::session_to_json(again) == written, "writing back is stable");
  return 0;
}
