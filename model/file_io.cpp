#include "model/file_io.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <streambuf>
#include <set>
#include <utility>

namespace fl {

// ---- messages ---------------------------------------------------------------------------------

namespace {

std::string hex_escape(unsigned char c) {
  static const char* const kDigits = "0123456789abcdef";
  return std::string("\\x") + kDigits[c >> 4] + kDigits[c & 15];
}

// The display units of `text`: a printable UTF-8 character each, or the escape of a control
// character or of a byte that does not start a valid UTF-8 character.
std::vector<std::string> display_units(const std::string& text) {
  std::vector<std::string> units;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '\n':
          units.emplace_back("\\n");
          break;
        case '\r':
          units.emplace_back("\\r");
          break;
        case '\t':
          units.emplace_back("\\t");
          break;
        default:
          units.push_back(c < 0x20 || c == 0x7F ? hex_escape(c) : std::string(1, text[i]));
      }
      ++i;
      continue;
    }
    const size_t length = c >= 0xF0 && c <= 0xF4   ? 4
                          : c >= 0xE0              ? 3
                          : c >= 0xC2 && c <= 0xDF ? 2
                                                   : 0;
    bool valid = length > 0 && i + length <= text.size() && c < 0xF5;
    for (size_t k = 1; valid && k < length; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    // C1 control characters (U+0080..U+009F, e.g. CSI) drive terminals as ESC sequences do.
    if (valid && length == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      valid = false;
    }
    if (!valid) {
      units.push_back(hex_escape(c));
      ++i;
      continue;
    }
    units.push_back(text.substr(i, length));
    i += length;
  }
  return units;
}

}  // namespace

std::string shorten_for_message(const std::string& text, size_t max_chars) {
  const std::vector<std::string> units = display_units(text);
  std::string out;
  if (units.size() <= max_chars || max_chars < 8) {
    for (const std::string& u : units) out += u;
    return out;
  }
  // Keep more of the end: for a path, that is the file's name.
  const size_t keep = max_chars - 3;
  const size_t head = keep / 3;
  const size_t tail = keep - head;
  for (size_t i = 0; i < head; ++i) out += units[i];
  out += "...";
  for (size_t i = units.size() - tail; i < units.size(); ++i) out += units[i];
  return out;
}

std::string size_limit_words(int64_t bytes) {
  if (bytes >= (int64_t(1) << 20) && bytes % (int64_t(1) << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

// ---- identities -------------------------------------------------------------------------------

namespace {

FileId id_from(const struct stat& st) {
  return FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::multiset<FileId>& registry() {
  static std::multiset<FileId> ids;
  return ids;
}

}  // namespace

bool file_id_of(const std::string& path, FileId* out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  *out = id_from(st);
  return true;
}

ReadingGuard::ReadingGuard(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    FileId id;
    if (file_id_of(path, &id)) ids_.push_back(id);
  }
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const FileId& id : ids_) registry().insert(id);
}

ReadingGuard::~ReadingGuard() {
  release();
}

ReadingGuard::ReadingGuard(ReadingGuard&& other) noexcept : ids_(std::move(other.ids_)) {
  other.ids_.clear();
}

ReadingGuard& ReadingGuard::operator=(ReadingGuard&& other) noexcept {
  if (this != &other) {
    release();
    ids_ = std::move(other.ids_);
    other.ids_.clear();
  }
  return *this;
}

void ReadingGuard::release() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const FileId& id : ids_) {
    const auto it = registry().find(id);
    if (it != registry().end()) registry().erase(it);
  }
  ids_.clear();
}

bool is_being_read(const FileId& id) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return registry().count(id) > 0;
}

// ---- reading ----------------------------------------------------------------------------------

namespace {

// What a file that is not a regular one is, in words.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Opens `path` for reading and checks it; on success `*fd_out` is an open descriptor (blocking).
Status open_checked(const std::string& path, int64_t max_bytes, const std::string& what,
                    int* fd_out, struct stat* st_out) {
  const std::string shown = shorten_for_message(path, kShownPathChars);
  if (path.empty()) return Status::Error("an empty " + what + " name was given");
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENXIO)
      return Status::Error(shown + ": a socket or a device with nothing behind it, not a " + what);
    return Status::Error(shown + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Error(shown + ": cannot read: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(shown + ": " + kind_of(st.st_mode) + ", not a " + what);
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    return Status::Error(shown + ": larger than " + size_limit_words(max_bytes) +
                         ", the limit for a " + what);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  *fd_out = fd;
  *st_out = st;
  return Status::Ok();
}

}  // namespace

Status check_readable_file(const std::string& path, int64_t max_bytes, const std::string& what) {
  int fd = -1;
  struct stat st {};
  FL_TRY(open_checked(path, max_bytes, what, &fd, &st));
  ::close(fd);
  return Status::Ok();
}

Status read_file_checked(const std::string& path, int64_t max_bytes, const std::string& what,
                         std::string* out, FileId* id) {
  int fd = -1;
  struct stat st {};
  FL_TRY(open_checked(path, max_bytes, what, &fd, &st));
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Status::Error(shorten_for_message(path, kShownPathChars) +
                           ": cannot read: " + std::strerror(err));
    }
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(data.size()) > max_bytes) {
      ::close(fd);
      return Status::Error(shorten_for_message(path, kShownPathChars) + ": larger than " +
                           size_limit_words(max_bytes) + ", the limit for a " + what +
                           " (it grew while being read)");
    }
  }
  ::close(fd);
  if (id != nullptr) *id = id_from(st);
  *out = std::move(data);
  return Status::Ok();
}

