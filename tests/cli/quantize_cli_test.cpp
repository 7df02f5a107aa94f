// `tern quantize` and the family `tern synth` shapes end to end through the executable: a quantized
// head loads and generates, the same-type rewrite is byte-identical, family files inspect, and the
// error contract (exit 2 for usage errors, "error:" + "hint:", nothing written).
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

namespace tern {
namespace {

namespace fs = std::filesystem;

struct CliRun {
    int         code = -1;
    std::string out, err;
};

std::string slurp(const fs::path & p) {
    std::ifstream     in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

CliRun tern(const std::vector<std::string> & args) {
    static const auto dir = test::temp_dir("quantize-cli");
    static int        n   = 0;
    const auto        out = dir / ("out" + std::to_string(n)), err = dir / ("err" + std::to_string(n));
    ++n;
    std::string cmd = "'" + test::binary_path("tern") + "'";
    for (const auto & a : args) cmd += " '" + a + "'";
    cmd += " </dev/null >" + out.string() + " 2>" + err.string();
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out), slurp(err)};
}

bool has(const std::string & s, const std::string & needle) { return s.find(needle) != std::string::npos; }

TEST(QuantizeCli, Q6kHeadRunsAndSameTypeIsIdentical) {
    const auto        dir = test::temp_dir("quantize-cli-model");
    const std::string in = (dir / "tiny.gguf").string(), q6 = (dir / "q6.gguf").string(), same = (dir / "same.gguf").string();
    ASSERT_EQ(tern({"synth", "tiny", "-o", in, "--seed", "4"}).code, 0);
    const CliRun q = tern({"quantize", in, q6, "COPY", "--token-embedding-type", "q6_k"});
    ASSERT_EQ(q.code, 0) << q.err;
    EXPECT_TRUE(has(q.err, "token_embd.weight") && has(q.err, "q6_k")) << q.err;
    const CliRun r = tern({"run", "-m", q6, "-p", "The", "-n", "4", "--temp", "0"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(r.out.starts_with("The")) << r.out;
    ASSERT_EQ(tern({"quantize", in, same, "i2_s"}).code, 0);
    EXPECT_EQ(slurp(in), slurp(same));
}

TEST(QuantizeCli, Help) {
    const CliRun h = tern({"quantize", "--help"});
    EXPECT_EQ(h.code, 0);
    EXPECT_TRUE(has(h.out, "Example") && has(h.out, "--output-tensor-type") && has(h.out, "--token-embedding-type")) << h.out;
    EXPECT_TRUE(has(tern({"--help"}).out, "quantize"));
}

TEST(QuantizeCli, UsageErrors) {
    const auto        dir = test::temp_dir("quantize-cli-errors");
    const std::string in  = (dir / "tiny.gguf").string();
    ASSERT_EQ(tern({"synth", "tiny", "-o", in}).code, 0);
    const CliRun bad_type = tern({"quantize", in, (dir / "o.gguf").string(), "Q3_K"});
    EXPECT_EQ(bad_type.code, 2);
    EXPECT_TRUE(has(bad_type.err, "error: TYPE: unknown type 'Q3_K'") && has(bad_type.err, "hint:")) << bad_type.err;
    const CliRun to_dir = tern({"quantize", in, dir.string(), "Q8_0"});
    EXPECT_EQ(to_dir.code, 2);
    EXPECT_TRUE(has(to_dir.err, "not a regular file")) << to_dir.err;
    const CliRun onto_input = tern({"quantize", in, in, "Q8_0"});
    EXPECT_EQ(onto_input.code, 2);
    EXPECT_TRUE(has(onto_input.err, "is the input file")) << onto_input.err;
    const CliRun copy_override = tern({"quantize", in, (dir / "o.gguf").string(), "COPY", "--output-tensor-type", "copy"});
    EXPECT_EQ(copy_override.code, 2) << copy_override.err;
    const CliRun missing = tern({"quantize", (dir / "nope.gguf").string(), (dir / "o.gguf").string(), "Q8_0"});
    EXPECT_EQ(missing.code, 2) << missing.err;
    EXPECT_FALSE(fs::exists(dir / "o.gguf"));
    EXPECT_FALSE(fs::exists(dir / "o.gguf.tmp"));
}

TEST(QuantizeCli, FamilyShapesInspect) {
    const auto        dir = test::temp_dir("quantize-cli-family");
    const std::string f   = (dir / "phi3.gguf").string();
    const CliRun         s   = tern({"synth", "phi-3-mini", "-o", f, "--layers", "1", "--embd-type", "q4_0"});
    ASSERT_EQ(s.code, 0) << s.err;
    const CliRun i = tern({"inspect", "-m", f});
    EXPECT_EQ(i.code, 0) << i.err;
    EXPECT_TRUE(has(i.out, "\"phi3\"") && has(i.out, "blk.0.attn_qkv.weight")) << i.out;
    const CliRun l = tern({"synth", "--list"});
    for (const char * shape : {"llama-3.2-1b", "qwen3-1.7b", "phi-3-mini", "falcon3-1b"}) EXPECT_TRUE(has(l.out, shape)) << l.out;
    fs::remove(f);
}

}  // namespace
}  // namespace tern
