// The portable kernels' series (model/portable.h).
#include "model/portable.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "model/file_io.h"
#include "model/session_json.h"

namespace fl {

namespace {

// Files a portable/ folder may hold, and their bytes together: a recording's own cap.
constexpr size_t kMaxPortableFiles = 64;

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c); });
}

}  // namespace

std::string cc_words(int cc) {
  return std::to_string(cc / 10) + "." + std::to_string(cc % 10);
}

Status parse_choose_as(const std::string& text, int* cc) {
  std::string t = text;
  if (t.rfind("sm_", 0) == 0) t = t.substr(3);
  const size_t dot = t.find('.');
  std::string digits = t;
  if (dot != std::string::npos) {
    const std::string major = t.substr(0, dot), minor = t.substr(dot + 1);
    digits = minor.size() == 1 ? major + minor : std::string();
  }
  if (!all_digits(digits) || digits.size() > 3) {
    return Status::Error("--choose-as takes a compute capability such as 8.6, 86 or sm_86; got '" +
                         shorten_for_message(text) + "'");
  }
  const int value = std::stoi(digits);
  if (value < kOldestChooseAsCc) {
    return Status::Error("--choose-as " + shorten_for_message(text) +
                         ": the kernels are built for compute capability " +
                         cc_words(kOldestChooseAsCc) + " (Volta) and newer");
  }
  *cc = value;
  return Status::Ok();
}

std::string choose_as_refusal(int cc, int device_cc) {
  if (cc <= 0) return "";
  if (cc < kOldestChooseAsCc) {
    return "kernels cannot be chosen as on compute capability " + cc_words(cc) +
           ": they are built for " + cc_words(kOldestChooseAsCc) + " and newer";
  }
  if (cc > device_cc) {
    return "kernels can be chosen as on this GPU (" + cc_words(device_cc) +
           ") or an older one, not as on " + cc_words(cc) + ": they run here";
  }
  return "";
}

std::string PortableSeries::label() const {
  return "portable kernels (as on compute capability " + cc_words(chosen_as_cc) +
         "), measured on " + (gpu.empty() ? std::string("another GPU") : "an " + gpu);
}

bool PortableSeries::has(const std::string& lesson, Precision precision, CacheMode cache) const {
  return std::any_of(measurements.begin(), measurements.end(), [&](const Measurement& m) {
    return m.lesson == lesson && m.precision == precision && m.cache == cache;
  });
}

// One file's measurements into `out`: each chosen as an older GPU, all as one, on one GPU.
static Status add_portable_file(const std::string& path, PortableSeries* out) {
  const std::string shown = shorten_for_message(path, kShownPathChars);
  Session session;
  FL_TRY(load_session(path, &session));
  if (out->gpu.empty()) {
    out->gpu = session.device.name;
    out->date = session.created_utc.substr(0, 10);
  } else if (session.device.name != out->gpu) {
    return Status::Error(shown + ": measured on " + session.device.name + ", the others on " +
                         out->gpu + ": a portable series is of one GPU");
  }
  for (Measurement& m : session.measurements) {
    if (m.chosen_as_cc <= 0) {
      return Status::Error(shown + ": its measurements ran this GPU's own kernels (no " +
                           "chosen_as_cc): a portable series is measured with bench --choose-as");
    }
    if (out->chosen_as_cc == 0) out->chosen_as_cc = m.chosen_as_cc;
    if (m.chosen_as_cc != out->chosen_as_cc) {
      return Status::Error(shown + ": kernels chosen as on compute capability " +
                           cc_words(m.chosen_as_cc) + " beside " + cc_words(out->chosen_as_cc) +
                           ": a portable series is chosen as one GPU");
    }
    out->measurements.push_back(std::move(m));
  }
  return Status::Ok();
}

Status load_portable_series(const std::string& recording, PortableSeries* out) {
  namespace fs = std::filesystem;
  *out = PortableSeries{};
  const fs::path folder = fs::path(recording) / "portable";
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return Status::Ok();
  std::vector<std::string> files;
  int64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    std::error_code entry_ec;
    if (entry.path().extension() != ".json" || !entry.is_regular_file(entry_ec)) continue;
    files.push_back(entry.path().string());
    const uintmax_t size = entry.file_size(entry_ec);
    if (!entry_ec) bytes += static_cast<int64_t>(std::min<uintmax_t>(size, kMaxSessionFileBytes));
  }
  const std::string shown = shorten_for_message(folder.string(), kShownPathChars);
  if (ec) return Status::Error(shown + ": cannot list the folder: " + ec.message());
  if (files.size() > kMaxPortableFiles || bytes > kMaxSessionFileBytes) {
    return Status::Error(shown + ": more than " + std::to_string(kMaxPortableFiles) +
                         " files or " + size_limit_words(kMaxSessionFileBytes) +
                         ", the limits of a portable series");
  }
  std::sort(files.begin(), files.end());
  PortableSeries series;
  for (const std::string& file : files) FL_TRY(add_portable_file(file, &series));
  *out = std::move(series);
  return Status::Ok();
}

std::string find_shipped_portable_recording(const std::string& assets) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(fs::path(assets) / "recordings", ec)) {
    std::error_code dir_ec;
    if (fs::is_directory(entry.path() / "portable", dir_ec)) found.push_back(entry.path());
  }
  if (found.empty()) return {};
  std::sort(found.begin(), found.end());
  return found.back().string();
}

}  // namespace fl
