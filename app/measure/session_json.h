// Sessions as JSON (schema documented in docs/SESSION_FORMAT.md). Writing is atomic: a
// temporary file beside the target, then rename, so a crash never leaves half a recording.
#pragma once

#include <string>

#include "app/measure/results.h"
#include "kernels/status.h"

namespace fl {

std::string session_to_json(const Session& session, int indent = 2);
// Fails with one line naming the problem (not JSON, wrong version, missing field, ...).
Status session_from_json(const std::string& text, Session* out);

Status save_session(const Session& session, const std::string& path);
Status load_session(const std::string& path, Session* out);

// Writes `contents` to `path` atomically (temp file in the same folder, fsync, rename).
Status write_file_atomically(const std::string& path, const std::string& contents);

std::string utc_now_iso8601();

}  // namespace fl
