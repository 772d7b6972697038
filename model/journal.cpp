#include "model/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/file_io.h"
#include "model/session_json.h"

namespace fl {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFirstLine = "fusionlab-journal 1";
constexpr const char* kSuffix = ".journal";

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string record_line(const Session& head, const Measurement& m) {
  Session one;
  one.app_version = head.app_version;
  one.created_utc = head.created_utc;
  one.backend = head.backend.empty() ? "live" : head.backend;
  one.device = head.device;
  one.device.copy_bandwidth.clear();  // up to 2048 entries: not worth repeating in every record
  one.measurements.push_back(m);
  std::string json = session_to_json(one, -1);
  while (!json.empty() && json.back() == '\n') json.pop_back();
  char prefix[48];
  std::snprintf(prefix, sizeof(prefix), "%zu %016" PRIx64 " ", json.size(), fnv1a(json));
  return prefix + json + "\n";
}

bool same_point(const Measurement& a, const Measurement& b) {
  return a.lesson == b.lesson && a.size == b.size && a.inner == b.inner && a.level == b.level &&
         a.precision == b.precision && a.cache == b.cache;
}

// One record line (without its '\n') into `out`; false when it is not a whole, intact record.
bool parse_record(const std::string& line, Session* out) {
  size_t length = 0;
  uint64_t checksum = 0;
  int consumed = 0;
  if (std::sscanf(line.c_str(), "%zu %" SCNx64 " %n", &length, &checksum, &consumed) != 2 ||
      consumed <= 0)
    return false;
  const std::string json = line.substr(static_cast<size_t>(consumed));
  if (json.size() != length || fnv1a(json) != checksum) return false;
  return session_from_json(json, out).ok() && out->measurements.size() == 1;
}

bool is_journal_name(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.rfind("window-", 0) == 0 && name.size() > std::strlen(kSuffix) &&
         name.compare(name.size() - std::strlen(kSuffix), std::string::npos, kSuffix) == 0;
}

// Whether some process holds the journal's lock (its window is running).
bool held(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // cannot tell: leave it alone
  const bool locked = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return locked;
}

}  // namespace

std::string journal_folder() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && state[0] == '/')
    return std::string(state) + "/fusionlab/journal";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0')
    return std::string(home) + "/.local/state/fusionlab/journal";
  return "";
}

Status Journal::create(const std::string& folder, std::unique_ptr<Journal>* out) {
  if (folder.empty()) return Status::Error("no folder for the crash journal (HOME is not set)");
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return Status::Error("cannot create " + folder + ": " + ec.message());
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
  const std::string path = folder + "/window-" + stamp + "-" + std::to_string(::getpid()) + kSuffix;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Error("cannot create " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Status::Error("cannot lock " + path + ": " + std::strerror(errno));
  }
  std::unique_ptr<Journal> j(new Journal());
  j->path_ = path;
  j->fd_ = fd;
  j->pending_ = std::string(kFirstLine) + "\n";
  j->flush(0, true);
  *out = std::move(j);
  return Status::Ok();
}

Journal::~Journal() {
  if (fd_ >= 0) {
    flush(0, true);
    ::close(fd_);
  }
}

void Journal::append(const Session& head, const std::vector<Measurement>& measurements) {
  if (failed_) return;
  for (const Measurement& m : measurements) {
    pending_ += record_line(head, m);
    ++queued_;
  }
}

void Journal::flush(double now, bool force) {
  if (failed_ || fd_ < 0 || pending_.empty()) return;
  if (!force && last_flush_ >= 0 && now - last_flush_ < kJournalFlushSeconds) return;
  last_flush_ = now;
  // write(2) alone: the kernel has the bytes once it returns, so a killed window loses nothing
  // written (a power cut may; no fsync, which would stall the window on a slow disk).
  size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n = ::write(fd_, pending_.data() + done, pending_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::fprintf(stderr,
                   "fusionlab: the crash journal %s could not be written (%s); "
                   "measurements are no longer journalled\n",
                   path_.c_str(), std::strerror(errno));
      failed_ = true;
      return;
    }
    done += static_cast<size_t>(n);
  }
  pending_.clear();
  written_ = queued_;
}

void Journal::finish() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  fs::remove(path_, ec);
}

Status read_journal(const std::string& path, RecoveredJournal* out) {
  std::string text;
  FL_TRY(read_file_checked(path, kMaxSessionFileBytes, "crash journal", &text));
  const std::string shown = shorten_for_message(path, kShownPathChars);
  const size_t first_end = text.find('\n');
  if (text.compare(0, std::strlen(kFirstLine), kFirstLine) != 0 ||
      (first_end != std::string::npos && first_end != std::strlen(kFirstLine)))
    return Status::Error(shown + ": not a Fusion Lab crash journal");
  RecoveredJournal r;
  r.path = path;
  size_t at = first_end == std::string::npos ? text.size() : first_end + 1;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    Session one;
    if (end == std::string::npos || !parse_record(text.substr(at, end - at), &one)) {
      r.damage = shown + ": the record at byte " + std::to_string(at) +
                 (end == std::string::npos ? " was cut short" : " is damaged") + "; the " +
                 std::to_string(r.records) + " measurement" + (r.records == 1 ? "" : "s") +
                 " before it are recovered and the rest of the file is skipped";
      break;
    }
    Measurement& m = one.measurements.front();
    auto& ms = r.session.measurements;
    ms.erase(std::remove_if(ms.begin(), ms.end(),
                            [&](const Measurement& x) { return same_point(x, m); }),
             ms.end());
    ms.push_back(std::move(m));
    r.session.app_version = one.app_version;
    r.session.created_utc = one.created_utc;
    r.session.backend = one.backend;
    r.session.device = one.device;
    ++r.records;
    at = end + 1;
  }
  *out = std::move(r);
  return Status::Ok();
}

std::vector<std::string> orphaned_journals(const std::string& folder) {
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (!entry.is_regular_file(ec) || !is_journal_name(entry.path())) continue;
    if (held(entry.path())) continue;
    found.emplace_back(entry.last_write_time(ec), entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

int clean_journals(const std::string& folder, int max_age_days, size_t keep) {
  int removed = 0;
  const std::vector<std::string> orphans = orphaned_journals(folder);
  const auto now = fs::file_time_type::clock::now();
  for (size_t i = 0; i < orphans.size(); ++i) {
    std::error_code ec;
    const auto written = fs::last_write_time(orphans[i], ec);
    const bool old = !ec && now - written > std::chrono::hours(24) * max_age_days;
    if ((i >= keep || old) && fs::remove(orphans[i], ec)) ++removed;
  }
  return removed;
}

}  // namespace fl
