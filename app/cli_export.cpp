// `fusionlab export-trace` and `fusionlab export-csv`: recorded sessions to a Chrome trace
// (Perfetto, chrome://tracing) or a CSV, without a GPU or a window (docs/EXPORT.md).
//
// Inputs are read exactly as --replay reads them (files, or folders of .json files; one GPU),
// so a bad file is refused with the same one line naming it. The measurements of every file are
// then exported in order, all of them: an export shows what was recorded, repeats included.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "app/cli.h"
#include "app/measure/export.h"
#include "app/measure/replay_backend.h"
#include "app/measure/session_json.h"
#include "app/measure/sizes.h"

namespace fl {
namespace {

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "fusionlab %s: %s\n", command, message.c_str());
  return 1;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Checked before any input is read, so a mistake in -o costs nothing and never half-writes.
Status check_output(const std::string& out, bool force) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  if (fs::is_directory(st)) return Status::Error(out + " is a folder; give a file name with -o");
  if (fs::exists(st) && !force) {
    return Status::Error(out + " already exists; pass --force to overwrite it");
  }
  fs::path folder = fs::path(out).parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, ec)) {
    return Status::Error("cannot write " + out + ": the folder " + folder.string() + " does not exist");
  }
  // The temporary file goes beside the output, so the folder itself must be writable.
  if (::access(folder.c_str(), W_OK) != 0) {
    return Status::Error("cannot write " + out + ": the folder " + folder.string() + " is not writable");
  }
  return Status::Ok();
}

// Loads the inputs as --replay does (checks included), then concatenates every file's
// measurements in order into one session with the first file's device facts.
Status load_inputs(const std::vector<std::string>& inputs, Session* out) {
  std::unique_ptr<ReplayBackend> recording;
  FL_TRY(load_recording(inputs, &recording));
  Session merged;
  bool first = true;
  for (const std::string& file : recording->summary().origins) {
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
    return Status::Error("no measurement of lesson '" + o.lesson + "' in the input; it holds " +
                         join(lessons));
  }
  if (kept.empty()) {
    return Status::Error("no measurement at size " + o.size + (o.lesson.empty() ? "" : " of " + o.lesson) +
                         " in the input; recorded sizes: " + join(sizes));
  }
  session->measurements = std::move(kept);
  return Status::Ok();
}

// The steps both commands share: check -o, load, filter.
Status prepare(const ExportOptions& o, Session* session) {
  FL_TRY(check_output(o.out, o.force));
  FL_TRY(load_inputs(o.inputs, session));
  return apply_filters(o, session);
}

void add_common_options(CLI::App* command, ExportOptions* o, const char* output_type) {
  command->add_option("sessions", o->inputs, "Session files, or folders of .json session files (one GPU)")
      ->required()
      ->type_name("SESSION.json");
  command->add_option("-o,--out", o->out, "Output file")->required()->type_name(output_type);
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
  return command;
}

CLI::App* add_export_csv_command(CLI::App* app, ExportOptions* o) {
  CLI::App* command = app->add_subcommand(
      "export-csv", "Write recorded sessions as CSV: one row per (lesson, size, level, launch)");
  add_common_options(command, o, "OUT.csv");
  return command;
}

int run_export_trace(const ExportOptions& o) {
  const char* const name = "export-trace";
  const bool gzip = ends_with(o.out, ".gz");
  if (gzip && !trace_gzip_available()) {
    return fail(name, "cannot write " + o.out + ": this build has no zlib, so it cannot write .gz "
                      "files (install zlib1g-dev and rebuild, or export plain .json)");
  }
  Session session;
  if (Status st = prepare(o, &session); !st.ok()) return fail(name, st.message());
  TraceOptions options;
  options.gzip = gzip;
  if (Status st = export_trace(session, o.out, options); !st.ok()) return fail(name, st.message());
  size_t records = 0, synthesized = 0;
  for (const Measurement& m : session.measurements) {
    records += m.records.size();
    if (m.records.empty()) ++synthesized;
  }
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(o.out, ec);
  std::fprintf(stderr, "wrote %s: %zu measurements, %zu kernel records, %s\n", o.out.c_str(),
               session.measurements.size(), records,
               ec ? "size unknown" : format_bytes(static_cast<double>(bytes)).c_str());
  if (synthesized > 0) {
    std::fprintf(stderr, "note: %zu measurements have no CUPTI records (older sessions); their "
                         "kernels are drawn from median launch times, marked synthesized\n",
                 synthesized);
  }
  return 0;
}

int run_export_csv(const ExportOptions& o) {
  const char* const name = "export-csv";
  Session session;
  if (Status st = prepare(o, &session); !st.ok()) return fail(name, st.message());
  if (Status st = export_csv(session.measurements, o.out); !st.ok()) return fail(name, st.message());
  size_t rows = 0;
  for (const Measurement& m : session.measurements) rows += m.launches.size();
  std::fprintf(stderr, "wrote %s: %zu rows\n", o.out.c_str(), rows);
  return 0;
}

}  // namespace fl
