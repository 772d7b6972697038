// Files in and out (docs/RELIABILITY.md "Files"): the ONE atomic writer that every
// output goes through (sessions, traces, CSV, PNG screenshots, SVG, settings), the checks every
// reader makes before it reads, and the quoting of untrusted text in messages.
//
// Writing: `write_file_atomically` creates a temporary file exclusively (O_CREAT | O_EXCL |
// O_NOFOLLOW, a random name) in the target's folder, writes, fsyncs and renames it over the
// target, so an interrupted or failed write leaves the old file as it was and a symlink or file
// planted at a guessable temporary name is never followed or truncated. An output that exists
// and is not a regular file (a folder, device, FIFO, socket) is refused whatever the caller
// allows; a symbolic link is written through to the file it points at (the link stays), and one
// that points nowhere is refused; a file this process is reading (ReadingGuard) is never
// replaced. Every failure is one line that names the output, never the temporary file.
//
// Reading: `read_file_checked` opens without blocking (a FIFO cannot hang the app), refuses
// anything but a regular file and anything over the caller's size cap, saying what was wrong
// ("a folder", "larger than 16 MiB"), then reads the file it checked (the same descriptor).
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <vector>

#include "kernels/status.h"

namespace fl {

// ---- messages ---------------------------------------------------------------------------------

// `text` made safe for a one-line message: control characters escaped (\n, \t, \x1b, ...; a
// byte that is not UTF-8 as \xNN) and, past `max_chars` characters, shortened in the middle with
// "..." so the start and the end (a file's name) stay. For paths and arguments from the command
// line, scripts and files.
std::string shorten_for_message(const std::string& text, size_t max_chars = 80);
// Paths in messages are shortened past this many characters (a path is only useful whole, but a
// generated one can be kilobytes long).
constexpr size_t kShownPathChars = 120;

// "16 MiB", "256 MiB", "512 KiB", "100 bytes": a size cap in words.
std::string size_limit_words(int64_t bytes);

// ---- identities -------------------------------------------------------------------------------

struct FileId {
  uint64_t device = 0;
  uint64_t inode = 0;
  bool operator==(const FileId& o) const { return device == o.device && inode == o.inode; }
  bool operator<(const FileId& o) const {
    return device != o.device ? device < o.device : inode < o.inode;
  }
};
// The device and inode of `path` (symlinks followed); false when it does not exist.
bool file_id_of(const std::string& path, FileId* out);

// While one lives, the files it names (device + inode, taken when it is made) count as being
// read by this process, and no atomic write replaces them ("no command writes over a file it is
// reading": an export onto its own input, a script's save-session onto the recording it opened).
// Paths that do not exist are ignored. Thread-safe.
class ReadingGuard {
 public:
  ReadingGuard() = default;
  explicit ReadingGuard(const std::vector<std::string>& paths);
  ~ReadingGuard();
  ReadingGuard(ReadingGuard&& other) noexcept;
  ReadingGuard& operator=(ReadingGuard&& other) noexcept;
  ReadingGuard(const ReadingGuard&) = delete;
  ReadingGuard& operator=(const ReadingGuard&) = delete;

 private:
  void release();
  std::vector<FileId> ids_;
};
// Whether `id` is held by a live ReadingGuard.
bool is_being_read(const FileId& id);

// ---- reading ----------------------------------------------------------------------------------

// Caps for what the app reads (each reader passes its own).
constexpr int64_t kMaxSessionFileBytes = int64_t(256) << 20;  // a recording
constexpr int64_t kMaxScriptFileBytes = int64_t(16) << 20;    // a --script file
constexpr int64_t kMaxSmallFileBytes = int64_t(1) << 20;      // settings and other small files

// Checks that `path` is a regular file of at most `max_bytes` that can be opened for reading,
// without reading it and without blocking on a FIFO. `what` names the file in the message:
// "PATH: a folder, not a session file", "PATH: larger than 16 MiB, the limit for a script",
// "PATH: cannot open: No such file or directory". The path is shortened in the message.
Status check_readable_file(const std::string& path, int64_t max_bytes, const std::string& what);

// check_readable_file, then the whole file into `out` from the descriptor that was checked (a file
// that grows past the cap while being read is refused too). `id`, when given, receives its device
// and inode.
Status read_file_checked(const std::string& path, int64_t max_bytes, const std::string& what,
                         std::string* out, FileId* id = nullptr);

// check_readable_file, then `parse` reads the file as a stream from the descriptor that was
// checked, so a parser that builds as it reads (the session loader) never holds the file's text
// whole. The stream ends at `max_bytes`: a file that grows past the cap while being read is
// refused after `parse` returns, whatever it said, as is a read error; both name the file.
// Otherwise `parse`'s Status is returned as it is (the caller adds the file's name).
Status read_file_streamed(const std::string& path, int64_t max_bytes, const std::string& what,
                          const std::function<Status(std::istream&)>& parse, FileId* id = nullptr);

// ---- writing ----------------------------------------------------------------------------------

struct WriteOptions {
  // false: refuse when the output exists ("OUT already exists"); the final rename then cannot
  // replace a file that appeared meanwhile either (renameat2 RENAME_NOREPLACE, or link + unlink).
  bool replace_existing = true;
};

// What write_file_atomically would refuse, checked up front so a command can say so before it
// does any work: the name is empty; the output exists and is not a regular file (or is a symlink
// to one that is not, or to nothing); it exists and `replace_existing` is false (the message ends
// with `exists_hint`, e.g. "; pass --force to overwrite it"); it is a file this process is reading;
// its folder does not exist or is not writable. Root can write anywhere, so a read-only folder is
// only caught by the write itself.
Status check_output_file(const std::string& path, bool replace_existing,
                         const std::string& exists_hint = "");

// Writes `contents` to `path` atomically (see the top of this file). On failure the output is as
// it was and no temporary file is left behind.
Status write_file_atomically(const std::string& path, const std::string& contents,
                             const WriteOptions& options = {});

// All of `contents` to standard output (`-o -`), retrying short writes; a failure (a closed pipe,
// a full disk behind a redirection) is one line: "cannot write to standard output: ...".
Status write_to_stdout(const std::string& contents);

// "-" as an output name means standard output.
inline bool is_stdout_name(const std::string& path) {
  return path == "-";
}

}  // namespace fl
