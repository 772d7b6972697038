// What the two fuzz tests share: the iteration count, deterministic random streams, byte-level
// mutations, and the reporting that makes a failure reproducible (the seed, the iteration, and
// the mutant saved under the build folder, also when the mutant crashes the process).
//
// Deterministic on purpose: the mutant of (seed name, iteration) is the same on every run and
// every machine (std::mt19937_64 and our own integer draws; std::uniform_int_distribution is not
// specified bit-exactly across standard libraries), so a CI failure is reproduced by running the
// same test, or with FL_FUZZ_ONLY=SEED:ITERATION under a debugger.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#if FUSIONLAB_FUZZ_SANITIZED && __has_include(<sanitizer/common_interface_defs.h>)
#include <sanitizer/common_interface_defs.h>
#define FUSIONLAB_FUZZ_DEATH_CALLBACK 1
#endif

namespace fl::fuzz {

namespace fs = std::filesystem;

// FL_FUZZ_ITERATIONS mutants per seed; `fallback` (sized for CI) when unset or not a number.
inline int iterations_per_seed(int fallback) {
  const char* text = std::getenv("FL_FUZZ_ITERATIONS");
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  return (*end == '\0' && n >= 0 && n <= 100000000) ? static_cast<int>(n) : fallback;
}

// FL_FUZZ_ONLY=SEED:ITERATION runs that one mutant (SEED as printed in a failure).
inline bool selected(const std::string& seed, int iteration) {
  const char* only = std::getenv("FL_FUZZ_ONLY");
  if (only == nullptr || *only == '\0') return true;
  return std::string(only) == seed + ":" + std::to_string(iteration);
}

// The random stream of one mutant: FNV-1a of the seed's name mixed with the iteration.
inline uint64_t stream_seed(const std::string& seed, int iteration) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : seed) h = (h ^ c) * 1099511628211ull;
  return h ^ (static_cast<uint64_t>(iteration) * 0x9E3779B97F4A7C15ull);
}

// Uniform in [0, n) (n > 0), the same on every standard library.
inline size_t below(std::mt19937_64& rng, size_t n) {
  return static_cast<size_t>(rng() % n);
}
inline bool chance(std::mt19937_64& rng, unsigned percent) {
  return rng() % 100 < percent;
}
template <typename T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& items) {
  return items[below(rng, items.size())];
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline bool write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

// One byte-level mutation of `text`, described in `log`: bit flips, a truncation, random bytes
// or a dictionary token inserted, a range deleted or repeated. `dictionary` holds tokens of the
// format (JSON punctuation, keywords, numbers) that random bytes would rarely produce.
inline void mutate_bytes(std::string* text, std::mt19937_64& rng,
                         const std::vector<std::string>& dictionary, std::string* log) {
  std::string& t = *text;
  const size_t n = t.size();
  switch (below(rng, 6)) {
    case 0: {  // flip a few bits
      if (n == 0) break;
      const size_t flips = 1 + below(rng, 4);
      for (size_t k = 0; k < flips; ++k) {
        const size_t at = below(rng, n);
        t[at] = static_cast<char>(t[at] ^ (1u << below(rng, 8)));
        *log += "flip@" + std::to_string(at) + " ";
      }
      break;
    }
    case 1: {  // truncate
      const size_t at = n == 0 ? 0 : below(rng, n);
      t.resize(at);
      *log += "truncate@" + std::to_string(at) + " ";
      break;
    }
    case 2: {  // insert random bytes
      const size_t at = below(rng, n + 1);
      std::string bytes(1 + below(rng, 8), '\0');
      for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
      t.insert(at, bytes);
      *log += "insert " + std::to_string(bytes.size()) + " bytes@" + std::to_string(at) + " ";
      break;
    }
    case 3: {  // insert a dictionary token
      const size_t at = below(rng, n + 1);
      const std::string& token = pick(rng, dictionary);
      t.insert(at, token);
      *log += "insert token@" + std::to_string(at) + " ";
      break;
    }
    case 4: {  // delete a range
      if (n == 0) break;
      const size_t at = below(rng, n);
      const size_t len = 1 + below(rng, std::min<size_t>(n - at, 64));
      t.erase(at, len);
      *log += "delete " + std::to_string(len) + "@" + std::to_string(at) + " ";
      break;
    }
    default: {  // repeat a range
      if (n == 0) break;
      const size_t at = below(rng, n);
      const size_t len = 1 + below(rng, std::min<size_t>(n - at, 256));
      const size_t to = below(rng, n + 1);
      t.insert(to, t.substr(at, len));
      *log += "repeat " + std::to_string(len) + "@" + std::to_string(at) + "->" +
              std::to_string(to) + " ";
      break;
    }
  }
}

// Saves a mutant that failed under `<work dir>/failures/NAME` and returns the path.
inline std::string save_failure(const std::string& name, const std::string& mutant) {
  const fs::path folder = fs::path(FUSIONLAB_FUZZ_WORK_DIR) / "failures";
  std::error_code ec;
  fs::create_directories(folder, ec);
  const fs::path path = folder / name;
  return write_file(path, mutant) ? path.string() : "(could not save " + path.string() + ")";
}

// The start of a mutant for a failure message: whole when short, else its first bytes, with
// control bytes escaped so the log stays readable.
inline std::string excerpt(const std::string& text, size_t limit = 600) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || (c >= 0x20 && c < 0x7F)) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  if (text.size() > limit) out += "... (" + std::to_string(text.size()) + " bytes in all)";
  return out;
}

