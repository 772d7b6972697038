// `fusionlab export-trace` and `fusionlab export-csv`: recorded sessions to a Chrome trace
// (Perfetto, chrome://tracing) or a CSV, without a GPU or a window (docs/EXPORT.md).
//
// Inputs are read exactly as --replay reads them (files, or folders of .json files; one GPU),
// so a bad file is refused with the same one line naming it. The measurements of every file are
// then exported in order, all of them: an export shows what was recorded, repeats included.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <set>

#include "app/cli.h"
#include "app/measure/export.h"
#include "model/file_io.h"
#include "app/measure/replay_backend.h"
#include "model/session_json.h"
#include "model/sizes.h"

namespace fl {
namespace {

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "fusionlab %s: %s\n", command, message.c_str());
  return kExitFailure;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Loads the inputs as --replay does (checks included), then concatenates every file's
// measurements in order into one session with the first file's device facts. `reading` keeps the
// input files marked as being read until the output is written, so -o can never replace one.
Status load_inputs(const std::vector<std::string>& inputs, Session* out, ReadingGuard* reading) {
  std::unique_ptr<ReplayBackend> recording;
  FL_TRY(load_recording(inputs, &recording));
  const std::vector<std::string>& files = recording->summary().origins;
  *reading = ReadingGuard(files);
  Session merged;
  bool first = true;
  for (const std::string& file : files) {
    Session s;
    FL_TRY(load_session(file, &s));
    if (first) {
      merged = s;
      merged.measurements.clear();
      first = false;
    }
    for (Measurement& m : s.measurements) merged.measurements.push_back(std::move(m));
  }
  *out = std::move(merged);
  return Status::Ok();
}

std::string join(const std::set<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// Keeps the measurements of --lesson and --size; refuses a filter that keeps nothing, saying what
// the recording holds instead.
Status apply_filters(const ExportOptions& o, Session* session) {
  int64_t size = 0;
  if (!o.size.empty()) FL_TRY(parse_size(o.size, &size).with_context("--size"));
  std::set<std::string> lessons, sizes;
  std::vector<Measurement> kept;
  for (Measurement& m : session->measurements) {
    lessons.insert(m.lesson);
    if (!o.lesson.empty() && m.lesson != o.lesson) continue;
    sizes.insert(format_size(m.size));
    if (!o.size.empty() && m.size != size) continue;
    kept.push_back(std::move(m));
  }
  if (!o.lesson.empty() && lessons.count(o.lesson) == 0) {
    return Status::Error("no measurement of lesson '" + shorten_for_message(o.lesson) +
                         "' in the input; it holds " + join(lessons));
  }
  if (kept.empty()) {
    return Status::Error("no measurement at size " + shorten_for_message(o.size) +
                         (o.lesson.empty() ? "" : " of " + shorten_for_message(o.lesson)) +
                         " in the input; recorded sizes: " + join(sizes));
  }
  session->measurements = std::move(kept);
  return Status::Ok();
}

// The steps both commands share: check -o (before anything is read, so a mistake costs nothing),
// load, check -o again now that the inputs are known (an output that is one of them is refused),
// filter.
// The options' values, checked before any file is opened: a bad --size is a usage error (exit 2).
int check_option_values(const char* command, const ExportOptions& o) {
  int64_t size = 0;
  if (o.size.empty()) return kExitOk;
  if (Status st = parse_size(o.size, &size); !st.ok()) {
    std::fprintf(stderr, "fusionlab %s: --size: %s\n", command, st.message().c_str());
    return kExitUsage;
  }
  return kExitOk;
}

Status prepare(const ExportOptions& o, Session* session, ReadingGuard* reading) {
  const bool to_stdout = is_stdout_name(o.out);
  const char* const hint = "; pass --force to overwrite it";
  if (!to_stdout) FL_TRY(check_output_file(o.out, o.force, hint));
  FL_TRY(load_inputs(o.inputs, session, reading));
  if (!to_stdout) FL_TRY(check_output_file(o.out, o.force, hint));
  return apply_filters(o, session);
}

void add_common_options(CLI::App* command, ExportOptions* o, const char* output_type) {
  command
      ->add_option("sessions", o->inputs,
                   "Session files, or folders of .json session files (one GPU)")
      ->required()
      ->type_name("SESSION.json");
  command->add_option("-o,--out", o->out, "Output file; - writes to standard output")
      ->required()
      ->type_name(output_type);
  command->add_option("--lesson", o->lesson, "Only this lesson");
  command->add_option("--size", o->size, "Only this size, e.g. 64M or 1000003");
  command->add_flag("--force", o->force, "Overwrite the output if it exists");
}

}  // namespace

CLI::App* add_export_trace_command(CLI::App* app, ExportOptions* o) {
  CLI::App* command = app->add_subcommand(
      "export-trace",
      "Write recorded sessions' CUPTI kernel records as a Chrome trace (Perfetto, "
      "chrome://tracing); .gz output is gzip-compressed");
  add_common_options(command, o, "OUT.json[.gz]");
  command
      ->add_option("--peers", o->peers,
                   "A PyTorch peer file (scripts/peers.py): its medians for the sessions' lessons "
                   "go into the trace's otherData")
      ->type_name("PEERS.json");
  return command;
}

CLI::App* add_export_csv_command(CLI::App* app, ExportOptions* o) {
  CLI::App* command = app->add_subcommand(
      "export-csv", "Write recorded sessions as CSV: one row per (lesson, size, level, launch)");
  add_common_options(command, o, "OUT.csv");
  command
      ->add_option("--peers", o->peers,
                   "A PyTorch peer file (scripts/peers.py): its rows for the sessions' lessons "
                   "follow, level \"peer\"")
      ->type_name("PEERS.json");
  return command;
}

int run_export_trace(const ExportOptions& o) {
  const char* const name = "export-trace";
  if (const int code = check_option_values(name, o); code != kExitOk) return code;
  const bool to_stdout = is_stdout_name(o.out);
  const bool gzip = !to_stdout && ends_with(o.out, ".gz");
  if (gzip && !trace_gzip_available()) {
    return fail(name, "cannot write " + shorten_for_message(o.out, kShownPathChars) +
                          ": this build has no zlib, so it cannot write .gz files (install "
                          "zlib1g-dev and rebuild, or export plain .json)");
  }
  Session session;
  ReadingGuard reading;
  if (Status st = prepare(o, &session, &reading); !st.ok()) return fail(name, st.message());
  std::string bytes;
  PeerFile peers;
  if (!o.peers.empty()) {
    if (Status st = load_peer_file(o.peers, &peers); !st.ok()) return fail(name, st.message());
  }
  if (Status st = trace_bytes(session, gzip, &bytes, o.peers.empty() ? nullptr : &peers);
      !st.ok()) {
    return fail(name, st.message());
  }
  WriteOptions write;
  write.replace_existing = o.force;
  const Status written =
      to_stdout ? write_to_stdout(bytes) : write_file_atomically(o.out, bytes, write);
  if (!written.ok()) return fail(name, written.message());
  size_t records = 0, synthesized = 0;
  for (const Measurement& m : session.measurements) {
    records += m.records.size();
    if (m.records.empty()) ++synthesized;
  }
  std::fprintf(stderr, "wrote %s: %zu measurements, %zu kernel records, %s\n",
               to_stdout ? "the trace to standard output"
                         : shorten_for_message(o.out, kShownPathChars).c_str(),
               session.measurements.size(), records,
               format_bytes(static_cast<double>(bytes.size())).c_str());
  if (synthesized > 0) {
    std::fprintf(stderr,
                 "note: %zu measurements have no CUPTI records (older sessions); their "
                 "kernels are drawn from median launch times, marked synthesized\n",
                 synthesized);
  }
  return kExitOk;
}

int run_export_csv(const ExportOptions& o) {
  const char* const name = "export-csv";
  if (const int code = check_option_values(name, o); code != kExitOk) return code;
  const bool to_stdout = is_stdout_name(o.out);
  Session session;
  ReadingGuard reading;
  if (Status st = prepare(o, &session, &reading); !st.ok()) return fail(name, st.message());
  PeerFile peers;
  if (!o.peers.empty()) {
    if (Status st = load_peer_file(o.peers, &peers); !st.ok()) return fail(name, st.message());
  }
  const std::string csv = measurements_csv(session, o.peers.empty() ? nullptr : &peers);
  WriteOptions write;
  write.replace_existing = o.force;
  const Status written =
      to_stdout ? write_to_stdout(csv) : write_file_atomically(o.out, csv, write);
  if (!written.ok()) return fail(name, written.message());
  const size_t rows = static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')) - 1;
  std::fprintf(stderr, "wrote %s: %zu rows\n",
               to_stdout ? "the CSV to standard output"
                         : shorten_for_message(o.out, kShownPathChars).c_str(),
               rows);
  return kExitOk;
}

}  // namespace fl
