// The File menu's file chooser. Where the desktop has one (zenity, run as a child process that
// the window polls, so it never waits), open() shows the desktop's own dialog; otherwise, when
// it fails to start, or for File > Screenshot... (which has choices of its own), a popup with a
// path field, a default path, one plain sentence when something is wrong, and "Replace it?"
// before an existing file is overwritten. It decides nothing about what the path is used for:
// the window performs the action and reports failure back with fail(), which shows the popup
// with the path and the reason. FUSIONLAB_FILE_DIALOG=text always uses the popup.
#pragma once

#include <string>

#include "app/gui/subprocess.h"

namespace fl::gui {

enum class FileAction {
  save_session,
  open_recording,
  compare,
  export_trace,
  export_csv,
  screenshot
};

struct FileRequest {
  FileAction action = FileAction::save_session;
  std::string path;
  bool view_only = false;  // screenshot: only the views panel
  bool caption = true;     // screenshot: the caption strip under the picture
};

// Whether the action writes `path` (and so asks before replacing a file).
bool writes_file(FileAction action);

// Why `path` cannot be written (empty: it can): empty, a folder, its folder missing.
std::string unwritable_reason(const std::string& path);

class FileDialog {
 public:
  // Opens the popup at the next draw() with `path` in the field and, if given, an error shown.
  void open(FileAction action, const std::string& path, const std::string& error = "");
  bool is_open() const { return open_ || pending_open_ || native_.running(); }
  // Whether open() may use the desktop's dialog (false for scripts and screenshots).
  bool allow_native = true;
  // Draws the popup; call once per frame at the root (outside other windows). Returns true and
  // fills *request when the learner confirmed (for a write over an existing file: after
  // "Replace"). The popup stays open until close() or another open().
  bool draw(FileRequest* request);
  void fail(const std::string& message);  // shown in the popup, which stays open
  void close();
  // The screenshot choices persist between uses.
  bool view_only = false;
  bool caption = true;

 private:
  FileAction action_ = FileAction::save_session;
  char path_[1024] = {};
  std::string error_;
  std::string replace_;  // non-empty: asking whether to replace this file
  bool pending_open_ = false, open_ = false, focus_ = false, close_ = false;
  AsyncProcess native_;  // the desktop's dialog while it is open
  bool start_native(const std::string& path);
  bool draw_native_wait(FileRequest* request);
  // The path field (with the screenshot's choices and the last error); true when Enter was
  // pressed in it.
  bool draw_path_field();
  // The confirm button (or Replace / Keep it while asking); true when `path` is to be used.
  bool draw_buttons(const std::string& path, bool enter);
};

}  // namespace fl::gui
