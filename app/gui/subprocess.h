// Small helpers to run a desktop tool (fc-match, zenity) as a child process, without a shell:
// the arguments go to the program as they are. The window never waits on a dialog: AsyncProcess
// is polled once per frame.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace fl::gui {

// The full path of `program` found on $PATH; empty when it is not installed.
std::string find_program(const std::string& program);

// Runs argv (argv[0] looked up on $PATH), waits up to `timeout_s`, and returns its standard
// output; false when it cannot start, fails or takes too long (then it is killed).
bool run_and_capture(const std::vector<std::string>& argv, double timeout_s, std::string* out);

// A child whose standard output is collected while the window keeps drawing.
class AsyncProcess {
 public:
  AsyncProcess() = default;
  AsyncProcess(const AsyncProcess&) = delete;
  AsyncProcess& operator=(const AsyncProcess&) = delete;
  ~AsyncProcess();  // a child still running is killed and reaped

  bool start(const std::vector<std::string>& argv);  // false when it cannot start
  bool running() const { return pid_ > 0; }
  // Reads what is there without waiting; true once the child has exited (then *exit_code and
  // *out hold its status and everything it printed).
  bool poll(int* exit_code, std::string* out);
  void kill();

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
};

}  // namespace fl::gui
