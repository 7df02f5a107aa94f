// The command line as a llama.cpp user types it (issue 56): llama.cpp's multi-letter short flags
// with their meaning (or a clear "not supported"), CLI11's messages replaced by ones that name the
// flag, what was expected and what was found, unknown and misspelt commands, `tern help`,
// --seed -1, and limits that used to pass silently.
#include "cli_util.h"

#include <gtest/gtest.h>

#include <regex>

namespace tern {
namespace {

using test::has;
using test::RunResult;
using test::tern;
using test::tiny_model;

std::string joined(const std::vector<std::string> & args) {
    std::string s;
    for (const auto & a : args) s += a + " ";
    return s;
}

// Runs tern in `dir` (so that relative file names resolve there).
RunResult tern_in(const std::filesystem::path & dir, const std::vector<std::string> & args, const std::string & in = "") {
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir);
    RunResult r = tern(args, in);
    std::filesystem::current_path(cwd);
    return r;
}

TEST(CliFlags, LlamaCppShortFlagsKeepTheirMeaning) {
    // -ngl: "offload to the GPU" -> the GPU backend when there is one (auto), the CPU otherwise.
    RunResult r = tern({"run", "-m", tiny_model(), "-ngl", "99", "-p", "x", "-n", "2"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "backend auto ->")) << r.err;
    r = tern({"run", "-m", tiny_model(), "-ngl", "0", "-p", "x", "-n", "2"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(has(r.err, "backend auto")) << r.err;
    // -ctk / -ctv / -ub / -tb / -c / -b / -t / -n / -s.
    r = tern({"run", "-m", tiny_model(), "-ctk", "f32", "-ctv", "f32", "-ub", "8", "-b", "16", "-tb", "1", "-t", "2",
              "-c", "64", "-n", "4", "-s", "3", "-p", "x"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "-tb 1 is ignored")) << r.err;
    EXPECT_TRUE(has(r.err, "context 64")) << r.err;
    // -ctk with a type tern does not have: the flag, what it takes and what it got.
    r = tern({"run", "-m", tiny_model(), "-ctk", "q8_0", "-p", "x"});
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(has(r.err, "--cache-type-k: expected one of f16, f32, found 'q8_0'")) << r.err;
    // -sys in a chat; -cnv turns `run` into a chat with -p as the first message.
    r = tern({"chat", "-m", tiny_model(), "-sys", "Be brief.", "-n", "4", "--seed", "1"}, "Hello\n");
    EXPECT_EQ(r.code, 0) << r.err;
    r = tern({"run", "-m", tiny_model(), "-cnv", "-p", "Hello", "-n", "4", "--seed", "1"}, "");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "seed 1") && !has(r.err, ", prompt ")) << "run's line, not chat's:\n" << r.err;
    r = tern({"run", "-m", tiny_model(), "-sys", "x", "-p", "y"});
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(has(r.err, "tern chat")) << r.err;
}

// "-fa" used to be read as "-f a": with a file named `a` it silently became the prompt.
TEST(CliFlags, FlashAttentionIsNotAFileNamedA) {
    const auto dir = test::temp_dir("cli-fa");
    std::ofstream(dir / "a") << "SECRET FILE TEXT";
    for (const std::vector<std::string> & extra :
         std::vector<std::vector<std::string>>{{"-fa"}, {"-fa", "on"}, {"-fa", "auto"}, {"-fa", "off"}}) {
        std::vector<std::string> args = {"run", "-m", tiny_model(), "-n", "2", "--temp", "0"};
        args.insert(args.end(), extra.begin(), extra.end());
        const RunResult r = tern_in(dir, args);
        ASSERT_EQ(r.code, 0) << joined(args) << "\n" << r.err;
        EXPECT_FALSE(has(r.out, "SECRET")) << joined(args) << ": the file `a` became the prompt";
        EXPECT_EQ(has(r.err, "-fa off changes nothing"), extra.size() == 2 && extra[1] == "off") << r.err;
    }
}

TEST(CliFlags, UnsupportedAndUnknownOptionsSaySo) {
    struct Case {
        std::vector<std::string> args;
        std::vector<std::string> fragments;
    };
    for (const Case & c : std::vector<Case>{
             {{"run", "-hf", "org/model"}, {"unknown option '-hf'", "llama.cpp's '-hf, -hfr, --hf-repo'", "not supported by tern", "download"}},
             {{"run", "-r", "User:"}, {"unknown option '-r'", "--reverse-prompt"}},
             {{"run", "-i"}, {"'-i, --interactive'", "tern chat"}},
             {{"bench", "-pg", "512,128"}, {"unknown option '-pg'", "-p"}},
             {{"run", "-xyz"}, {"unknown option '-xyz' for `tern run`"}},
             {{"run", "-ctx", "512"}, {"unknown option '-ctx'", "did you mean '-c' (--ctx-size)"}},
             {{"run", "--bogus"}, {"unknown option '--bogus'"}},
             {{"run", "--n-predcit", "5"}, {"did you mean '--n-predict'"}},
             {{"tokenize", "-ngl", "1", "-p", "x"}, {"'-ngl'", "does not apply to `tern tokenize`", "tern run"}},
             {{"chat", "-no-cnv"}, {"always a conversation"}},
             {{"-m", "x.gguf", "run"}, {"must come after the command"}},
         }) {
        const RunResult r = tern(c.args);
        EXPECT_EQ(r.code, 2) << joined(c.args) << "\n" << r.err;
        for (const auto & f : c.fragments) EXPECT_TRUE(has(r.err, f)) << joined(c.args) << ": no '" << f << "' in\n" << r.err;
    }
}

// CLI11's own messages ("Value abc not in range") are replaced: the flag, what it takes, what it got.
TEST(CliFlags, BadValuesNameTheFlagTheExpectationAndTheValue) {
    struct Case {
        std::vector<std::string> args;
        std::string              message;
    };
    for (const Case & c : std::vector<Case>{
             {{"run", "-n", "abc"}, "--n-predict: expected an integer from -1 to 16777216, found 'abc'"},
             {{"run", "-c", "abc"}, "--ctx-size: expected an integer from 0 to 16777216, found 'abc'"},
             {{"run", "-n", "-5"}, "--n-predict: expected an integer from -1 to 16777216, found -5"},
             {{"run", "--temp", "hot"}, "--temp: expected a number from 0 to 1e+06, found 'hot'"},
             {{"run", "--top-k", "-3"}, "--top-k: expected an integer from 0 to 1073741824, found -3"},
             {{"run", "-t", "many"}, "--threads: expected an integer from 0 to 1024, found 'many'"},
             {{"run", "--seed", "abc"}, "--seed: expected -1 (random) or an integer from 0 to 2^64-1, found 'abc'"},
             {{"run", "--backend", "cuda"}, "--backend: expected one of cpu, webgpu, auto, found 'cuda'"},
             {{"run", "-p"}, "option '--prompt' needs a value"},
             {{"run", "foo"}, "unexpected argument 'foo'"},
             {{"bench", "-p", "-5"}, "--n-prompt: expected an integer from 0 to 16777216, found -5"},
             {{"bench", "-m", tiny_model(), "-p", "0", "-n", "0"}, "nothing to measure"},
             {{"bench", "-m", tiny_model(), "-p", "0", "-n", "4", "--temp", "0"}, "--temp sets the sampler of --as-run tests"},
             {{"bench", "-m", tiny_model(), "-n", "4", "--as-run", "--parallel", "2"}, "--as-run and --parallel do not go together"},
             {{"bench", "-m", tiny_model(), "-n", "4", "--as-run", "--top-p", "2"}, "--top-p"},
         }) {
        const RunResult r = tern(c.args);
        EXPECT_EQ(r.code, 2) << joined(c.args) << "\n" << r.err;
        EXPECT_TRUE(has(r.err, "error: " + c.message)) << joined(c.args) << ": expected '" << c.message << "' in\n" << r.err;
        EXPECT_FALSE(has(r.err, "not in range")) << r.err;
    }
}

TEST(CliFlags, UnknownCommandsAreNamedAndTheCommandsListed) {
    RunResult r = tern({"runn"});
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(has(r.err, "unknown command 'runn' (did you mean 'run'?)")) << r.err;
    for (const char * cmd : {"run", "chat", "tokenize", "perplexity", "inspect", "convert", "synth", "bench"}) {
        EXPECT_TRUE(has(r.err, std::string("  ") + cmd + " ")) << cmd << " not listed:\n" << r.err;
    }
    r = tern({"frobnicate"});
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(has(r.err, "unknown command 'frobnicate'") && !has(r.err, "did you mean")) << r.err;
    r = tern({});
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(has(r.err, "no command given") && has(r.err, "perplexity")) << r.err;
    EXPECT_FALSE(has(r.err, "A subcommand is required")) << r.err;
    // `tern help` and `tern help <command>` are help, as in git and cargo.
    r = tern({"help"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "bench")) << r.out;
    r = tern({"help", "perplexity"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "--kl-divergence")) << r.out;
    r = tern({"help", "nope"});
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(has(r.err, "unknown command 'nope'")) << r.err;
}

uint64_t printed_seed(const std::string & err) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(err, m, std::regex("seed ([0-9]+)"))) << err;
    return m.empty() ? 0 : std::stoull(m[1]);
}

