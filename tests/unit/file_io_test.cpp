// The one atomic writer, the reader checks and message quoting (model/file_io.h;
// "Files" and "Every reader checks the file first"). Each file fault asserts the message and
// that nothing else in the folder changed. CPU only, in CI.
#include "model/file_io.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "app/measure/replay_backend.h"
#include "model/session_json.h"

namespace fl {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void put(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A folder of its own; `snapshot()` lists every entry with its type and contents (a symlink as
// its target), so a test can assert that nothing but the expected output changed.
class Folder {
 public:
  Folder() {
    path_ = fs::temp_directory_path() / ("fusionlab_file_io_test_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~Folder() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  std::string str(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> out;
    for (const auto& entry : fs::directory_iterator(path_)) {
      const fs::path p = entry.path();
      const std::string name = p.filename().string();
      const fs::file_status st = fs::symlink_status(p);
      if (fs::is_symlink(st))
        out[name] = "link -> " + fs::read_symlink(p).string();
      else if (fs::is_regular_file(st))
        out[name] = "file " + slurp(p);
      else if (fs::is_directory(st))
        out[name] = "folder";
      else
        out[name] = "special";
    }
    return out;
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// ---- messages --------------------------------------------------------------------------------

TEST(MessageQuoting, ControlCharactersAreEscaped) {
  EXPECT_EQ(shorten_for_message("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(shorten_for_message("red \x1b[31mtext"), "red \\x1b[31mtext");
  EXPECT_EQ(shorten_for_message(std::string("nul\0here", 8)), "nul\\x00here");
  EXPECT_EQ(shorten_for_message("del\x7f"), "del\\x7f");
  // A C1 control (U+009B, CSI) and bytes that are not UTF-8 are escaped; real UTF-8 stays.
  EXPECT_EQ(shorten_for_message("\xc2\x9b"
                                "2J"),
            "\\xc2\\x9b2J");
  EXPECT_EQ(shorten_for_message("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(shorten_for_message("µs · gelu×scale"), "µs · gelu×scale");
}

TEST(MessageQuoting, LongTextIsShortenedKeepingItsEnd) {
  const std::string long_path = "/home/" + std::string(300, 'a') + "/recordings/elementwise.json";
  const std::string shown = shorten_for_message(long_path);
  EXPECT_EQ(shown.size(), 80u);
  EXPECT_EQ(shown.rfind("/home/", 0), 0u);
  EXPECT_TRUE(contains(shown, "..."));
  EXPECT_EQ(shown.substr(shown.size() - 16), "elementwise.json");
  // Shortening never cuts a UTF-8 character in two.
  const std::string greek(400, 'x');
  std::string mixed;
  for (int i = 0; i < 100; ++i) mixed += "µ";
  const std::string cut = shorten_for_message(mixed);
  EXPECT_EQ(cut.size(), 77u * 2 + 3);  // 77 two-byte characters and "..."
  EXPECT_EQ(shorten_for_message(greek, kShownPathChars).size(), kShownPathChars);
}

// ---- reading ---------------------------------------------------------------------------------

TEST(CheckedReading, ARegularFileIsRead) {
  Folder dir;
  put(dir / "s.json", "{\"x\": 1}");
  std::string text;
  FileId id;
  ASSERT_TRUE(read_file_checked(dir.str("s.json"), 1024, "session file", &text, &id).ok());
  EXPECT_EQ(text, "{\"x\": 1}");
  FileId again;
  ASSERT_TRUE(file_id_of(dir.str("s.json"), &again));
  EXPECT_EQ(id, again);
}

TEST(CheckedReading, WhatIsNotARegularFileIsNamed) {
  Folder dir;
  fs::create_directories(dir / "folder");
  ASSERT_EQ(::mkfifo(dir.str("fifo").c_str(), 0600), 0);
  std::string text;
  const auto refusal = [&](const std::string& path) {
    const auto start = std::chrono::steady_clock::now();
    const Status st = read_file_checked(path, 1 << 20, "session file", &text);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
        << path << " blocked";
    EXPECT_FALSE(st.ok()) << path;
    return st.message();
  };
  EXPECT_EQ(refusal(dir.str("folder")), dir.str("folder") + ": a folder, not a session file");
  EXPECT_EQ(refusal(dir.str("fifo")),
            dir.str("fifo") + ": a FIFO (named pipe), not a session file");
  EXPECT_EQ(refusal("/dev/zero"), "/dev/zero: a device, not a session file");
  EXPECT_EQ(refusal("/dev/null"), "/dev/null: a device, not a session file");
  EXPECT_EQ(refusal(dir.str("missing.json")),
            dir.str("missing.json") + ": cannot open: No such file or directory");
  EXPECT_FALSE(check_readable_file(dir.str("fifo"), 1 << 20, "script").ok());
  EXPECT_TRUE(
      check_readable_file(FUSIONLAB_SOURCE_DIR "/tests/unit/file_io_test.cpp", 1 << 20, "script")
          .ok());
}

TEST(CheckedReading, TheSizeCapIsCheckedBeforeReading) {
  Folder dir;
  { std::ofstream out(dir / "big.fls"); }
  fs::resize_file(dir / "big.fls", kMaxScriptFileBytes + 1);  // sparse: costs no disk
  std::string text;
  const Status st = read_file_checked(dir.str("big.fls"), kMaxScriptFileBytes, "script", &text);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), dir.str("big.fls") + ": larger than 16 MiB, the limit for a script");
  EXPECT_TRUE(text.empty());
}

TEST(CheckedReading, AnUntrustedPathIsQuotedOnOneShortLine) {
  const std::string evil = "/tmp/\x1b]0;pwned\x07" + std::string(500, 'z') + "\nsecond line";
  std::string text;
  const Status st = read_file_checked(evil, 1024, "script", &text);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\x1b'), std::string::npos) << st.message();
  EXPECT_TRUE(contains(st.message(), "\\x1b]0;pwned\\x07")) << st.message();
  EXPECT_LT(st.message().size(), kShownPathChars + 60) << st.message();
}

TEST(CheckedReading, SessionLoaderAndRecordingUseTheChecks) {
  Folder dir;
  ASSERT_EQ(::mkfifo(dir.str("pipe.json").c_str(), 0600), 0);
  Session s;
  const Status st = load_session(dir.str("pipe.json"), &s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), dir.str("pipe.json") + ": a FIFO (named pipe), not a session file");
  std::unique_ptr<ReplayBackend> backend;
  const Status loaded = load_recording({"/dev/zero"}, &backend);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message(), "/dev/zero: a device, not a session file");
}

// ---- writing ---------------------------------------------------------------------------------

TEST(AtomicWrite, WritesANewFileAndLeavesNothingElse) {
  Folder dir;
  ASSERT_TRUE(write_file_atomically(dir.str("out.json"), "new").ok());
  EXPECT_EQ(dir.snapshot(), (std::map<std::string, std::string>{{"out.json", "file new"}}));
}

TEST(AtomicWrite, ReplacesAFileKeepingItsPermissions) {
  Folder dir;
  put(dir / "out.json", "old");
  fs::permissions(dir / "out.json", fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_TRUE(write_file_atomically(dir.str("out.json"), "new").ok());
  EXPECT_EQ(dir.snapshot(), (std::map<std::string, std::string>{{"out.json", "file new"}}));
  EXPECT_EQ(fs::status(dir / "out.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST(AtomicWrite, WithoutReplaceAnExistingFileIsKept) {
  Folder dir;
  put(dir / "out.json", "old");
  WriteOptions keep;
  keep.replace_existing = false;
  const Status st = write_file_atomically(dir.str("out.json"), "new", keep);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), dir.str("out.json") + " already exists");
  EXPECT_EQ(dir.snapshot(), (std::map<std::string, std::string>{{"out.json", "file old"}}));
  EXPECT_EQ(
      check_output_file(dir.str("out.json"), false, "; pass --force to overwrite it").message(),
      dir.str("out.json") + " already exists; pass --force to overwrite it");
}

// A symlink or a file planted at the names the old writer used (OUT.tmp-PID) or at any name
// beside the output is never followed, truncated or removed.
TEST(AtomicWrite, PlantedTemporaryNamesAreNeverFollowedOrTruncated) {
  Folder dir;
  Folder elsewhere;
  put(elsewhere / "victim", "precious");
  const std::string pid = std::to_string(::getpid());
  fs::create_symlink(elsewhere / "victim", dir / ("out.json.tmp-" + pid));
  fs::create_symlink(elsewhere / "victim", dir / (".out.json.tmp-" + pid));
  put(dir / ("out.json.tmp-" + std::to_string(::getpid() + 1)), "planted file");
  const auto before = dir.snapshot();
  ASSERT_TRUE(write_file_atomically(dir.str("out.json"), "new").ok());
  auto expected = before;
  expected["out.json"] = "file new";
  EXPECT_EQ(dir.snapshot(), expected);
  EXPECT_EQ(slurp(elsewhere / "victim"), "precious");
}

TEST(AtomicWrite, ASymlinkOutputIsWrittenThroughAndStaysALink) {
  Folder dir;
  put(dir / "real.csv", "old");
  fs::create_symlink("real.csv", dir / "link.csv");
  ASSERT_TRUE(write_file_atomically(dir.str("link.csv"), "new").ok());
  EXPECT_EQ(dir.snapshot(), (std::map<std::string, std::string>{{"real.csv", "file new"},
                                                                {"link.csv", "link -> real.csv"}}));
}

TEST(AtomicWrite, ASymlinkToNothingOrToADeviceIsRefused) {
  Folder dir;
  fs::create_symlink(dir / "nowhere.csv", dir / "dangling.csv");
  fs::create_symlink("/dev/null", dir / "null.csv");
  const auto before = dir.snapshot();
  const Status dangling = write_file_atomically(dir.str("dangling.csv"), "x");
  ASSERT_FALSE(dangling.ok());
  EXPECT_EQ(dangling.message(),
            "cannot write " + dir.str("dangling.csv") +
                ": it is a symbolic link to a file that does not exist; give the file itself");
  const Status null = write_file_atomically(dir.str("null.csv"), "x");
  ASSERT_FALSE(null.ok());
  EXPECT_EQ(
      null.message(),
      "cannot write " + dir.str("null.csv") +
          ": it is a symbolic link to a device, not to a regular file, so it is never written");
  EXPECT_EQ(dir.snapshot(), before);
}

TEST(AtomicWrite, OutputsThatAreNotRegularFilesAreRefused) {
  Folder dir;
  fs::create_directories(dir / "folder");
  ASSERT_EQ(::mkfifo(dir.str("fifo").c_str(), 0600), 0);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string socket_path = dir.str("socket");
  ASSERT_LT(socket_path.size(), sizeof(address.sun_path));
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  // A device node of our own where we may make one (root, as in CI); /dev/null otherwise, where
  // nobody but root could replace it anyway.
  std::string device = "/dev/null";
  if (::mknod(dir.str("null-device").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0)
    device = dir.str("null-device");
  const auto before = dir.snapshot();
  const auto refused = [](const std::string& path) {
    const Status st = write_file_atomically(path, "x");  // replace allowed, as with --force
    EXPECT_FALSE(st.ok()) << path;
    EXPECT_FALSE(check_output_file(path, true).ok()) << path;
    return st.message();
  };
  EXPECT_EQ(refused(dir.str("folder")),
            "cannot write " + dir.str("folder") + ": it is a folder; give a file name");
  const std::string never = ", not a regular file, so it is never replaced (not even with --force)";
  EXPECT_EQ(refused(dir.str("fifo")),
            "cannot write " + dir.str("fifo") + ": it is a FIFO (named pipe)" + never);
  EXPECT_EQ(refused(socket_path), "cannot write " + socket_path + ": it is a socket" + never);
  EXPECT_EQ(refused(device), "cannot write " + device + ": it is a device" + never);
  ::close(sock);
  EXPECT_EQ(dir.snapshot(), before);
  struct stat st {};
  ASSERT_EQ(::stat(device.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << device << " was replaced";
}

TEST(AtomicWrite, AMissingFolderIsNamed) {
  Folder dir;
  const Status st = write_file_atomically(dir.str("no/such/out.json"), "x");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "cannot write " + dir.str("no/such/out.json") + ": the folder " +
                              dir.str("no/such") + " does not exist");
  EXPECT_TRUE(dir.snapshot().empty());
}

TEST(AtomicWrite, AReadOnlyFolderLeavesTheOldFile) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "running as root, where a folder's permissions do not stop writes (CI); the "
                    "full-disk and killed-save tests cover a failing write";
  }
  Folder dir;
  put(dir / "out.json", "old");
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  const Status st = write_file_atomically(dir.str("out.json"), "new");
  fs::permissions(dir.path(), fs::perms::owner_all);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "cannot write " + dir.str("out.json") + ": the folder " +
                              dir.path().string() + " is not writable");
  EXPECT_EQ(dir.snapshot(), (std::map<std::string, std::string>{{"out.json", "file old"}}));
}

// In a child process whose file size limit is 4 KiB: a write past it fails with EFBIG (SIGXFSZ
// ignored), as a full disk fails with ENOSPC, in the middle of the data. Returns the child's
// message ("" on success) through a pipe.
std::string write_in_small_child(const std::string& path, const std::string& contents,
                                 bool kill_on_limit, int* wait_status) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    ::signal(SIGXFSZ, kill_on_limit ? SIG_DFL : SIG_IGN);
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const Status st = write_file_atomically(path, contents);
    const std::string message = st.ok() ? "" : st.message();
    (void)!::write(fds[1], message.data(), message.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string message;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof(buffer))) > 0;) message.append(buffer, n);
  ::close(fds[0]);
  ::waitpid(child, wait_status, 0);
  return message;
}

TEST(AtomicWrite, AWriteThatFailsMidwayLeavesTheOldFileAndNoTemporary) {
  Folder dir;
  put(dir / "out.json", "old");
  int status = 0;
  const std::string message =
      write_in_small_child(dir.str("out.json"), std::string(1 << 20, 'x'), false, &status);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(message, "cannot write " + dir.str("out.json") +
                         ": the file is larger than this process may write (File too large)");
  EXPECT_FALSE(contains(message, ".tmp-"))
      << "the message names the output, not the temporary file";
  EXPECT_EQ(dir.snapshot(), (std::map<std::string, std::string>{{"out.json", "file old"}}));
}

TEST(AtomicWrite, AProcessKilledInTheMiddleOfASaveLeavesTheOldFile) {
  Folder dir;
  put(dir / "out.json", "old");
  int status = 0;
  write_in_small_child(dir.str("out.json"), std::string(1 << 20, 'x'), true, &status);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child should have been killed by SIGXFSZ mid-write";
  EXPECT_EQ(WTERMSIG(status), SIGXFSZ);
  // The output is untouched; at most a hidden temporary file of the dead process remains.
  const auto after = dir.snapshot();
  EXPECT_EQ(after.at("out.json"), "file old");
  for (const auto& [name, what] : after) {
    if (name != "out.json") EXPECT_EQ(name.rfind(".out.json.tmp-", 0), 0u) << name;
  }
}

TEST(AtomicWrite, AFileBeingReadIsNeverReplaced) {
  Folder dir;
  put(dir / "recording.json", "recorded");
  fs::create_symlink("recording.json", dir / "alias.json");
  {
    ReadingGuard reading({dir.str("recording.json")});
    const Status st = write_file_atomically(dir.str("recording.json"), "new");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message(), "cannot write " + dir.str("recording.json") +
                                ": it is a file this command is reading; write to another name");
    // By another name (device + inode), too.
    EXPECT_FALSE(write_file_atomically(dir.str("alias.json"), "new").ok());
    EXPECT_EQ(slurp(dir / "recording.json"), "recorded");
  }
  EXPECT_TRUE(write_file_atomically(dir.str("recording.json"), "new").ok()) << "the guard is gone";
}

TEST(AtomicWrite, SaveSessionOntoAnOpenedRecordingIsRefused) {
  Folder dir;
  Session s;
  s.app_version = "test";
  s.device.name = "Test GPU";
  Measurement m;
  m.lesson = "gelu_scale";
  m.size = 1024;
  m.level_name = "unfused";
  m.check.passed = true;
  m.chain_time_us.median = 1;
  s.measurements.push_back(m);
  ASSERT_TRUE(save_session(s, dir.str("rec.json")).ok());
  const std::string saved = slurp(dir / "rec.json");
  std::unique_ptr<ReplayBackend> opened;
  ASSERT_TRUE(load_recording({dir.path().string()}, &opened).ok());
  const Status st = save_session(s, dir.str("rec.json"));
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st.message(), "a file this command is reading")) << st.message();
  EXPECT_EQ(slurp(dir / "rec.json"), saved);
  opened.reset();
  EXPECT_TRUE(save_session(s, dir.str("rec.json")).ok()) << "closed recordings can be saved over";
}

}  // namespace
}  // namespace fl
