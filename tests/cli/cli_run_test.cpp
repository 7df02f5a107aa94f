// `tern run` as issue 56 asked: the default context (min(trained, 4096), said in the log), the
// timing line (no tok/s made of one token's 2 ms; ms/token and tok/s over the decode steps), --json
// for scripts, the prompt echoed whole (NUL bytes too) or, truncated, as the model saw it, a
// warning for a second BOS, model-file text escaped before it reaches the terminal, bounded inputs.
#include "cli_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

namespace tern {
namespace {

using test::has;
using test::RunResult;
using test::slurp;
using test::tern;
using test::tiny_model;

// A copy of the tiny model with the u32 value of metadata key `key` replaced (the value follows the
// key's name and its u32 type tag).
std::string patched_model(const std::string & tag, const std::string & key, uint32_t value) {
    std::string  bytes = slurp(tiny_model());
    const size_t at    = bytes.find(key);
    EXPECT_NE(at, std::string::npos) << key;
    std::memcpy(bytes.data() + at + key.size() + 4, &value, 4);
    const std::string path = (test::temp_dir(tag) / "m.gguf").string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

// A model claiming a 4M-token context used to get a 4M-token KV cache (gigabytes) by default.
TEST(CliRun, DefaultContextIsTheTrainedOneAtMost4096) {
    const std::string big = patched_model("cli-ctx", "bitnet-b1.58.context_length", 1u << 22);
    RunResult         r   = tern({"run", "-m", big, "-p", "x", "-n", "2"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "context 4096 (trained 4194304; -c raises it)")) << r.err;
    r = tern({"run", "-m", big, "-p", "x", "-n", "2", "-c", "8192"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "context 8192")) << r.err;
    r = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "2"});
    EXPECT_TRUE(has(r.err, "context 512,")) << "the tiny model's own 512: " << r.err;
}

TEST(CliRun, TimingLineCountsDecodeStepsNotTheFirstToken) {
    RunResult r = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "1", "--temp", "0"});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string line = r.err.substr(r.err.find("tern: load"));
    EXPECT_TRUE(has(line, "generated 1 token (from the prompt's logits: no decode step to time)")) << line;
    EXPECT_EQ(line.find("tok/s", line.find("generated")), std::string::npos) << "a rate made of one token: " << line;
    r = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "12", "--temp", "0", "-c", "64"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "generated 12 tokens, 11 decode steps in ") && has(r.err, "ms/token")) << r.err;
}

