// What the caption strip under a screenshot says (GPU, lesson, size, level, precision and cache
// mode, date, and the compared recording), one piece per fact; viz/caption.h lays them out.
#pragma once

#include <string>
#include <vector>

#include "app/gui/lab.h"

namespace fl::gui {

// `today` is the date the picture is taken ("2026-11-22 14:05"): a live measurement is dated
// by it, a replayed one by its recording's date.
std::vector<std::string> caption_pieces(const Lab& lab, const std::string& today);

// The local time as "2026-11-22 14:05" (caption) and as "20261122-140512" (default file names).
std::string local_time_text();
std::string local_time_stamp();

}  // namespace fl::gui
