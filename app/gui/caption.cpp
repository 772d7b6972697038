#include "app/gui/caption.h"

#include <ctime>

#include "app/gui/widgets.h"

namespace fl::gui {
namespace {

std::string local_time(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  return std::strftime(buf, sizeof(buf), format, &tm) ? buf : "";
}

}  // namespace

std::string local_time_text() {
  return local_time("%Y-%m-%d %H:%M");
}
std::string local_time_stamp() {
  return local_time("%Y%m%d-%H%M%S");
}

std::vector<std::string> caption_pieces(const Lab& lab, const std::string& today) {
  std::vector<std::string> out;
  const EngineStatus& st = lab.status();
  const LessonInfo& info = lab.lesson().info();
  out.push_back("Fusion Lab");
  if (st.state == EngineState::ready && !st.device.name.empty()) {
    out.push_back(st.device.name + (lab.replay() ? " (recorded)" : " (live)"));
  } else {
    out.push_back("no GPU measured");
  }
  out.push_back(info.id + ", " + tensor_text(lab.lesson(), lab.size(), lab.precision()));
  const int level = lab.shown_level();
  out.push_back("level " + std::to_string(level) + " of " + std::to_string(lab.top_level()) + ": " +
                info.levels[level].name);
  out.push_back(std::string(to_string(lab.precision())) + ", " + to_string(lab.cache()) + " L2");
  // The date (and GPU, where it differs) of the measurement shown: a session saved from a
  // replay and opened again still says when and where it was measured.
  const Measurement* shown = nullptr;
  for (const Measurement& m : lab.current()) {
    if (m.level == level) shown = &m;
  }
  if (shown && shown->provenance.known()) {
    const Provenance& p = shown->provenance;
    out.push_back((p.source == "live" ? "measured " : "recorded ") + p.date() +
                  (p.gpu != st.device.name && !p.gpu.empty() ? " on " + p.gpu : ""));
  } else if (lab.replay()) {
    out.push_back("recorded " + lab.replay()->recording.date_text());
  } else {
    out.push_back("measured " + today);
  }
  const ComparedSeries compared = lab.compared_series();
  if (compared.found) out.push_back("compared with " + compared.label);
  return out;
}

}  // namespace fl::gui
