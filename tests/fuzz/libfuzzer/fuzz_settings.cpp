// libFuzzer target: the remembered settings, fl::gui::settings_from_text (app/gui/settings.h),
// the parse behind load_settings: settings.ini is a file anyone (or any program) may have edited.
// Properties: never crashes; a refusal is one line naming the file; accepted settings are written
// by settings_text into a file that reads back to the same text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "app/gui/settings.h"
#include "tests/fuzz/libfuzzer/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > static_cast<size_t>(fl::gui::kMaxSettingsBytes)) return 0;  // refused unread
  const std::string text(reinterpret_cast<const char*>(data), size);
  fl::gui::Settings settings;
  const fl::Status st = fl::gui::settings_from_text(text, "settings.ini", &settings);
  fl::fuzz::expect_one_line(st);
  if (!st.ok()) {
    fl::fuzz::expect(st.message().rfind("settings.ini", 0) == 0, "a refusal names the file",
                     st.message());
    return 0;
  }
  const std::string written = fl::gui::settings_text(settings);
  fl::gui::Settings again;
  const fl::Status reread = fl::gui::settings_from_text(written, "settings.ini", &again);
  fl::fuzz::expect(reread.ok(), "written settings read back", reread.message());
  fl::fuzz::expect(fl::gui::settings_text(again) == written, "settings round trip", written);
  return 0;
}
