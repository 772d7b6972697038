#include "model/sizes.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <sstream>

#include "model/file_io.h"

namespace fl {

namespace {

Status too_large(const std::string& shown) {
  return Status::Error("size " + shown + " is too large: sizes go from 1 to " +
                       format_size(kMaxParsedSize) + " (each lesson has its own maximum)");
}

}  // namespace

Status parse_size(const std::string& text, int64_t* out) {
  if (text.empty()) return Status::Error("empty size");
  const std::string shown = "'" + shorten_for_message(text) + "'";
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return Status::Error(shown + " is not a size like 1K, 16M or 1000003");
  const std::string suffix = text.substr(digits);
  if (!suffix.empty() && suffix != "K" && suffix != "k" && suffix != "M" && suffix != "m" &&
      suffix != "G" && suffix != "g") {
    return Status::Error(shown + " is not a size like 1K, 16M or 1000003");
  }
  // More than 18 significant digits cannot be read into an int64_t, and are too large anyway.
  size_t zeros = 0;
  while (zeros < digits && text[zeros] == '0') ++zeros;
  if (digits - zeros > 18) return too_large(shown);
  const int64_t value = zeros == digits ? 0 : std::stoll(text.substr(zeros, digits - zeros));
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  // Checked before shifting: a suffix never wraps a size around.
  if (value > (kMaxParsedSize >> shift)) return too_large(shown);
  if (value == 0) {
    return Status::Error("size " + shown + " is zero: sizes go from 1 to " +
                         format_size(kMaxParsedSize));
  }
  *out = value << shift;
  return Status::Ok();
}

Status parse_size_list(const std::string& text, std::vector<int64_t>* out) {
  out->clear();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t n = 0;
    FL_TRY(parse_size(item, &n));
    // A session holds one measurement per (lesson, size, level, precision, cache): refused here,
    // before any GPU work, rather than when the session is saved.
    if (std::find(out->begin(), out->end(), n) != out->end()) {
      return Status::Error("size " + format_size(n) + " is listed twice in '" +
                           shorten_for_message(text) + "'; each size is measured once");
    }
    out->push_back(n);
  }
  if (out->empty()) return Status::Error("no sizes given");
  return Status::Ok();
}

Status parse_level_list(const std::string& text, std::vector<int>* out) {
  out->clear();
  if (text == "all") return Status::Ok();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (end == item.c_str() || *end != '\0' || errno == ERANGE || v < 0 || v > kMaxLevelNumber) {
      return Status::Error("--levels takes 'all' or numbers like 0,1; got '" +
                           shorten_for_message(text) + "'");
    }
    out->push_back(static_cast<int>(v));
  }
  if (out->empty()) return Status::Error("--levels takes 'all' or numbers like 0,1; got none");
  return Status::Ok();
}

Status check_lesson_size(const LessonInfo& lesson, int64_t size) {
  if (size >= 1 && size <= lesson.size_axis.max) return Status::Ok();
  return Status::Error(lesson.id + " takes sizes from 1 to " + format_size(lesson.size_axis.max) +
                       " " + lesson.size_axis.unit + ", got " + format_size(size));
}

std::string format_size(int64_t n) {
  if (n >= (int64_t(1) << 30) && n % (int64_t(1) << 30) == 0) return std::to_string(n >> 30) + "G";
  if (n >= (1 << 20) && n % (1 << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n >= (1 << 10) && n % (1 << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

}  // namespace fl
