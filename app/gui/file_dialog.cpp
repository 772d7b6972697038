#include "app/gui/file_dialog.h"

#include <imgui.h>

#include <cstring>
#include <filesystem>
#include <system_error>

namespace fl::gui {
namespace {

namespace fs = std::filesystem;

const char* title(FileAction a) {
  switch (a) {
    case FileAction::save_session: return "Save session###file_dialog";
    case FileAction::open_recording: return "Open recording###file_dialog";
    case FileAction::compare: return "Compare with a recording###file_dialog";
    case FileAction::export_trace: return "Export trace###file_dialog";
    case FileAction::export_csv: return "Export CSV###file_dialog";
    case FileAction::screenshot: return "Save screenshot###file_dialog";
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
    case FileAction::open_recording: return "Open";
    case FileAction::compare: return "Compare";
    case FileAction::export_trace:
    case FileAction::export_csv: return "Export";
    default: return "Save";
  }
}

}  // namespace

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
  pending_open_ = true;
  focus_ = true;
  close_ = false;
}

void FileDialog::fail(const std::string& message) {
  error_ = message;
  replace_.clear();
}

void FileDialog::close() {
  close_ = true;
  pending_open_ = false;
}

bool FileDialog::draw(FileRequest* request) {
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
  bool confirmed = false;
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
  ImGui::TextUnformatted(writes_file(action_) ? "Save as" : "Path");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  if (focus_) {
    ImGui::SetKeyboardFocusHere();
    focus_ = false;
  }
  const bool enter = ImGui::InputText("##path", path_, sizeof(path_),
                                      ImGuiInputTextFlags_EnterReturnsTrue);
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
  const std::string path = path_;
  bool go = false;
  if (!replace_.empty()) {
    ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "%s already exists. Replace it?",
                       replace_.c_str());
    if (ImGui::Button("Replace")) go = true;
    ImGui::SameLine();
    if (ImGui::Button("Keep it")) replace_.clear();
  } else {
    go = ImGui::Button(confirm_label(action_)) || enter;
    if (go) {
      if (writes_file(action_)) {
        const std::string why = unwritable_reason(path);
        std::error_code ec;
        if (!why.empty()) {
          error_ = why;
          go = false;
        } else if (fs::exists(path, ec)) {
          replace_ = path;  // ask first
          go = false;
        }
      } else if (path.empty()) {
        error_ = "Type the path of a session file or a folder of them.";
        go = false;
      }
    }
  }
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
    confirmed = true;
  }
  ImGui::EndPopup();
  return confirmed;
}

}  // namespace fl::gui
