// The process whose memory tests/memory/session_memory_test.cpp measures: it loads what it is
// given the way the app does, then prints its resident memory when main() began (the fixed cost
// of the process: the libraries it maps, cuBLASLt's ~200 MiB in the full build) and its peak
// (VmHWM: the kernel's high-water mark of this process image, so nothing of the parent that
// spawned it counts, as it would in wait4's ru_maxrss).
//
//   fusionlab_load_probe session FILE      load_session (the loader itself)
//   fusionlab_load_probe recording PATH    load_recording (what --replay and export-* do)
//
// Exit status 0 when it loaded ("measurements N start_kib S peak_kib P" on stdout; for a
// recording N counts its series' sizes x levels), 1 with the refusal on stderr, 2 on a usage
// error.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "app/measure/replay_backend.h"
#include "model/session_json.h"

namespace {

// A "Vm..." line of /proc/self/status in KiB; -1 when absent.
long status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const size_t length = std::strlen(field);
  while (std::getline(status, line)) {
    if (line.compare(0, length, field) == 0 && line.size() > length && line[length] == ':') {
      return std::stol(line.substr(length + 1));
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  const long start_kib = status_kib("VmRSS");
  if (argc != 3 || (std::strcmp(argv[1], "session") != 0 && std::strcmp(argv[1], "recording"))) {
    std::fprintf(stderr, "usage: fusionlab_load_probe session|recording PATH\n");
    return 2;
  }
  size_t measurements = 0;
  fl::Status st;
  if (std::strcmp(argv[1], "session") == 0) {
    fl::Session session;
    st = fl::load_session(argv[2], &session);
    measurements = session.measurements.size();
  } else {
    std::unique_ptr<fl::ReplayBackend> backend;
    st = fl::load_recording({argv[2]}, &backend);
    if (st.ok()) {
      for (const fl::RecordedSeries& s : backend->summary().series) {
        measurements += s.sizes.size() * s.levels.size();
      }
    }
  }
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  std::printf("measurements %zu start_kib %ld peak_kib %ld\n", measurements, start_kib,
              status_kib("VmHWM"));
  return 0;
}