// llama.cpp: --seed -1 means "random"; the seed actually used is printed so a run can be repeated.
TEST(CliFlags, SeedMinusOneIsRandomAndPrinted) {
    const RunResult a = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "1", "--seed", "-1"});
    const RunResult b = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "1", "--seed", "-1"});
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_TRUE(has(a.err, "(random)")) << a.err;
    EXPECT_NE(printed_seed(a.err), printed_seed(b.err));
    EXPECT_NE(printed_seed(a.err), 18446744073709551615ull);
    // The printed seed reproduces the run.
    const uint64_t  seed = printed_seed(a.err);
    const RunResult c    = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "1", "--seed", std::to_string(seed)});
    EXPECT_EQ(c.out, a.out);
    EXPECT_FALSE(has(c.err, "(random)")) << c.err;
}

TEST(CliFlags, LimitsThatUsedToPassSilentlyAreReported) {
    // -n beyond the context: a warning before, the reason after.
    RunResult r = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "2000", "-c", "32", "--temp", "0"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "warning: -n 2000 does not fit")) << r.err;
    EXPECT_TRUE(has(r.err, "stopped: the context (32 tokens) is full") || has(r.err, "end of text")) << r.err;
    // -c above the trained context (tiny: 512).
    r = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "1", "-c", "1024"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "warning: -c 1024 is above the context the model was trained with (512)")) << r.err;
    // -t above the cores.
    r = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "1", "-t", "1000"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "warning: -t 1000 is more threads than this machine has")) << r.err;
}

}  // namespace
}  // namespace tern
