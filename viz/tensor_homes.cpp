// Where each tensor of a fusion level went (tensor_homes.h).
#include "viz/tensor_homes.h"

#include <algorithm>
#include <cmath>

#include "viz/view_util.h"

namespace fl::viz {

const char* to_string(TensorHome home) {
  switch (home) {
    case TensorHome::hbm:
      return "HBM";
    case TensorHome::l2:
      return "L2";
    case TensorHome::on_chip:
      return "on chip";
  }
  return "";
}

bool TensorHomes::any_moved() const {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const TensorPlace& t) { return t.moved(); });
}

namespace {

// An intermediate stayed in L2 for its writer (or reader) where DRAM saw under this share of the
// bytes the textbook says it writes (or where the reader's DRAM reads fell short of the
// textbook by at least this share of the tensor).
constexpr double kL2Share = 0.5;
// A value kept on chip by design went through HBM where the level's extra DRAM writes are this
// close to its size.
constexpr double kMatchLow = 0.4, kMatchHigh = 1.6;

std::string bytes(double b) {
  return format_byte_count(std::max(b, 0.0));
}

struct LaunchBytes {
  double textbook_read = 0, textbook_write = 0, dram_read = 0, dram_write = 0;
  bool measured = false;
};

LaunchBytes launch_bytes(const LaunchResult& l) {
  LaunchBytes b;
  b.textbook_read = static_cast<double>(l.textbook.bytes_read);
  b.textbook_write = static_cast<double>(l.textbook.bytes_written);
  if (l.counters) {
    b.measured = true;
    b.dram_read = static_cast<double>(l.counters->dram_read_bytes);
    b.dram_write = static_cast<double>(l.counters->dram_write_bytes);
  }
  return b;
}

// Level 0's launches (name, bytes written) at the measurement's shape.
std::vector<LaunchTraffic> level0_launches(const Measurement& m, const Lesson* lesson,
                                           const Measurement* level0) {
  if (lesson && lesson->level_count() > 0) {
    auto t = lesson->traffic(0, Shape(m.size, m.inner), m.precision);
    if (!t.empty()) return t;
  }
  std::vector<LaunchTraffic> out;
  if (level0) {
    for (const auto& l : level0->launches) out.push_back(l.textbook);
  }
  return out;
}

// The intermediate written by launch k and read by launch k + 1.
TensorPlace intermediate(const Measurement& m, size_t k, bool measured) {
  TensorPlace t;
  t.name = m.launches[k].textbook.kernel + " output";
  t.bytes = static_cast<double>(m.launches[k].textbook.bytes_written);
  t.intermediate = true;
  t.design = t.measured = TensorHome::hbm;
  t.launch = static_cast<int>(k);
  const std::string head = t.name + " (" + bytes(t.bytes) + ")";
  if (!measured) {
    t.sentence = head + " goes to HBM and is read back (the design: counters off)";
    return t;
  }
  const LaunchBytes w = launch_bytes(m.launches[k]), r = launch_bytes(m.launches[k + 1]);
  t.dram_write_bytes = w.dram_write;
  t.dram_read_bytes = r.dram_read;
  const bool written_to_l2 = w.textbook_write > 0 && w.dram_write < kL2Share * w.textbook_write;
  const bool read_from_l2 = t.bytes > 0 && r.textbook_read - r.dram_read >= kL2Share * t.bytes;
  if (read_from_l2) {
    t.measured = TensorHome::l2;
    t.written_back = !written_to_l2;
    t.sentence = written_to_l2
                     ? head + " stays in L2: DRAM saw " + bytes(w.dram_write) +
                           " of its writes and " + bytes(r.dram_read) + " of " +
                           bytes(r.textbook_read) + " read back"
                     : head + " is read back from L2 (DRAM reads " + bytes(r.dram_read) + " of " +
                           bytes(r.textbook_read) + "), though L2 writes it back to HBM";
  } else {
    t.sentence = head + " round-trips through HBM: DRAM writes " + bytes(w.dram_write) +
                 ", reads back " + bytes(r.dram_read);
  }
  return t;
}

// Level 0's intermediates this level keeps on chip (kept_by_design): the values of the table.
std::vector<TensorPlace> kept_values(const Measurement& m, const std::vector<LaunchTraffic>& l0) {
  std::vector<TensorPlace> out;
  if (m.level == 0) return out;
  const std::vector<bool> kept = kept_by_design(m, l0);
  for (size_t k = 0; k < kept.size(); ++k) {
    if (!kept[k]) continue;
    TensorPlace t;
    t.name = l0[k].kernel + " output";
    t.bytes = static_cast<double>(l0[k].bytes_written);
    t.design = t.measured = TensorHome::on_chip;
    out.push_back(t);
  }
  return out;
}

// The kept values the level's extra DRAM writes account for, best size match first (the latest
// of equal sizes: the value a fused kernel stores is the last step before its consumer).
void match_extra_bytes(TensorHomes* h, size_t first_kept, int launch) {
  double write_left = h->extra_write_bytes, read_left = h->extra_read_bytes;
  for (;;) {
    int best = -1;
    double best_error = 0;
    for (size_t i = first_kept; i < h->tensors.size(); ++i) {
      const TensorPlace& t = h->tensors[i];
      if (t.moved() || !(t.bytes > 0)) continue;
      const double ratio = write_left / t.bytes;
      if (ratio < kMatchLow || ratio > kMatchHigh) continue;
      const double error = std::fabs(ratio - 1.0);
      if (best < 0 || error <= best_error) best = static_cast<int>(i), best_error = error;
    }
    if (best < 0) return;
    TensorPlace& t = h->tensors[best];
    t.launch = launch;
    t.dram_write_bytes = std::min(write_left, t.bytes);
    write_left -= t.bytes;
    if (read_left >= kMatchLow * t.bytes) {
      t.measured = TensorHome::hbm;
      t.dram_read_bytes = std::min(read_left, t.bytes);
      read_left -= t.bytes;
    } else {
      t.measured = TensorHome::l2;
      t.written_back = true;
    }
  }
}

// The kept values' sentences, once the verdicts are in.
void kept_sentences(TensorHomes* h, double textbook_read, double dram_read) {
  for (TensorPlace& t : h->tensors) {
    if (t.intermediate) continue;
    const std::string head = t.name + " (" + bytes(t.bytes) + ")";
    if (!h->measured) {
      t.sentence = head + " stays on chip by design (counters off: not measured)";
    } else if (t.measured == TensorHome::hbm) {
      t.sentence = head + " went through HBM: the level writes " + bytes(h->dram_write_bytes) +
                   " to HBM against " + bytes(h->textbook_write_bytes) +
                   " by the textbook, reads " + bytes(dram_read) + " against " +
                   bytes(textbook_read);
    } else if (t.measured == TensorHome::l2) {
      t.sentence = head + " was written back to HBM (the level writes " +
                   bytes(h->dram_write_bytes) + " against " + bytes(h->textbook_write_bytes) +
                   ") and read back from L2";
    } else {
      t.sentence = head + " stays on chip: the DRAM bytes show no trip of its size";
    }
  }
}

std::string headline_of(const TensorHomes& h) {
  std::string out;
  for (const TensorPlace& t : h.tensors) {
    if (!t.moved()) continue;
    std::string what;
    if (t.intermediate) {
      what = t.name + (t.written_back ? " is read back from L2" : " stays in L2");
    } else if (t.measured == TensorHome::hbm) {
      what = t.name + " went through HBM (" + bytes(h.dram_write_bytes) + " written, textbook " +
             bytes(h.textbook_write_bytes) + ")";
    } else {
      what = t.name + " was written back to HBM, read from L2";
    }
    out += (out.empty() ? "measured: " : ", ") + what;
  }
  return out;
}

}  // namespace

