// Progress for long CPU work (issue 56): on a terminal, once the work has taken a second, a bar on
// stderr (prompt processing, perplexity with its running estimate, bench's warm-up and runs); from
// the start for synth (its first tensor alone takes 18 s for bitnet-2b4t: the clock is redrawn
// while it is made); in logs and pipes, none.
#include "cli_util.h"
#include "tty_process.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

using test::has;
using test::tern;
using test::tiny_model;

// A text of ~3,600 tokens of tern's byte vocabulary (a prompt of it takes ~2.5 s with the reference
// kernels and -b 1 on a quiet machine: the bar shows after 1 s).
std::string long_text() {
    static const std::string path = [] {
        std::string text;
        for (int i = 0; i < 60; ++i) text += "It is a way I have of driving off the spleen and regulating the circulation. ";
        const std::string p = (test::temp_dir("progress-text") / "t.txt").string();
        std::ofstream(p) << text;
        return p;
    }();
    return path;
}

std::string run_on_tty(const std::vector<std::string> & args) {
    // The reference kernels on every machine: the work must outlast the bar's first second, and
    // the SIMD kernels finish perplexity's 1,024 tokens in under one (AVX-512, 2 threads).
    setenv("TERN_CPU_ISA", "ref", 1);
    test::TtyProcess p(args);
    EXPECT_TRUE(p.started());
    EXPECT_EQ(p.wait_exit(120), 0) << p.seen;
    return p.seen;
}

// -b 1 makes each of these take a few seconds on the tiny model with the reference kernels.
TEST(ProgressTty, BarsOnATerminal) {
    std::string seen = run_on_tty({"run", "-m", tiny_model(), "-f", long_text(), "-b", "1", "-c", "4096", "-n", "1"});
    EXPECT_TRUE(has(seen, "processing prompt [") && has(seen, " tokens")) << seen.substr(0, 2000);
    seen = run_on_tty({"perplexity", "-m", tiny_model(), "-f", long_text(), "-c", "256", "-b", "1"});
    EXPECT_TRUE(has(seen, "perplexity [") && has(seen, "ppl ")) << seen.substr(0, 2000);
    EXPECT_TRUE(has(seen, "Final estimate: PPL")) << seen;
    seen = run_on_tty({"bench", "-m", tiny_model(), "-p", "32", "-n", "4", "-r", "2"});
    EXPECT_TRUE(has(seen, "bench [") && has(seen, "warm-up")) << seen.substr(0, 2000);
    const std::string out = (test::temp_dir("progress-synth") / "small.gguf").string();
    seen = run_on_tty({"synth", "small", "-o", out});
    EXPECT_TRUE(has(seen, "writing " + out + " [") && has(seen, "100.0%")) << seen.substr(0, 2000);
}

TEST(ProgressTty, NoBarsInLogs) {
    for (const std::vector<std::string> & args : std::vector<std::vector<std::string>>{
             {"run", "-m", tiny_model(), "-f", long_text(), "-b", "1", "-c", "4096", "-n", "1"},
             {"perplexity", "-m", tiny_model(), "-f", long_text(), "-c", "256", "-b", "1"},
             {"bench", "-m", tiny_model(), "-p", "32", "-n", "4", "-r", "2"},
             {"synth", "small", "-o", (test::temp_dir("progress-synth-log") / "small.gguf").string()}}) {
        const test::RunResult r = tern(args);
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_FALSE(has(r.err, "\r")) << args[0] << ": a progress bar in a log:\n" << r.err;
    }
}

}  // namespace
}  // namespace tern