// ---- the mutant in flight, for crashes ------------------------------------------------------
// A sanitizer report or a signal ends the process before gtest can say which mutant did it, so
// the one being checked is kept here and written out, with a line naming its seed and
// iteration, by AddressSanitizer's death callback or a signal handler (install_crash_reporting).

struct InFlight {
  char note[768] = {0};  // "fuzz: crashed on seed X iteration Y; mutant saved to P\n"
  char path[512] = {0};
  const char* data = nullptr;
  size_t size = 0;
};
inline InFlight g_in_flight;

inline void dump_in_flight() {
  if (g_in_flight.data == nullptr) return;
  // Only async-signal-safe calls: this may run inside a signal handler.
  const int fd = ::open(g_in_flight.path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    size_t done = 0;
    while (done < g_in_flight.size) {
      const ssize_t n = ::write(fd, g_in_flight.data + done, g_in_flight.size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  const ssize_t ignored = ::write(2, g_in_flight.note, std::strlen(g_in_flight.note));
  (void)ignored;
}

extern "C" inline void fl_fuzz_signal_handler(int sig) {
  dump_in_flight();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

inline void install_crash_reporting() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  std::error_code ec;
  fs::create_directories(fs::path(FUSIONLAB_FUZZ_WORK_DIR) / "failures", ec);
#if FUSIONLAB_FUZZ_DEATH_CALLBACK
  // AddressSanitizer ends in the death callback. UndefinedBehaviorSanitizer does not reach it
  // beside AddressSanitizer, so it aborts instead (abort_on_error, sanitizer_options.cpp), as a
  // failed assert in a library does: SIGABRT is ours, SIGSEGV and friends the sanitizers'.
  __sanitizer_set_death_callback(+[] { dump_in_flight(); });
  std::signal(SIGABRT, fl_fuzz_signal_handler);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    std::signal(sig, fl_fuzz_signal_handler);
  }
#endif
}

// Marks `mutant` (which must outlive the check) as the one in flight.
inline void arm(const std::string& test, const std::string& seed, int iteration,
                const std::string& file_name, const std::string& mutant) {
  install_crash_reporting();
  const std::string path = (fs::path(FUSIONLAB_FUZZ_WORK_DIR) / "failures" / file_name).string();
  std::snprintf(g_in_flight.path, sizeof(g_in_flight.path), "%s", path.c_str());
  std::snprintf(g_in_flight.note, sizeof(g_in_flight.note),
                "\n%s: the process died on seed %s iteration %d; the mutant is saved in %s "
                "(rerun with FL_FUZZ_ONLY=%s:%d)\n",
                test.c_str(), seed.c_str(), iteration, g_in_flight.path, seed.c_str(), iteration);
  g_in_flight.data = mutant.data();
  g_in_flight.size = mutant.size();
}
inline void disarm() {
  g_in_flight.data = nullptr;
}

}  // namespace fl::fuzz
