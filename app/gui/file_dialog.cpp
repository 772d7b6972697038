#include "app/gui/file_dialog.h"

#include <imgui.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <filesystem>
#include <system_error>

namespace fl::gui {
namespace {

namespace fs = std::filesystem;

const char* title(FileAction a) {
  switch (a) {
    case FileAction::save_session:
      return "Save session###file_dialog";
    case FileAction::open_recording:
      return "Open recording###file_dialog";
    case FileAction::compare:
      return "Compare with a recording###file_dialog";
    case FileAction::export_trace:
      return "Export trace###file_dialog";
    case FileAction::export_csv:
      return "Export CSV###file_dialog";
    case FileAction::screenshot:
      return "Save screenshot###file_dialog";
  }
  return "###file_dialog";
}

const char* explanation(FileAction a) {
  switch (a) {
    case FileAction::save_session:
      return "The GPU's facts and every measurement so far, as a session file (JSON). "
             "fusionlab --replay FILE shows it again, on any machine.";
    case FileAction::open_recording:
      return "A session file, or a folder of them, of one GPU (commas for several). The window "
             "replays it: nothing runs on this machine.";
    case FileAction::compare:
      return "A second recording (another GPU, another day) drawn dashed over the speedup and "
             "bandwidth plots, labelled with its GPU and date.";
    case FileAction::export_trace:
      return "The current sweep's kernel launches as a Chrome trace (JSON; .json.gz compresses): "
             "open it in ui.perfetto.dev or chrome://tracing.";
    case FileAction::export_csv:
      return "The current sweep (this lesson, precision and cache mode): one row per size, level "
             "and launch, units in the header.";
    case FileAction::screenshot:
      return "A PNG at the window's own resolution. F12 saves one at once under a new name.";
  }
  return "";
}

const char* confirm_label(FileAction a) {
  switch (a) {
    case FileAction::open_recording:
      return "Open";
    case FileAction::compare:
      return "Compare";
    case FileAction::export_trace:
    case FileAction::export_csv:
      return "Export";
    default:
      return "Save";
  }
}

// The title without Dear ImGui's "###id" tail.
std::string plain_title(FileAction a) {
  const std::string t = title(a);
  return t.substr(0, t.find("###"));
}

}  // namespace

bool FileDialog::start_native(const std::string& path) {
  if (!allow_native || action_ == FileAction::screenshot) return false;
  if (const char* mode = std::getenv("FUSIONLAB_FILE_DIALOG");
      mode && std::string(mode) == "text") {
    return false;
  }
  if (find_program("zenity").empty()) return false;
  std::vector<std::string> argv = {"zenity", "--file-selection", "--title=" + plain_title(action_)};
  if (!path.empty()) argv.push_back("--filename=" + path);
  if (writes_file(action_)) {
    argv.push_back("--save");
    argv.push_back("--confirm-overwrite");  // zenity asks before replacing a file
  } else {
    // Several session files of one GPU may be picked at once; we join them with commas, as
    // --replay takes them.
    argv.push_back("--multiple");
    argv.push_back("--separator=,");
    argv.push_back("--file-filter=Fusion Lab sessions (*.json) | *.json");
    argv.push_back("--file-filter=All files | *");
  }
  return native_.start(argv);
}

// While the desktop's dialog is open: a small note (with a way out), and its answer once it
// closes. Exit 0 is a chosen path, 1 a cancel; anything else falls back to the popup.
bool FileDialog::draw_native_wait(FileRequest* request) {
  int code = 0;
  std::string out;
  if (native_.poll(&code, &out)) {
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (code == 0 && !out.empty() && out.find('\n') == std::string::npos) {
      std::snprintf(path_, sizeof(path_), "%s", out.c_str());
      request->action = action_;
      request->path = out;
      request->view_only = view_only;
      request->caption = caption;
      return true;
    }
    if (code != 1) pending_open_ = true;  // it failed: the path field instead
    return false;
  }
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x + viewport->WorkSize.x * 0.5f,
                                 viewport->WorkPos.y + viewport->WorkSize.y * 0.5f),
                          ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  ImGui::Begin("##native_dialog_wait", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize |
                   ImGuiWindowFlags_NoSavedSettings);
  ImGui::Text("%s: choose in the desktop's file dialog...", plain_title(action_).c_str());
  if (ImGui::Button("Type a path instead")) {
    native_.kill();
    pending_open_ = true;
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel")) native_.kill();
  ImGui::End();
  return false;
}

bool writes_file(FileAction action) {
  return action != FileAction::open_recording && action != FileAction::compare;
}

std::string unwritable_reason(const std::string& path) {
  if (path.empty()) return "Type a file name.";
  std::error_code ec;
  if (fs::is_directory(path, ec)) return path + " is a folder: add a file name.";
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    return "The folder " + parent.string() + " does not exist.";
  }
  return "";
}

