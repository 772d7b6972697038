#include "app/gui/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <sstream>

extern char** environ;

namespace fl::gui {
namespace {

// Starts argv with its stdout on a pipe (stdin and stderr to /dev/null); returns the pid and
// the read end, or -1.
pid_t spawn_with_pipe(const std::vector<std::string>& argv, int* read_fd) {
  if (argv.empty()) return -1;
  const std::string path = argv[0].find('/') == std::string::npos ? find_program(argv[0]) : argv[0];
  if (path.empty()) return -1;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return -1;
  }
  *read_fd = fds[0];
  return pid;
}

// Appends what can be read now; false at end of file.
bool drain(int fd, std::string* out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      if (out->size() > (1 << 20)) return false;  // no tool of ours prints this much
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EINTR;
  }
}

}  // namespace

std::string find_program(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

bool run_and_capture(const std::vector<std::string>& argv, double timeout_s, std::string* out) {
  int fd = -1;
  const pid_t pid = spawn_with_pipe(argv, &fd);
  if (pid < 0) return false;
  out->clear();
  const auto start = std::chrono::steady_clock::now();
  bool open = true, timed_out = false;
  while (open) {
    const double left =
        timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left * 1000) + 1) < 0 && errno != EINTR) break;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      if (out->size() > (1 << 20)) timed_out = true, open = false;
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      open = false;
    }
  }
  close(fd);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

AsyncProcess::~AsyncProcess() {
  kill();
}

bool AsyncProcess::start(const std::vector<std::string>& argv) {
  kill();
  out_.clear();
  pid_ = spawn_with_pipe(argv, &fd_);
  if (pid_ < 0) return false;
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  return true;
}

bool AsyncProcess::poll(int* exit_code, std::string* out) {
  if (pid_ <= 0) return false;
  if (fd_ >= 0 && !drain(fd_, &out_)) {
    close(fd_);
    fd_ = -1;
  }
  int status = 0;
  const pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done == 0) return false;
  if (fd_ >= 0) {  // what it printed just before it exited
    drain(fd_, &out_);
    close(fd_);
    fd_ = -1;
  }
  pid_ = -1;
  *exit_code = done > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  *out = std::move(out_);
  out_.clear();
  return true;
}

void AsyncProcess::kill() {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
}

}  // namespace fl::gui
