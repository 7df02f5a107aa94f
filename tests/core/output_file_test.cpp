// OutputFile (src/core/output_file.h): what -o may replace (only regular files, or nothing),
// symlinks written through, the temp file gone after every failure and after SIGINT / SIGTERM.
#include "core/error.h"
#include "core/output_file.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tern {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path & p) {
    std::ifstream     in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Names in dir other than `keep` (temp files left behind show up here).
std::vector<std::string> others(const fs::path & dir, const std::vector<std::string> & keep) {
    std::vector<std::string> out;
    for (const auto & e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (std::find(keep.begin(), keep.end(), name) == keep.end()) out.push_back(name);
    }
    return out;
}

void write_all(const std::string & path, const std::string & text) {
    OutputFile out(path);
    out.write(text.data(), text.size());
    out.commit();
}

ErrorKind kind_of_failure(const std::function<void()> & fn, std::string * message = nullptr) {
    try {
        fn();
    } catch (const Error & e) {
        if (message) *message = e.what();
        return e.kind();
    }
    ADD_FAILURE() << "no error";
    return ErrorKind::internal;
}

TEST(OutputFile, CreatesANewFileAndLeavesNothingElse) {
    const auto dir = test::temp_dir("out-new");
    write_all((dir / "a.bin").string(), "hello");
    EXPECT_EQ(slurp(dir / "a.bin"), "hello");
    EXPECT_EQ(others(dir, {"a.bin"}), std::vector<std::string>{});
    struct stat st {};
    ASSERT_EQ(::stat((dir / "a.bin").c_str(), &st), 0);
    const mode_t mask = ::umask(0);
    ::umask(mask);
    EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask) << "a new file gets the usual mode, not mkstemp's 0600";
}

TEST(OutputFile, ReplacesARegularFileKeepingItsMode) {
    const auto dir = test::temp_dir("out-replace");
    const auto p   = dir / "a.bin";
    std::ofstream(p) << "old content";
    ASSERT_EQ(::chmod(p.c_str(), 0640), 0);
    write_all(p.string(), "new");
    EXPECT_EQ(slurp(p), "new");
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640u);
    EXPECT_EQ(others(dir, {"a.bin"}), std::vector<std::string>{});
}

TEST(OutputFile, WithoutCommitTheTargetIsUntouchedAndTheTempFileGone) {
    const auto dir = test::temp_dir("out-abort");
    const auto p   = dir / "a.bin";
    std::ofstream(p) << "old";
    {
        OutputFile out(p.string());
        out.write("new bytes", 9);
        EXPECT_TRUE(fs::exists(out.temp_path()));
    }
    EXPECT_EQ(slurp(p), "old");
    EXPECT_EQ(others(dir, {"a.bin"}), std::vector<std::string>{});
}

TEST(OutputFile, RefusesDirectoriesDevicesAndFifosWithoutTouchingThem) {
    const auto dir = test::temp_dir("out-refuse");
    const auto sub = dir / "sub";
    fs::create_directory(sub);
    const auto fifo = dir / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::string msg;
    EXPECT_EQ(kind_of_failure([&] { OutputFile out(sub.string()); }, &msg), ErrorKind::invalid_argument);
    EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
    EXPECT_EQ(kind_of_failure([&] { OutputFile out(fifo.string()); }, &msg), ErrorKind::invalid_argument);
    EXPECT_NE(msg.find("FIFO"), std::string::npos) << msg;
    EXPECT_EQ(kind_of_failure([&] { OutputFile out("/dev/null"); }, &msg), ErrorKind::invalid_argument);
    EXPECT_NE(msg.find("character device"), std::string::npos) << msg;
    EXPECT_EQ(kind_of_failure([] { check_output_path("/dev/full"); }), ErrorKind::invalid_argument);
    EXPECT_TRUE(fs::is_fifo(fifo));
    EXPECT_TRUE(fs::is_character_file("/dev/null"));
    EXPECT_TRUE(fs::is_empty(sub));
    EXPECT_EQ(others(dir, {"sub", "fifo"}), std::vector<std::string>{}) << "no stray temp file next to them";
}

TEST(OutputFile, WritesThroughSymlinksAndKeepsThem) {
    const auto dir = test::temp_dir("out-link");
    std::ofstream(dir / "real.bin") << "old";
    fs::create_symlink("real.bin", dir / "link.bin");
    write_all((dir / "link.bin").string(), "new");
    EXPECT_TRUE(fs::is_symlink(dir / "link.bin"));
    EXPECT_EQ(slurp(dir / "real.bin"), "new");
    // A dangling link creates its target; a link to a FIFO is refused and says so.
    fs::create_symlink("made.bin", dir / "dangling.bin");
    write_all((dir / "dangling.bin").string(), "made");
    EXPECT_TRUE(fs::is_symlink(dir / "dangling.bin"));
    EXPECT_EQ(slurp(dir / "made.bin"), "made");
    ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
    fs::create_symlink("fifo", dir / "to-fifo");
    std::string msg;
    EXPECT_EQ(kind_of_failure([&] { OutputFile out((dir / "to-fifo").string()); }, &msg), ErrorKind::invalid_argument);
    EXPECT_NE(msg.find("symlink"), std::string::npos) << msg;
    EXPECT_EQ(others(dir, {"real.bin", "link.bin", "dangling.bin", "made.bin", "fifo", "to-fifo"}), std::vector<std::string>{});
}

TEST(OutputFile, AMissingFolderIsAnIoErrorNamingIt) {
    const auto  dir = test::temp_dir("out-nofolder");
    std::string msg;
    EXPECT_EQ(kind_of_failure([&] { OutputFile out((dir / "no" / "x.bin").string()); }, &msg), ErrorKind::io);
    EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
}

// A full disk, simulated with RLIMIT_FSIZE in a child process: an Error(io), the target as it was,
// no temp file.
TEST(OutputFile, AWriteErrorRemovesTheTempFile) {
    const auto dir = test::temp_dir("out-full");
    const auto p   = dir / "a.bin";
    std::ofstream(p) << "old";
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        std::signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim{4096, 4096};
        ::setrlimit(RLIMIT_FSIZE, &lim);
        const std::string big(1 << 20, 'x');
        try {
            OutputFile out(p.string());
            out.write(big.data(), big.size());
            out.commit();
        } catch (const Error & e) {
            ::_exit(e.kind() == ErrorKind::io && std::string(e.what()).find(p.string()) != std::string::npos ? 7 : 3);
        }
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 7) << "expected Error(io) naming the file";
    EXPECT_EQ(slurp(p), "old");
    EXPECT_EQ(others(dir, {"a.bin"}), std::vector<std::string>{});
}

// SIGINT and SIGTERM while a file is being written: the process still dies of the signal (the
// shell sees 130 / 143), and the temp file is gone.
TEST(OutputFile, SigintAndSigtermRemoveTheTempFile) {
    for (int sig : {SIGINT, SIGTERM}) {
        const auto  dir = test::temp_dir("out-signal");
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            OutputFile out((dir / "a.bin").string());
            out.write("partial", 7);
            if (!fs::exists(out.temp_path())) ::_exit(5);
            ::raise(sig);
            ::_exit(6);  // not reached
        }
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
        EXPECT_EQ(WTERMSIG(status), sig);
        EXPECT_EQ(others(dir, {}), std::vector<std::string>{}) << "signal " << sig;
    }
}

}  // namespace
}  // namespace tern