void FileDialog::open(FileAction action, const std::string& path, const std::string& error) {
  action_ = action;
  std::snprintf(path_, sizeof(path_), "%s", path.c_str());
  error_ = error;
  replace_.clear();
  focus_ = true;
  close_ = false;
  native_.kill();
  // The desktop's dialog first (not to show an error: that needs the popup).
  pending_open_ = !(error.empty() && start_native(path));
}

void FileDialog::fail(const std::string& message) {
  error_ = message;
  replace_.clear();
  if (!open_) pending_open_ = true;  // the desktop's dialog chose it: show why in the popup
}

void FileDialog::close() {
  close_ = true;
  pending_open_ = false;
  native_.kill();
}

bool FileDialog::draw(FileRequest* request) {
  if (native_.running()) return draw_native_wait(request);
  if (pending_open_) {
    ImGui::OpenPopup(title(action_));
    pending_open_ = false;
    open_ = true;
  }
  if (!open_) return false;
  const float fs = ImGui::GetFontSize();
  ImGui::SetNextWindowSize(ImVec2(fs * 36, 0));
  // Opaque, so the plot behind does not show through the text.
  ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_PopupBg];
  bg.w = 1.0f;
  ImGui::PushStyleColor(ImGuiCol_PopupBg, bg);
  const bool visible =
      ImGui::BeginPopupModal(title(action_), nullptr, ImGuiWindowFlags_NoSavedSettings);
  ImGui::PopStyleColor();
  if (!visible) {
    open_ = false;
    return false;
  }
  if (close_) {
    ImGui::CloseCurrentPopup();
    open_ = close_ = false;
    ImGui::EndPopup();
    return false;
  }
  ImGui::PushTextWrapPos(0);
  ImGui::TextDisabled("%s", explanation(action_));
  ImGui::PopTextWrapPos();
  ImGui::Spacing();
  const bool enter = draw_path_field();
  const std::string path = path_;
  bool go = draw_buttons(path, enter);
  ImGui::SameLine();
  if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) {
    ImGui::CloseCurrentPopup();
    open_ = false;
    go = false;
  }
  if (go) {
    request->action = action_;
    request->path = path;
    request->view_only = view_only;
    request->caption = caption;
    replace_.clear();
    error_.clear();
  }
  ImGui::EndPopup();
  return go;
}

bool FileDialog::draw_path_field() {
  ImGui::TextUnformatted(writes_file(action_) ? "Save as" : "Path");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  if (focus_) {
    ImGui::SetKeyboardFocusHere();
    focus_ = false;
  }
  // Every action's field opens with its default name selected, so typing replaces it (ImGui
  // selects on focus only when asked: without the flag a typed path landed inside the name).
  const bool enter = ImGui::InputText(
      "##path", path_, sizeof(path_),
      ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_AutoSelectAll);
  if (ImGui::IsItemEdited()) {
    replace_.clear();
    error_.clear();
  }
  if (action_ == FileAction::screenshot) {
    int which = view_only ? 1 : 0;
    ImGui::RadioButton("whole window", &which, 0);
    ImGui::SameLine();
    ImGui::RadioButton("only the view in front", &which, 1);
    view_only = which == 1;
    ImGui::SameLine();
    ImGui::Checkbox("caption strip", &caption);
  }
  if (!error_.empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", error_.c_str());
    ImGui::PopTextWrapPos();
  }
  return enter;
}

bool FileDialog::draw_buttons(const std::string& path, bool enter) {
  if (!replace_.empty()) {
    ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "%s already exists. Replace it?",
                       replace_.c_str());
    bool go = false;
    if (ImGui::Button("Replace")) go = true;
    ImGui::SameLine();
    if (ImGui::Button("Keep it")) replace_.clear();
    return go;
  }
  if (!ImGui::Button(confirm_label(action_)) && !enter) return false;
  if (writes_file(action_)) {
    const std::string why = unwritable_reason(path);
    std::error_code ec;
    if (!why.empty()) {
      error_ = why;
      return false;
    }
    if (fs::exists(path, ec)) {
      replace_ = path;  // ask first
      return false;
    }
  } else if (path.empty()) {
    error_ = "Type the path of a session file or a folder of them.";
    return false;
  }
  return true;
}

}  // namespace fl::gui
