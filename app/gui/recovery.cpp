#include "app/gui/recovery.h"

#include <imgui.h>

#include <cstdio>
#include <filesystem>

namespace fl::gui {
namespace {

void say(Lab* lab, const std::string& line) {
  std::fprintf(stderr, "fusionlab: %s\n", line.c_str());
  lab->note = line;
}

}  // namespace

void CrashRecovery::start(Lab* lab, bool recover, bool offer, bool journal) {
  folder_ = journal_folder();
  if (folder_.empty()) {
    if (recover)
      say(lab, "--recover: no crash journal folder (neither XDG_STATE_HOME nor HOME is set)");
    return;
  }
  clean_journals(folder_);
  const std::vector<std::string> orphans = orphaned_journals(folder_);
  if (journal) {
    if (Status st = Journal::create(folder_, &journal_); !st.ok()) {
      std::fprintf(stderr, "fusionlab: measurements are not journalled: %s\n",
                   st.message().c_str());
    } else {
      lab->set_journal(journal_.get());
    }
  }
  if (recover) {
    if (orphans.empty()) {
      say(lab, "--recover: no window ended unexpectedly (nothing in " + folder_ + ")");
    } else {
      reopen(lab, orphans.front());
    }
    return;
  }
  if (!offer || orphans.empty()) return;
  RecoveredJournal contents;
  if (!read_journal(orphans.front(), &contents).ok() || contents.records == 0) {
    std::error_code ec;
    std::filesystem::remove(orphans.front(), ec);  // nothing in it worth offering
    return;
  }
  offered_ = orphans.front();
  offered_contents_ = std::move(contents);
}

void CrashRecovery::reopen(Lab* lab, const std::string& path) {
  RecoveredJournal r;
  if (Status st = read_journal(path, &r); !st.ok()) {
    say(lab, st.message());
    return;
  }
  lab->restore(r.session);
  std::string line = "reopened " + std::to_string(r.session.measurements.size()) +
                     " measurements of the window that ended unexpectedly (" +
                     r.session.created_utc + ", " + r.session.device.name + ")";
  if (!r.damage.empty()) line += "; " + r.damage;
  say(lab, line);
  // They are in this window's journal now.
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

void CrashRecovery::draw_offer(Lab* lab) {
  if (offered_.empty()) return;
  const char* title = "Reopen the last session?";
  if (!popup_opened_) {
    ImGui::OpenPopup(title);
    popup_opened_ = true;
  }
  if (!ImGui::BeginPopupModal(title, nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  const RecoveredJournal& r = offered_contents_;
  ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32);
  ImGui::TextWrapped(
      "Fusion Lab did not close normally last time. Its %zu measurements (%s, last at %s) were "
      "journalled and can be reopened here, as if measured now.",
      r.session.measurements.size(), r.session.device.name.c_str(), r.session.created_utc.c_str());
  if (!r.damage.empty()) ImGui::TextDisabled("%s", r.damage.c_str());
  ImGui::PopTextWrapPos();
  bool close = false;
  if (ImGui::Button("Reopen")) {
    reopen(lab, offered_);
    close = true;
  }
  ImGui::SameLine();
  if (ImGui::Button("Discard")) {
    std::error_code ec;
    std::filesystem::remove(offered_, ec);
    close = true;
  }
  ImGui::SameLine();
  if (ImGui::Button("Not now")) close = true;  // kept; offered again at the next start
  if (close) {
    offered_.clear();
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

CrashRecovery::~CrashRecovery() {
  if (journal_) journal_->finish();
}

}  // namespace fl::gui