std::vector<bool> kept_by_design(const Measurement& m, const std::vector<LaunchTraffic>& l0) {
  const size_t intermediates = l0.empty() ? 0 : l0.size() - 1;
  std::vector<bool> in_memory(intermediates, false);
  const auto launched_here = [&](const std::string& kernel) {
    return std::any_of(m.launches.begin(), m.launches.end(),
                       [&](const LaunchResult& l) { return l.textbook.kernel == kernel; });
  };
  for (size_t k = 0; k < intermediates; ++k) in_memory[k] = launched_here(l0[k].kernel);
  for (size_t j = 0; j + 1 < m.launches.size(); ++j) {
    const LaunchTraffic& t = m.launches[j].textbook;
    const bool renamed = std::none_of(l0.begin(), l0.end(), [&](const LaunchTraffic& z) {
      return z.kernel == t.kernel;
    });
    if (!renamed || t.bytes_written <= 0) continue;
    for (size_t k = intermediates; k-- > 0;) {  // the latest of equal size
      if (!in_memory[k] && l0[k].bytes_written == t.bytes_written) {
        in_memory[k] = true;
        break;
      }
    }
  }
  std::vector<bool> kept(intermediates);
  for (size_t k = 0; k < intermediates; ++k) kept[k] = m.level > 0 && !in_memory[k];
  return kept;
}

std::vector<LaunchTraffic> level0_traffic(const Measurement& m, const Lesson* lesson,
                                          const Measurement* level0) {
  return level0_launches(m, lesson, level0);
}

TensorHomes tensor_homes(const Measurement& m, const Lesson* lesson, const Measurement* level0) {
  TensorHomes h;
  if (m.launches.empty()) return h;
  h.measured = std::all_of(m.launches.begin(), m.launches.end(),
                           [](const LaunchResult& l) { return l.counters.has_value(); });
  if (lesson && m.level >= 0 && m.level < lesson->level_count()) {
    h.design_reason = lesson->info().levels[m.level].on_chip;
  }
  double textbook_read = 0, dram_read = 0, largest_extra = -1;
  int holder = 0;
  for (size_t k = 0; k < m.launches.size(); ++k) {
    const LaunchBytes b = launch_bytes(m.launches[k]);
    textbook_read += b.textbook_read;
    h.textbook_write_bytes += b.textbook_write;
    dram_read += b.dram_read;
    h.dram_write_bytes += b.dram_write;
    if (b.dram_write - b.textbook_write > largest_extra) {
      largest_extra = b.dram_write - b.textbook_write;
      holder = static_cast<int>(k);
    }
  }
  if (h.measured) {
    h.extra_write_bytes = h.dram_write_bytes - h.textbook_write_bytes;
    h.extra_read_bytes = dram_read - textbook_read;
  }
  for (size_t k = 0; k + 1 < m.launches.size(); ++k) {
    h.tensors.push_back(intermediate(m, k, h.measured));
  }
  const size_t first_kept = h.tensors.size();
  for (TensorPlace& t : kept_values(m, level0_launches(m, lesson, level0))) {
    t.launch = holder;
    h.tensors.push_back(std::move(t));
  }
  if (h.measured) match_extra_bytes(&h, first_kept, holder);
  kept_sentences(&h, textbook_read, dram_read);
  if (h.measured) h.headline = headline_of(h);
  return h;
}

std::string measured_summary(const std::string& summary, const TensorHomes& homes) {
  if (homes.headline.empty()) return summary;
  const size_t cut = summary.find_first_of(";:");
  const std::string first = summary.substr(0, cut);
  return first.empty() ? homes.headline : first + "; " + homes.headline;
}

}  // namespace fl::viz