TEST(CliRun, JsonForScripts) {
    const RunResult r = tern({"run", "-m", tiny_model(), "-p", "The ship", "-n", "8", "--temp", "0", "--json", "-c", "64"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);  // stdout is the JSON object and nothing else
    EXPECT_EQ(j["prompt"], "The ship");
    EXPECT_EQ(j["n_ctx"], 64);
    EXPECT_GT(j["n_prompt_tokens"].get<int>(), 1);
    const int n = j["n_generated_tokens"].get<int>();
    EXPECT_TRUE(n == 8 ? j["stop"] == "n_predict" : j["stop"] == "end_of_text") << j.dump();
    EXPECT_EQ(j["timings"]["decode_steps"].get<int>(), std::max(0, n - 1));
    EXPECT_GT(j["timings"]["prompt_ms"].get<double>(), 0.0);
    // The text is what the plain run prints after the prompt.
    const RunResult plain = tern({"run", "-m", tiny_model(), "-p", "The ship", "-n", "8", "--temp", "0", "-c", "64"});
    EXPECT_EQ(plain.out, "The ship" + j["text"].get<std::string>() + "\n");
}

TEST(CliRun, PromptEchoKeepsEveryByteAndShowsWhatATruncatedPromptKept) {
    const auto dir = test::temp_dir("cli-echo");
    std::ofstream(dir / "nul.txt", std::ios::binary) << std::string("ab\0cd", 5);
    RunResult r = tern({"run", "-m", tiny_model(), "-f", (dir / "nul.txt").string(), "-n", "1", "--temp", "0"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, 5), std::string("ab\0cd", 5));
    const std::string prompt = "START " + std::string(300, 'a') + " END";
    r = tern({"run", "-m", tiny_model(), "-p", prompt, "-c", "64", "-n", "2", "--truncate-prompt", "--temp", "0"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(has(r.out, "START")) << "the echo shows text the model never saw: " << r.out;
    EXPECT_TRUE(r.out.starts_with(std::string(10, 'a'))) << r.out;
    EXPECT_TRUE(has(r.out, " END")) << r.out;
}

TEST(CliRun, ASecondBosIsWarnedAbout) {
    RunResult r = tern({"run", "-m", tiny_model(), "-p", "<|begin_of_text|>Hello", "-n", "1"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "warning: the prompt starts with <|begin_of_text|>")) << r.err;
    r = tern({"run", "-m", tiny_model(), "-p", "Hello", "-n", "1"});
    EXPECT_FALSE(has(r.err, "begin_of_text")) << r.err;
}

// general.name is text from the file: an escape sequence in it must not reach the terminal.
TEST(CliRun, ModelFileTextIsEscaped) {
    std::string       bytes = slurp(tiny_model());
    const std::string name  = "tern synth tiny (random weights)";
    const size_t      at    = bytes.find(name);
    ASSERT_NE(at, std::string::npos);
    bytes.replace(at, 4, "\x1b[2J");
    const std::string path = (test::temp_dir("cli-esc") / "m.gguf").string();
    std::ofstream(path, std::ios::binary) << bytes;
    for (const std::vector<std::string> & args :
         std::vector<std::vector<std::string>>{{"run", "-m", path, "-p", "x", "-n", "1"}, {"inspect", "-m", path}}) {
        const RunResult r = tern(args);
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_FALSE(has(r.out + r.err, "\x1b")) << args[0] << ": a raw ESC reached the terminal";
        EXPECT_TRUE(has(r.out + r.err, "\\x1b[2J synth tiny")) << args[0] << "\n" << r.out << r.err;
    }
}

TEST(CliRun, EndlessAndBlockingInputsEnd) {
    // -f /dev/zero used to read until memory ran out.
    RunResult r = tern({"tokenize", "-m", tiny_model(), "-f", "/dev/zero"});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_TRUE(has(r.err, "'/dev/zero' is larger than the 256 MiB")) << r.err;
    // A FIFO as the model used to block forever in open().
    const auto fifo = test::temp_dir("cli-fifo") / "model.gguf";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    r = tern({"inspect", "-m", fifo.string()});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_TRUE(has(r.err, "FIFO")) << r.err;
}

// Out of memory: the hint about -c / -b only where a context is allocated.
TEST(CliRun, OutOfMemoryHintFitsTheCommand) {
    const std::string tern_bin = test::shell_quote(test::binary_path("tern"));
    const auto        run      = [&](const std::string & limit_kb, const std::string & args) {
        const auto        err = test::temp_dir("cli-oom") / "err";
        const std::string cmd = "bash -c 'ulimit -v " + limit_kb + "; exec " + tern_bin + " " + args + "' 2>" + err.string();
        const int         status = std::system(cmd.c_str());
        return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(err));
    };
    auto [code, err] = run("200000", "tokenize -f /dev/zero");
    EXPECT_EQ(code, 1) << err;
    EXPECT_TRUE(has(err, "error: out of memory") && !has(err, "-c")) << err;
    std::tie(code, err) = run("400000", "run -c 16000000 -p hi");
    EXPECT_EQ(code, 1) << err;
    EXPECT_TRUE(has(err, "error: out of memory") && has(err, "smaller context (-c)")) << err;
}

// A truncated file: inspect shows the metadata it holds, then fails saying where the file ends.
TEST(CliRun, InspectShowsWhatATruncatedFileHolds) {
    const std::string bytes = slurp(tiny_model());
    const std::string path  = (test::temp_dir("cli-trunc") / "half.gguf").string();
    std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    const RunResult r = tern({"inspect", "-m", path});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_TRUE(has(r.out, "general.architecture") && has(r.out, "tokenizer.ggml.tokens")) << r.out;
    EXPECT_TRUE(has(r.err, "is incomplete") && has(r.err, "file is truncated")) << r.err;
}

}  // namespace
}  // namespace tern
