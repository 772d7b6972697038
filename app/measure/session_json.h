// Sessions as JSON (schema documented in docs/SESSION_FORMAT.md). Saving goes through the one
// atomic writer (file_io.h): a crash or a full disk never leaves half a recording, and an
// output that is a folder, a device or a file being read is refused. Loading checks the file
// first (a regular file of at most 256 MiB).
#pragma once

#include <string>

#include "app/measure/file_io.h"  // write_file_atomically, for callers that included it from here
#include "app/measure/results.h"
#include "kernels/status.h"

namespace fl {

std::string session_to_json(const Session& session, int indent = 2);
// Fails with one line naming the problem (not JSON, wrong version, missing field, ...).
Status session_from_json(const std::string& text, Session* out);

Status save_session(const Session& session, const std::string& path);
Status load_session(const std::string& path, Session* out);

std::string utc_now_iso8601();

}  // namespace fl
