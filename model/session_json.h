// Sessions as JSON (schema documented in docs/SESSION_FORMAT.md). Saving goes through the one
// atomic writer (file_io.h): a crash or a full disk never leaves half a recording, and an
// output that is a folder, a device or a file being read is refused. Loading checks the file
// first (a regular file of at most 256 MiB), then parses it as it reads (a SAX parse that builds
// the Session directly: peak memory stays under 3x the file's size, tests/memory), checking
// every field against the schema and the lesson catalog before anything else sees it.
#pragma once

#include <cstdint>
#include <string>

#include "model/file_io.h"  // write_file_atomically, for callers that included it from here
#include "model/results.h"
#include "kernels/status.h"

namespace fl {

std::string session_to_json(const Session& session, int indent = 2);
// Fails with one line naming the problem: not JSON, not a session, a schema version this build
// does not read, or the first field that breaks a rule, by its path and the rule
// ("measurements[12].size: must be between 1 and 268435456 (...), not 0"). The rules are listed
// in docs/SESSION_FORMAT.md, "What the reader refuses".
Status session_from_json(const std::string& text, Session* out);

// Refuses, writing nothing, a session that load_session would refuse ("PATH: not saved, it would
// not load: measurements[4]: repeats measurements[1] ...").
Status save_session(const Session& session, const std::string& path);
Status load_session(const std::string& path, Session* out);

std::string utc_now_iso8601();

// ---- the catalog rules, shared with the peer file's reader (peers.h) ----------------------------

// A name a lesson could have: lowercase letters, digits and '_', starting with a letter, at most
// 64 characters. Every lesson of the catalog has one.
bool is_lesson_id(const std::string& id);
// A lesson this build knows, or one a newer build could (is_lesson_id): recordings of a newer
// build keep loading, and replay serves the lessons it knows. Otherwise "PATH: unknown lesson
// 'Foo Bar', and not a lesson id ...", where `path` names the lesson field.
Status check_lesson_name(const std::string& path, const std::string& lesson);
// One recorded point against the catalog: the lesson's name (at `lesson_path`), then at
// `path` + ".size" a size from 1 to the lesson's largest, ".inner" a row length from 1 to the
// lesson's largest (0 for a lesson without rows), ".level" one of its levels (level < 0: none to
// check) and ".precision" one it has. A lesson this build does not know gets bounds instead:
// sizes to 2^40, row lengths to 2^24, levels to 63.
Status check_recorded_point(const std::string& lesson_path, const std::string& path,
                            const std::string& lesson, int64_t size, int64_t inner, int level,
                            Precision precision);

}  // namespace fl
