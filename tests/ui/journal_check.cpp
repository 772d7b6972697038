// fusionlab_journal_check JOURNAL SESSION MIN: every measurement of the crash journal JOURNAL (a
// copy taken while the window ran) is in SESSION (what `--recover` reopened, saved by the script)
// with the same times, and JOURNAL held at least MIN of them. The crash test (crash_recovery.sh)
// runs it; exit 0 when all are there, 1 otherwise, with one line on what is missing.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/journal.h"
#include "model/session_json.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: fusionlab_journal_check JOURNAL SESSION MIN\n");
    return 2;
  }
  fl::RecoveredJournal journal;
  if (fl::Status st = fl::read_journal(argv[1], &journal); !st.ok()) {
    std::fprintf(stderr, "journal_check: %s\n", st.message().c_str());
    return 1;
  }
  fl::Session session;
  if (fl::Status st = fl::load_session(argv[2], &session); !st.ok()) {
    std::fprintf(stderr, "journal_check: %s\n", st.message().c_str());
    return 1;
  }
  const size_t min = static_cast<size_t>(std::atoi(argv[3]));
  if (journal.session.measurements.size() < min) {
    std::fprintf(stderr, "journal_check: the journal holds %zu measurements, fewer than %zu\n",
                 journal.session.measurements.size(), min);
    return 1;
  }
  for (const fl::Measurement& m : journal.session.measurements) {
    bool found = false;
    for (const fl::Measurement& s : session.measurements) {
      found = found || (s.lesson == m.lesson && s.size == m.size && s.inner == m.inner &&
                        s.level == m.level && s.precision == m.precision && s.cache == m.cache &&
                        s.chain_time_us.median == m.chain_time_us.median);
    }
    if (!found) {
      std::fprintf(stderr, "journal_check: %s size %lld level %d (%s, %s) is not in %s\n",
                   m.lesson.c_str(), static_cast<long long>(m.size), m.level,
                   fl::to_string(m.precision), fl::to_string(m.cache), argv[2]);
      return 1;
    }
  }
  std::printf("journal_check: all %zu journalled measurements are in the recovered session (%zu)\n",
              journal.session.measurements.size(), session.measurements.size());
  return 0;
}
