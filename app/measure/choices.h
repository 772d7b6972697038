// The names of the choices people type: on the command line (bench's --precision, --cache,
// --timer; the window's --view), in scripts (`precision`, `cache`, `view`) and in the remembered
// settings. One parser per kind of name, so every place accepts the same spellings and describes
// them in the same words. Precision's parser is kernels/lesson.h's parse_precision and the cache
// mode's is results.h's parse_cache_mode; the timer and the views are here.
#pragma once

#include <string>
#include <vector>

#include "model/results.h"

namespace fl {

// How the timing phase times launches: CUPTI activity records (a launch is its kernel's
// end - start), or CUDA events recorded around every launch on the stream.
enum class Timer { cupti, events };
const char* to_string(Timer timer);  // "cupti" or "events"
bool parse_timer(const std::string& text, Timer* out);

// The window's views, in tab order (app/gui/panel_views.cpp): the names of --view, a script's
// `view` command and the remembered settings.
const std::vector<std::string>& view_names();
bool is_view_name(const std::string& text);

// The accepted names as the messages list them.
constexpr const char* kPrecisionChoices = "fp32 or bf16";
constexpr const char* kCacheChoices = "cold or warm";
constexpr const char* kTimerChoices = "cupti or events";
constexpr const char* kViewChoices = "speedup, bandwidth, flow, timeline, memory or roofline";

// The one line for a value that is none of the names: "<what> is <choices>", then
// ", got '<got>'" (shortened for the message) when `got` is given.
std::string not_a_choice(const std::string& what, const char* choices,
                         const std::string* got = nullptr);

}  // namespace fl
