// The window's side of the crash journal (model/journal.h): it opens this window's journal and
// hands it to the Lab, reopens a crashed window's measurements (`--recover`, or the offer an
// interactive start shows when one was left behind) and removes the journal when the window
// closes normally.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/gui/lab.h"
#include "model/journal.h"

namespace fl::gui {

class CrashRecovery {
 public:
  // `recover`: reopen the newest journal left behind now (--recover). `offer`: an interactive
  // window asks in a popup whether to reopen it. `journal`: this window journals its own
  // measurements (not for --screenshot runs). Problems are one line on stderr and in lab.note;
  // none stops the window.
  void start(Lab* lab, bool recover, bool offer, bool journal);
  // The popup offering to reopen the journal left behind (interactive starts only).
  void draw_offer(Lab* lab);
  ~CrashRecovery();  // an orderly end: this window's journal is removed

 private:
  void reopen(Lab* lab, const std::string& path);
  std::string folder_;
  std::unique_ptr<Journal> journal_;
  std::string offered_;  // the journal the popup offers to reopen; empty: none
  RecoveredJournal offered_contents_;
  bool popup_opened_ = false;
};

}  // namespace fl::gui
