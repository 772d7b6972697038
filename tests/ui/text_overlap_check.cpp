// The UI overlap test's checker: reads the text rectangles a window run wrote
// (FUSIONLAB_TEXT_RECTS, app/gui/panel_views.cpp) and fails when, in any recorded frame, two
// texts overlap, a text crosses the clip rect it was drawn in (viz::text_problems) or a shortened
// text ends in the middle of a number, or when a view of a lesson was never recorded at the
// expected window size. The rectangles include the measurement panel's table cells. Each plot the
// window drew (a "plot" line: viz::PlotFit) must keep a frame of kPlotMinFrameFonts lines, three
// labelled ticks on each axis and a legend that hides no data.
//
//   fusionlab_text_overlap_check RECTS.txt WIDTHxHEIGHT LESSON,LESSON,... VIEW,VIEW,...
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "viz/plot.h"
#include "viz/text.h"

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string field(const std::string& line, const std::string& name) {
  const size_t at = line.find(name + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + name.size() + 1;
  return line.substr(start, line.find(' ', start) - start);
}

// A number cut short: the text was shortened ("..." or "\u2026") right after a digit, so what
// is left reads as another number ("3" for 3033 GB/s).
bool cuts_a_number(const std::string& text) {
  for (const std::string& mark : {std::string("\u2026"), std::string("...")}) {
    if (text.size() <= mark.size() || text.compare(text.size() - mark.size(), mark.size(), mark))
      continue;
    const char before = text[text.size() - mark.size() - 1];
    if (before >= '0' && before <= '9') return true;
  }
  return false;
}

struct Frame {
  std::string header;
  std::vector<fl::viz::TextRect> rects;
  std::vector<fl::viz::PlotFit> plots;
};

// What is wrong with a plot, one line each.
std::vector<std::string> plot_problems(const fl::viz::PlotFit& p) {
  std::vector<std::string> out;
  char line[256];
  const float h = p.frame_max.y - p.frame_min.y;
  if (h < p.font_size * fl::viz::kPlotMinFrameFonts - 0.5f) {
    std::snprintf(line, sizeof(line), "plot %s: frame %.0f px tall, under %.0f (%.0f lines)",
                  p.id.c_str(), h, p.font_size * fl::viz::kPlotMinFrameFonts,
                  fl::viz::kPlotMinFrameFonts);
    out.push_back(line);
  }
  if (p.x_labels < 3 || p.y_labels < 3) {
    std::snprintf(line, sizeof(line), "plot %s: %d labelled x ticks and %d y ticks (3 each at least)",
                  p.id.c_str(), p.x_labels, p.y_labels);
    out.push_back(line);
  }
  if (p.legend_over_data > 0) {
    std::snprintf(line, sizeof(line), "plot %s: the legend hides data (%d)", p.id.c_str(),
                  p.legend_over_data);
    out.push_back(line);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s RECTS.txt WIDTHxHEIGHT LESSONS VIEWS\n", argv[0]);
    return 2;
  }
  const std::string display = argv[2];
  const std::vector<std::string> lessons = split(argv[3], ','), views = split(argv[4], ',');
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "%s: cannot open (did the window run with FUSIONLAB_TEXT_RECTS?)\n",
                 argv[1]);
    return 1;
  }
  std::vector<Frame> frames;
  std::string line;
  int bad_lines = 0;
  while (std::getline(in, line)) {
    if (line.rfind("frame ", 0) == 0) {
      frames.push_back({line.substr(6), {}, {}});
    } else if (line.rfind("plot ", 0) == 0 && !frames.empty()) {
      fl::viz::PlotFit p;
      char id[128] = {0};
      int outside = 0;
      if (std::sscanf(line.c_str() + 5, "%127s %f %f %f %f %f %d %d %d %d", id, &p.font_size,
                      &p.frame_min.x, &p.frame_min.y, &p.frame_max.x, &p.frame_max.y, &p.x_labels,
                      &p.y_labels, &p.legend_over_data, &outside) != 10) {
        ++bad_lines;
        continue;
      }
      p.id = id;
      p.legend_outside = outside != 0;
      frames.back().plots.push_back(p);
    } else if (line.rfind("rect ", 0) == 0 && !frames.empty()) {
      fl::viz::TextRect r;
      int used = 0;
      if (std::sscanf(line.c_str() + 5, "%f %f %f %f %f %f %f %f %n", &r.min.x, &r.min.y, &r.max.x,
                      &r.max.y, &r.clip_min.x, &r.clip_min.y, &r.clip_max.x, &r.clip_max.y,
                      &used) < 8) {
        ++bad_lines;
        continue;
      }
      r.text = line.substr(5 + static_cast<size_t>(used));
      frames.back().rects.push_back(r);
    } else if (!line.empty()) {
      ++bad_lines;
    }
  }
  int failures = 0;
  if (bad_lines > 0) {
    std::printf("FAIL: %d unreadable lines in %s\n", bad_lines, argv[1]);
    ++failures;
  }
  std::set<std::pair<std::string, std::string>> seen;
  size_t rects = 0;
  for (const Frame& f : frames) {
    if (field(f.header, "display") != display) {
      std::printf("FAIL: frame at display %s, expected %s: %s\n",
                  field(f.header, "display").c_str(), display.c_str(), f.header.c_str());
      ++failures;
      continue;
    }
    seen.insert({field(f.header, "lesson"), field(f.header, "view")});
    rects += f.rects.size();
    if (f.rects.empty()) {
      std::printf("FAIL: no text recorded in %s\n", f.header.c_str());
      ++failures;
    }
    for (const fl::viz::TextRect& r : f.rects) {
      if (cuts_a_number(r.text)) {
        std::printf("FAIL: %s: '%s' cuts a number\n", f.header.c_str(), r.text.c_str());
        ++failures;
      }
    }
    for (const fl::viz::PlotFit& p : f.plots) {
      for (const std::string& problem : plot_problems(p)) {
        std::printf("FAIL: %s: %s\n", f.header.c_str(), problem.c_str());
        ++failures;
      }
    }
    for (const std::string& problem : fl::viz::text_problems(f.rects)) {
      std::printf("FAIL: %s: %s\n", f.header.c_str(), problem.c_str());
      ++failures;
    }
  }
  for (const std::string& lesson : lessons) {
    for (const std::string& view : views) {
      if (!seen.count({lesson, view})) {
        std::printf("FAIL: %s's %s view was never recorded at %s\n", lesson.c_str(), view.c_str(),
                    display.c_str());
        ++failures;
      }
    }
  }
  std::printf("%zu frames, %zu text rectangles at %s: %d problem%s\n", frames.size(), rects,
              display.c_str(), failures, failures == 1 ? "" : "s");
  return failures == 0 ? 0 : 1;
}
