#include "viz/caption.h"

#include <algorithm>

namespace fl::viz {

CaptionLayout layout_caption(const std::vector<std::string>& pieces, float width, float font_size,
                             const std::function<float(const std::string&)>& text_width) {
  CaptionLayout L;
  L.width = std::max(width, 1.0f);
  L.font_size = font_size;
  L.padding = font_size * 0.5f;
  L.line_height = font_size * 1.3f;
  const auto measure = [&](const std::string& s) {
    return text_width ? text_width(s) : 0.55f * font_size * static_cast<float>(s.size());
  };
  const float room = L.width - 2 * L.padding;
  std::string line;
  for (const std::string& piece : pieces) {
    if (piece.empty()) continue;
    if (line.empty()) {
      line = piece;
      continue;
    }
    const std::string longer = line + kCaptionSeparator + piece;
    if (measure(longer) <= room) {
      line = longer;
    } else {
      L.lines.push_back(line);
      line = piece;
    }
  }
  if (!line.empty()) L.lines.push_back(line);
  L.height = L.lines.empty() ? 0
                             : 2 * L.padding + L.line_height * static_cast<float>(L.lines.size()) -
                                   (L.line_height - font_size);
  return L;
}

}  // namespace fl::viz