namespace {

// The bytes of an open file as a stream, at most `max_bytes` of them: one more ends the stream
// and sets grew(). A read error ends it too and sets error().
class CappedFileBuffer : public std::streambuf {
 public:
  CappedFileBuffer(int fd, int64_t max_bytes) : fd_(fd), left_(max_bytes) {}
  bool grew() const { return grew_; }
  int error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (grew_ || error_ != 0) return traits_type::eof();
    ssize_t n = 0;
    do {
      n = ::read(fd_, buffer_, sizeof(buffer_));
    } while (n < 0 && errno == EINTR);
    if (n < 0) error_ = errno;
    if (n <= 0) return traits_type::eof();
    if (n > left_) {
      grew_ = true;
      return traits_type::eof();
    }
    left_ -= n;
    setg(buffer_, buffer_, buffer_ + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  int fd_;
  int64_t left_;
  bool grew_ = false;
  int error_ = 0;
  char buffer_[1 << 16];
};

}  // namespace

Status read_file_streamed(const std::string& path, int64_t max_bytes, const std::string& what,
                          const std::function<Status(std::istream&)>& parse, FileId* id) {
  int fd = -1;
  struct stat st {};
  FL_TRY(open_checked(path, max_bytes, what, &fd, &st));
  CappedFileBuffer buffer(fd, max_bytes);
  std::istream stream(&buffer);
  Status parsed = parse(stream);
  ::close(fd);
  const std::string shown = shorten_for_message(path, kShownPathChars);
  if (buffer.grew()) {
    return Status::Error(shown + ": larger than " + size_limit_words(max_bytes) +
                         ", the limit for a " + what + " (it grew while being read)");
  }
  if (buffer.error() != 0) {
    return Status::Error(shown + ": cannot read: " + std::strerror(buffer.error()));
  }
  if (id != nullptr) *id = id_from(st);
  return parsed;
}

// ---- writing ----------------------------------------------------------------------------------

namespace {

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Where an output really goes: `path`, or the file a symbolic link at `path` points at.
struct OutputTarget {
  std::string path;     // the file to replace or create
  bool exists = false;  // a regular file is there now
  mode_t mode = 0;      // its permission bits, when it exists
};

Status resolve_output(const std::string& path, bool replace_existing,
                      const std::string& exists_hint, OutputTarget* out) {
  if (path.empty()) return Status::Error("no output file name was given");
  const std::string shown = shorten_for_message(path, kShownPathChars);
  const std::string cannot = "cannot write " + shown + ": ";
  OutputTarget target;
  target.path = path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      // Written through to the file it points at, so the link stays a link.
      char resolved[PATH_MAX];
      if (::realpath(path.c_str(), resolved) == nullptr) {
        return Status::Error(cannot +
                             "it is a symbolic link to a file that does not exist; give the "
                             "file itself");
      }
      target.path = resolved;
      if (::stat(target.path.c_str(), &st) != 0) {
        return Status::Error(
            cannot + "it is a symbolic link that cannot be followed: " + std::strerror(errno));
      }
      if (!S_ISREG(st.st_mode)) {
        return Status::Error(cannot + "it is a symbolic link to " + kind_of(st.st_mode) +
                             ", not to a regular file, so it is never written");
      }
    } else if (S_ISDIR(st.st_mode)) {
      return Status::Error(cannot + "it is a folder; give a file name");
    } else if (!S_ISREG(st.st_mode)) {
      return Status::Error(cannot + "it is " + kind_of(st.st_mode) +
                           ", not a regular file, so it is never replaced (not even with --force)");
    }
    target.exists = true;
    target.mode = st.st_mode & 0777;
    if (is_being_read(id_from(st))) {
      return Status::Error(cannot + "it is a file this command is reading; write to another name");
    }
    if (!replace_existing) return Status::Error(shown + " already exists" + exists_hint);
  } else if (errno != ENOENT) {
    return Status::Error(cannot + std::strerror(errno));
  }
  const std::string folder = folder_of(target.path);
  struct stat folder_st {};
  if (::stat(folder.c_str(), &folder_st) != 0) {
    if (errno == ENOENT) {
      return Status::Error(cannot + "the folder " + shorten_for_message(folder, kShownPathChars) +
                           " does not exist");
    }
    return Status::Error(cannot + "the folder " + shorten_for_message(folder, kShownPathChars) +
                         ": " + std::strerror(errno));
  }
  if (!S_ISDIR(folder_st.st_mode)) {
    return Status::Error(cannot + shorten_for_message(folder, kShownPathChars) +
                         " is not a folder");
  }
  // The temporary file goes beside the output, so the folder itself must be writable.
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    return Status::Error(cannot + "the folder " + shorten_for_message(folder, kShownPathChars) +
                         " is not writable");
  }
  *out = std::move(target);
  return Status::Ok();
}

