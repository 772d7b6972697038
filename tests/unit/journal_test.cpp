// The crash journal (model/journal.h): records written in batches and read back, a journal cut
// short or damaged read up to its last whole record with one sentence, the lock that tells a
// running window's journal from an orphan, and the clean-up of old ones.
#include "model/journal.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/session_json.h"

namespace fl {
namespace {

namespace fs = std::filesystem;

Session head() {
  Session s;
  s.app_version = "0.1.0";
  s.created_utc = "2026-11-26T05:00:00Z";
  s.backend = "recorded";
  s.device.usable = true;
  s.device.name = "NVIDIA H100 80GB HBM3";
  s.device.cc_major = 9;
  s.device.sm_count = 132;
  s.device.l2_bytes = 50 << 20;
  s.device.memory_bytes = int64_t(80) << 30;
  s.device.driver_version = 13000;
  s.device.runtime_version = 13000;
  s.device.copy_bandwidth = {{1 << 20, CacheMode::cold, 1200.5}};
  return s;
}

Measurement at(int64_t size, int level, double us) {
  Measurement m;
  m.lesson = "gelu_scale";
  m.size = size;
  m.level = level;
  m.level_name = level == 0 ? "unfused" : "fused";
  m.timing_method = "cupti_activity";
  m.repetitions = 50;
  m.chain_time_us = {us, us, us, us, us, 50};
  m.check = {1e-8, 1e-7, 0, 1e-5, true};
  LaunchResult l;
  l.textbook = {"gelu", 4 << 20, 4 << 20, 1e6};
  l.time_us = m.chain_time_us;
  m.launches.push_back(l);
  return m;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = (fs::temp_directory_path() /
               ("fl_journal_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                  .string();
    fs::remove_all(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }
  std::string folder_;
};

TEST_F(JournalTest, WritesInBatchesAndReadsEveryRecordBack) {
  std::unique_ptr<Journal> j;
  ASSERT_TRUE(Journal::create(folder_, &j).ok());
  const std::string path = j->path();
  j->append(head(), {at(1024, 0, 10), at(1024, 1, 5)});
  j->flush(100.0);  // the first write of records: due at once
  EXPECT_EQ(j->records_written(), 2);
  j->append(head(), {at(4096, 0, 20)});
  j->flush(100.5);  // within kJournalFlushSeconds: held back, a batch
  EXPECT_EQ(j->records_written(), 2);
  j->append(head(), {at(1024, 1, 4)});  // measured again: replaces the earlier one
  j->flush(101.6);
  EXPECT_EQ(j->records_written(), 4);
  RecoveredJournal r;
  ASSERT_TRUE(read_journal(path, &r).ok());
  EXPECT_EQ(r.records, 4);
  EXPECT_TRUE(r.damage.empty()) << r.damage;
  ASSERT_EQ(r.session.measurements.size(), 3u);
  EXPECT_EQ(r.session.measurements.back().chain_time_us.median, 4);
  EXPECT_EQ(r.session.device.name, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(r.session.device.copy_bandwidth.empty()) << "not repeated in every record";
  // What it reopens saves as a session that loads.
  Session reloaded;
  EXPECT_TRUE(session_from_json(session_to_json(r.session), &reloaded).ok());
  j->finish();
  EXPECT_FALSE(fs::exists(path)) << "an orderly end removes the journal";
}

TEST_F(JournalTest, ARunningWindowsJournalIsNoOrphanAndAKilledOnesIs) {
  std::unique_ptr<Journal> mine;
  ASSERT_TRUE(Journal::create(folder_, &mine).ok());
  EXPECT_TRUE(orphaned_journals(folder_).empty()) << "held by this process";
  // A child journals two measurements and is killed without a chance to clean up.
  const pid_t child = ::fork();
  if (child == 0) {
    std::unique_ptr<Journal> j;
    if (!Journal::create(folder_, &j).ok()) ::_exit(3);
    j->append(head(), {at(1024, 0, 10), at(1024, 1, 5)});
    j->flush(0, true);
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  for (int i = 0; i < 200 && orphaned_journals(folder_).empty(); ++i) {
    // While the child lives its journal is locked: still no orphan.
    if (i == 20) ::kill(child, SIGKILL);
    ::usleep(10000);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::vector<std::string> orphans = orphaned_journals(folder_);
  ASSERT_EQ(orphans.size(), 1u);
  EXPECT_NE(orphans[0], mine->path());
  RecoveredJournal r;
  ASSERT_TRUE(read_journal(orphans[0], &r).ok());
  EXPECT_EQ(r.session.measurements.size(), 2u);
}

TEST_F(JournalTest, ATruncatedJournalRecoversUpToItsLastWholeRecord) {
  std::unique_ptr<Journal> j;
  ASSERT_TRUE(Journal::create(folder_, &j).ok());
  const std::string path = j->path();
  j->append(head(), {at(1024, 0, 10), at(1024, 1, 5), at(4096, 0, 20)});
  j->flush(0, true);
  j.reset();
  const std::string whole = read_all(path);
  // Cut in the middle of the third record: every cut point inside it keeps the first two.
  const size_t third = whole.rfind('\n', whole.size() - 2) + 1;
  for (size_t cut : {third + 1, third + 40, whole.size() - 1}) {
    fs::resize_file(path, cut);
    RecoveredJournal r;
    ASSERT_TRUE(read_journal(path, &r).ok());
    EXPECT_EQ(r.records, 2) << "cut at " << cut;
    EXPECT_EQ(r.session.measurements.size(), 2u);
    EXPECT_NE(r.damage.find("cut short"), std::string::npos) << r.damage;
    EXPECT_EQ(r.damage.find('\n'), std::string::npos) << "one line";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << whole;
  }
  // A flipped byte in the second record: only the first is kept.
  std::string damaged = whole;
  const size_t second = whole.find('\n', whole.find('\n') + 1) + 1;
  damaged[second + 60] ^= 0x20;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
  RecoveredJournal r;
  ASSERT_TRUE(read_journal(path, &r).ok());
  EXPECT_EQ(r.records, 1);
  EXPECT_NE(r.damage.find("is damaged"), std::string::npos) << r.damage;
  EXPECT_NE(r.damage.find("the 1 measurement before it"), std::string::npos) << r.damage;
}

TEST_F(JournalTest, AFileThatIsNoJournalIsRefusedInOneLine) {
  fs::create_directories(folder_);
  const std::string path = folder_ + "/window-x.journal";
  std::ofstream(path) << "{\"format\": \"fusionlab-session\"}\n";
  RecoveredJournal r;
  const Status st = read_journal(path, &r);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a Fusion Lab crash journal"), std::string::npos);
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
}

TEST_F(JournalTest, OldAndSurplusOrphansAreCleanedUp) {
  fs::create_directories(folder_);
  for (int i = 0; i < 12; ++i) {
    const std::string path =
        folder_ + "/window-2026010" + std::to_string(i % 10) + "-" + std::to_string(i) + ".journal";
    std::ofstream(path) << "fusionlab-journal 1\n";
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(i));
  }
  const std::string old = folder_ + "/window-old.journal";
  std::ofstream(old) << "fusionlab-journal 1\n";
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(24 * 30));
  std::ofstream(folder_ + "/notes.txt") << "not a journal\n";
  EXPECT_EQ(clean_journals(folder_, 14, 8), 5);
  EXPECT_EQ(orphaned_journals(folder_).size(), 8u);
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(folder_ + "/notes.txt")) << "only journals are touched";
}

TEST(JournalFolder, FollowsXdgStateHome) {
  const char* before = std::getenv("XDG_STATE_HOME");
  const std::string saved = before ? before : "";
  setenv("XDG_STATE_HOME", "/tmp/state", 1);
  EXPECT_EQ(journal_folder(), "/tmp/state/fusionlab/journal");
  setenv("XDG_STATE_HOME", "relative", 1);  // the spec says to ignore a relative path
  EXPECT_NE(journal_folder().find("/.local/state/fusionlab/journal"), std::string::npos);
  if (before)
    setenv("XDG_STATE_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_STATE_HOME");
}

}  // namespace
}  // namespace fl
