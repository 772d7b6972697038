// What every libFuzzer target checks besides "no crash, no sanitizer report": a refusal is one
// line of text, and a property that fails stops the run like a crash, so libFuzzer keeps the
// input (crash-<sha1>) and its stack.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/status.h"

namespace fl::fuzz {

[[noreturn]] inline void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz property failed: %s: %s\n", what, detail.c_str());
  std::abort();
}

inline void expect(bool ok, const char* what, const std::string& detail = std::string()) {
  if (!ok) fail(what, detail);
}

// A refusal is one non-empty line of at most `max_chars` characters (messages shorten what
// they quote, so untrusted input cannot flood the terminal).
inline void expect_one_line(const Status& st, size_t max_chars = 2000) {
  if (st.ok()) return;
  const std::string& m = st.message();
  expect(!m.empty(), "a refusal says why");
  expect(m.find('\n') == std::string::npos, "a refusal is one line", m);
  expect(m.size() <= max_chars, "a refusal is short", std::to_string(m.size()) + " characters");
}

}  // namespace fl::fuzz