// The process's umask, read without changing it (umask(2) would race with other threads).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  }
  return 022;
}

std::string random_hex(size_t digits) {
  static const char* const kDigits = "0123456789abcdef";
  unsigned char bytes[32] = {};
  const size_t want = std::min(sizeof(bytes), (digits + 1) / 2);
  size_t got = 0;
  while (got < want) {
    const ssize_t n = ::getrandom(bytes + got, want - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < want) {  // no getrandom: still unique per process and call, if guessable
    static unsigned counter = 0;
    const unsigned long long mix = (static_cast<unsigned long long>(::getpid()) << 32) ^ ++counter ^
                                   reinterpret_cast<uintptr_t>(&got);
    std::memcpy(bytes, &mix, std::min(sizeof(mix), sizeof(bytes)));
  }
  std::string out;
  for (size_t i = 0; i < digits; ++i) out += kDigits[(bytes[i / 2] >> (i % 2 ? 0 : 4)) & 15];
  return out;
}

std::string why(int err) {
  switch (err) {
    case ENOSPC:
      return "the disk is full (" + std::string(std::strerror(err)) + ")";
    case EDQUOT:
      return "the disk quota is used up (" + std::string(std::strerror(err)) + ")";
    case EROFS:
      return "the file system is read-only";
    case EFBIG:
      return "the file is larger than this process may write (" + std::string(std::strerror(err)) +
             ")";
    default:
      return std::strerror(err);
  }
}

bool write_all(int fd, const std::string& contents, int* err) {
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    written += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status check_output_file(const std::string& path, bool replace_existing,
                         const std::string& exists_hint) {
  OutputTarget target;
  return resolve_output(path, replace_existing, exists_hint, &target);
}

Status write_file_atomically(const std::string& path, const std::string& contents,
                             const WriteOptions& options) {
  OutputTarget target;
  FL_TRY(resolve_output(path, options.replace_existing, "", &target));
  const std::string cannot = "cannot write " + shorten_for_message(path, kShownPathChars) + ": ";
  const std::string folder = folder_of(target.path);

  // The temporary file: a hidden name with 16 random hex digits, created exclusively and never
  // through a symlink, so nothing planted in the folder is followed or truncated.
  std::string base = name_of(target.path);
  if (base.size() > 100) base.resize(100);
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    temporary = (folder == "/" ? "" : folder) + "/." + base + ".tmp-" + random_hex(16);
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    const int err = errno;
    if (err == EACCES || err == EPERM) {
      return Status::Error(cannot + "the folder " + shorten_for_message(folder, kShownPathChars) +
                           " is not writable");
    }
    return Status::Error(cannot + why(err));
  }
  const auto give_up = [&](int err) {
    ::close(fd);
    ::unlink(temporary.c_str());
    return Status::Error(cannot + why(err));
  };
  int err = 0;
  if (!write_all(fd, contents, &err)) return give_up(err);
  // A replaced file keeps its permissions; a new one gets the usual 0666 less the umask.
  const mode_t mode = target.exists ? target.mode : (0666 & ~current_umask());
  if (::fchmod(fd, mode) != 0) return give_up(errno);
  if (::fsync(fd) != 0) return give_up(errno);
  if (::close(fd) != 0) {
    err = errno;
    ::unlink(temporary.c_str());
    return Status::Error(cannot + why(err));
  }
  int renamed = -1;
  if (options.replace_existing) {
    renamed = ::rename(temporary.c_str(), target.path.c_str());
  } else {
    renamed =
        ::renameat2(AT_FDCWD, temporary.c_str(), AT_FDCWD, target.path.c_str(), RENAME_NOREPLACE);
    if (renamed != 0 && (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP)) {
      // A file system without RENAME_NOREPLACE: link() fails rather than replace.
      renamed = ::link(temporary.c_str(), target.path.c_str());
      if (renamed == 0) ::unlink(temporary.c_str());
    }
  }
  if (renamed != 0) {
    err = errno;
    ::unlink(temporary.c_str());
    if (err == EEXIST)
      return Status::Error(shorten_for_message(path, kShownPathChars) + " already exists");
    return Status::Error(cannot + why(err));
  }
  // The rename itself is durable once the folder is synced.
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::Ok();
}

Status write_to_stdout(const std::string& contents) {
  std::fflush(stdout);
  int err = 0;
  if (!write_all(STDOUT_FILENO, contents, &err)) {
    return Status::Error("cannot write to standard output: " + why(err));
  }
  return Status::Ok();
}

}  // namespace fl
