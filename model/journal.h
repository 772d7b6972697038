// The crash journal (docs/RELIABILITY.md, "Nothing lost on a crash"): the window appends every
// measurement as it arrives to a file of its own in the XDG state folder, written in batches (at
// most every kJournalFlushSeconds), and removes the file when it closes normally. A window that
// was killed or crashed leaves its journal behind; the next start offers to reopen it, and
// `fusionlab --recover` does so at once.
//
// The file: a first line `fusionlab-journal 1`, then one record a line, `LENGTH CHECKSUM JSON`,
// where JSON is a compact session holding one measurement (docs/SESSION_FORMAT.md; the device's
// copy-bandwidth list left out), LENGTH its bytes and CHECKSUM its 64-bit FNV-1a in hex. A
// record cut short by the crash, or damaged later, fails its length or checksum: reading stops
// there, keeping every whole record before it. While its window runs, the file is locked
// (flock), which is how a journal whose window is gone is told from one still being written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/status.h"
#include "model/caps.h"
#include "model/results.h"

namespace fl {

// $XDG_STATE_HOME/fusionlab/journal, or ~/.local/state/fusionlab/journal; empty when neither
// XDG_STATE_HOME nor HOME is set.
std::string journal_folder();

class Journal {
 public:
  // A new journal in `folder` (created if missing), locked for as long as this object lives.
  static Status create(const std::string& folder, std::unique_ptr<Journal>* out);
  ~Journal();  // writes what is pending; the file stays (finish() removes it)
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Queues one record per measurement; `head` gives the app version, backend and device.
  void append(const Session& head, const std::vector<Measurement>& measurements);
  // Writes the queued records when `force`, or once kJournalFlushSeconds have passed since the
  // last write. `now` is in seconds on any steady clock. A write that fails is said once on
  // stderr and the journal stops (the window goes on).
  void flush(double now, bool force = false);
  // The window closes normally: nothing to recover, so the file is removed.
  void finish();

  const std::string& path() const { return path_; }
  int64_t records_written() const { return written_; }

 private:
  Journal() = default;
  std::string path_;
  int fd_ = -1;
  std::string pending_;
  int64_t queued_ = 0, written_ = 0;
  double last_flush_ = -1;
  bool failed_ = false;
};

struct RecoveredJournal {
  std::string path;
  Session session;      // every whole record, a later measurement at a point replacing an older
  int64_t records = 0;  // whole records read
  std::string damage;   // one sentence when reading stopped at a damaged or cut-off record
};
// Reads a journal up to its last whole record. Fails (one line naming the file) only when it is
// not a journal at all or cannot be read.
Status read_journal(const std::string& path, RecoveredJournal* out);

// Journals in `folder` that no running window holds, newest first.
std::vector<std::string> orphaned_journals(const std::string& folder);
// Removes orphaned journals older than `max_age_days`, and all but the newest `keep`.
// Returns how many it removed.
int clean_journals(const std::string& folder, int max_age_days = kJournalMaxAgeDays,
                   size_t keep = kMaxOrphanedJournals);

}  // namespace fl
