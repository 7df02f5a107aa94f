// End-to-end tests of the `tern` executable: every subcommand on a synthetic model, the output
// formats other tools rely on (tokenize JSON, perplexity --json and --logits-out, bench --json), and
// the error contract: "error: ..." on stderr, exit 2 for usage errors and 1 for runtime/model errors,
// never a crash.
#include "cli_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

namespace tern {
namespace {

using test::has;
using test::RunResult;
using test::slurp;
using test::tern;
using test::tiny_model;

TEST(Cli, HelpForEveryCommand) {
    const RunResult root = tern({"--help"});
    EXPECT_EQ(root.code, 0);
    for (const char * cmd : {"run", "chat", "tokenize", "perplexity", "inspect", "convert", "synth", "bench"}) {
        EXPECT_TRUE(has(root.out, cmd)) << cmd;
        const RunResult r = tern({cmd, "--help"});
        EXPECT_EQ(r.code, 0) << cmd;
        EXPECT_TRUE(has(r.out, "Example")) << cmd << ": --help should show an example";
    }
}

TEST(Cli, RunGeneratesAndReportsTimings) {
    const RunResult r = tern({"run", "-m", tiny_model(), "-p", "The ship", "-n", "16", "--seed", "5"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(r.out.starts_with("The ship")) << r.out;
    EXPECT_GT(r.out.size(), std::string("The ship").size());
    EXPECT_TRUE(has(r.err, "random weights")) << r.err;
    EXPECT_TRUE(has(r.err, "tok/s")) << r.err;
    // Same seed, same text; greedy is seed-independent.
    EXPECT_EQ(tern({"run", "-m", tiny_model(), "-p", "The ship", "-n", "16", "--seed", "5"}).out, r.out);
    const RunResult g1 = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "8", "--temp", "0", "--seed", "1"});
    const RunResult g2 = tern({"run", "-m", tiny_model(), "-p", "x", "-n", "8", "--temp", "0", "--seed", "2"});
    EXPECT_EQ(g1.out, g2.out);
}

TEST(Cli, PromptLongerThanContextIsAnErrorUnlessTruncationIsAsked) {
    const std::string long_prompt(300, 'a');
    const RunResult   r = tern({"run", "-m", tiny_model(), "-p", long_prompt, "-c", "64", "-n", "4"});
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(has(r.err, "error:") && has(r.err, "context")) << r.err;
    EXPECT_TRUE(has(r.err, "hint:")) << r.err;
    const RunResult t = tern({"run", "-m", tiny_model(), "-p", long_prompt, "-c", "64", "-n", "4", "--truncate-prompt"});
    EXPECT_EQ(t.code, 0) << t.err;
    EXPECT_TRUE(has(t.err, "truncated")) << t.err;
}

TEST(Cli, BadFlagsAreUsageErrors) {
    for (const std::vector<std::string> & args : std::vector<std::vector<std::string>>{
             {"run", "-m", tiny_model(), "--temp", "-1"},
             {"run", "-m", tiny_model(), "--top-p", "1.5"},
             {"run", "-m", tiny_model(), "--bogus"},
             {"run", "-m", tiny_model(), "-c", "abc"},
             {"run", "-m", tiny_model(), "-p", "a", "-f", tiny_model()},
             {"run", "-n", "-5"},
             {"run", "--cache-type-k", "q4"},
             {"frobnicate"},
             {"tokenize", "-m", tiny_model()},
             {"bench", "-m", tiny_model(), "-r", "0"},
             {"bench", "-m", tiny_model(), "-d", "x"},
             {"bench", "-m", tiny_model(), "--parallel", "0"},
             {"synth", "nonexistent-shape", "-o", "/tmp/x.gguf"},
         }) {
        const RunResult r = tern(args);
        std::string     joined;
        for (const auto & a : args) joined += a + " ";
        EXPECT_EQ(r.code, 2) << joined << "\n" << r.err;
        EXPECT_TRUE(has(r.err, "error:")) << joined << "\n" << r.err;
    }
}

TEST(Cli, BadModelFilesAreRuntimeErrorsNotCrashes) {
    const auto  dir = test::temp_dir("cli-bad");
    std::string model_bytes = slurp(tiny_model());
    const auto  write = [&](const std::string & name, const std::string & bytes) {
        const auto p = dir / name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p.string();
    };
    const std::vector<std::string> files = {
        write("truncated.gguf", model_bytes.substr(0, model_bytes.size() / 2)),
        write("header.gguf", model_bytes.substr(0, 30)),
        write("notgguf.gguf", "this is a text file, not a model\n"),
        write("empty.gguf", ""),
    };
    for (const auto & f : files) {
        for (const char * cmd : {"run", "inspect", "tokenize"}) {
            std::vector<std::string> args = {cmd, "-m", f};
            if (std::string(cmd) != "inspect") args.insert(args.end(), {"-p", "hi"});
            const RunResult r = tern(args);
            EXPECT_EQ(r.code, 1) << cmd << " " << f << "\n" << r.err;
            EXPECT_TRUE(has(r.err, "error:")) << r.err;
            EXPECT_TRUE(has(r.err, f)) << "the message should name the file: " << r.err;
        }
    }
    const RunResult missing = tern({"run", "-m", (dir / "nope.gguf").string(), "-p", "x"});
    EXPECT_EQ(missing.code, 2) << missing.err;  // CLI11 checks that the file exists: a usage error
}

TEST(Cli, TokenizePrintsJsonArray) {
    const RunResult r = tern({"tokenize", "-m", tiny_model(), "-p", "hello"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto ids = nlohmann::json::parse(r.out);
    ASSERT_TRUE(ids.is_array());
    EXPECT_EQ(ids.size(), 4u);  // tern's byte vocabulary: "he" (merge "h e"), "l", "l", "o"
    const auto with_bos = nlohmann::json::parse(tern({"tokenize", "-m", tiny_model(), "-p", "hello", "--bos"}).out);
    EXPECT_EQ(with_bos.size(), ids.size() + 1);
    const auto plain   = nlohmann::json::parse(tern({"tokenize", "-m", tiny_model(), "-p", "<|eot_id|>"}).out);
    const auto special = nlohmann::json::parse(tern({"tokenize", "-m", tiny_model(), "-p", "<|eot_id|>", "--parse-special"}).out);
    EXPECT_GT(plain.size(), 1u);
    ASSERT_EQ(special.size(), 1u);
}

// --score-all on a text shorter than the window: the whole file in one context, every token after
// BOS scored, logits of every position written.
TEST(Cli, PerplexityJsonAndLogitsFile) {
    const auto dir  = test::temp_dir("cli-ppl");
    const auto text = dir / "text.txt";
    std::ofstream(text) << "The quick brown fox jumps over the lazy dog.";
    const auto      logits = dir / "logits.f32";
    const RunResult r = tern({"perplexity", "-m", tiny_model(), "-f", text.string(), "--score-all", "--json",
                              "--logits-out", logits.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const int64_t n = j["n_tokens"].get<int64_t>();
    EXPECT_GT(n, 10);
    EXPECT_EQ(j["n_ctx"].get<int64_t>(), n);
    EXPECT_EQ(j["n_chunks"].get<int64_t>(), 1);
    EXPECT_EQ(j["n_scored"].get<int64_t>(), n - 1);
    EXPECT_TRUE(std::isfinite(j["ppl"].get<double>()));
    EXPECT_GT(j["ppl"].get<double>(), 1.0);
    const auto tok = nlohmann::json::parse(tern({"tokenize", "-m", tiny_model(), "-f", text.string(), "--bos"}).out);
    EXPECT_EQ(static_cast<int64_t>(tok.size()), n);
    const auto n_vocab = 271;  // tern's byte vocabulary: 256 bytes + 12 merges + 3 specials
    EXPECT_EQ(std::filesystem::file_size(logits), static_cast<uintmax_t>(n * n_vocab * 4));
    // Without --score-all the text must fill a window of -c tokens: an error with a hint.
    const RunResult small = tern({"perplexity", "-m", tiny_model(), "-f", text.string()});
    EXPECT_EQ(small.code, 2);
    EXPECT_TRUE(has(small.err, "window") && has(small.err, "--score-all")) << small.err;
}

TEST(Cli, InspectShowsMetadataTensorsAndConfig) {
    const RunResult r = tern({"inspect", "-m", tiny_model()});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char * s : {"general.architecture", "bitnet-b1.58", "blk.0.attn_q.weight", "i2_s", "n_embd 256",
                           "tied to token_embd.weight", "synthetic"}) {
        EXPECT_TRUE(has(r.out, s)) << s;
    }
}

TEST(Cli, SynthIsDeterministic) {
    const auto dir = test::temp_dir("cli-synth");
    const auto a = (dir / "a.gguf").string(), b = (dir / "b.gguf").string(), c = (dir / "c.gguf").string();
    ASSERT_EQ(tern({"synth", "tiny", "-o", a, "--seed", "9"}).code, 0);
    ASSERT_EQ(tern({"synth", "tiny", "-o", b, "--seed", "9"}).code, 0);
    ASSERT_EQ(tern({"synth", "tiny", "-o", c, "--seed", "10"}).code, 0);
    EXPECT_EQ(slurp(a), slurp(b));
    EXPECT_NE(slurp(a), slurp(c));
    const RunResult list = tern({"synth", "--list"});
    EXPECT_TRUE(has(list.out, "bitnet-2b4t"));
}

TEST(Cli, BenchJson) {
    const RunResult r = tern({"bench", "-m", tiny_model(), "-p", "16", "-n", "4", "-r", "2", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j[0]["test"], "pp16");
    EXPECT_EQ(j[1]["test"], "tg4");
    for (const auto & row : j) {
        EXPECT_GT(row["avg_ts"].get<double>(), 0.0);
        EXPECT_EQ(row["samples_ts"].size(), 2u);
    }
    const RunResult md = tern({"bench", "-m", tiny_model(), "-p", "8", "-n", "2", "-r", "1"});
    EXPECT_TRUE(has(md.out, "| pp8 |") || has(md.out, "pp8")) << md.out;

    // -d: every test again after a context of d tokens; tg's K/V bytes count the deeper positions.
    const RunResult deep = tern({"bench", "-m", tiny_model(), "-p", "8", "-n", "4", "-d", "0,16", "-r", "1", "--json"});
    ASSERT_EQ(deep.code, 0) << deep.err;
    const auto jd = nlohmann::json::parse(deep.out);
    ASSERT_EQ(jd.size(), 4u);
    EXPECT_EQ(jd[0]["test"], "pp8");
    EXPECT_EQ(jd[1]["test"], "tg4");
    EXPECT_EQ(jd[2]["test"], "pp8 @ d16");
    EXPECT_EQ(jd[3]["test"], "tg4 @ d16");
    EXPECT_EQ(jd[3]["n_depth"], 16);
    EXPECT_GT(jd[3]["avg_ts"].get<double>(), 0.0);
    // (16 + (4 + 3) / 2) positions against (4 + 3) / 2.
    EXPECT_DOUBLE_EQ(jd[3]["kv_bytes_per_token"].get<double>() * 3.5, jd[1]["kv_bytes_per_token"].get<double>() * 19.5);
}

// --as-run: tg tests generate as tern run does (sampler, detokenized and flushed text, EOS ignored),
// at every depth; the sampler is in the JSON, and bytes per token only where greedy.
TEST(Cli, BenchAsRun) {
    for (const char * temp : {"0", "0.8"}) {
        SCOPED_TRACE(std::string("--temp ") + temp);
        const RunResult r = tern({"bench", "-m", tiny_model(), "-p", "0", "-n", "6", "-d", "0,9", "-r", "2", "--json",
                                  "--as-run", "--temp", temp});
        ASSERT_EQ(r.code, 0) << r.err;
        const auto j = nlohmann::json::parse(r.out);
        ASSERT_EQ(j.size(), 2u) << r.out;
        EXPECT_EQ(j[0]["test"], "tg6 as run");
        EXPECT_EQ(j[1]["test"], "tg6 as run @ d9");
        for (const auto & row : j) {
            EXPECT_TRUE(row["as_run"].get<bool>());
            EXPECT_GT(row["avg_ts"].get<double>(), 0.0);
            EXPECT_EQ(row["samples_ts"].size(), 2u);
            EXPECT_EQ(row["sampler"]["top_k"], 40);
            EXPECT_EQ(row["sampler"]["seed"], 1u);
            EXPECT_EQ(row.contains("bytes_per_token"), std::string(temp) == "0") << row.dump();
        }
    }
    const RunResult md = tern({"bench", "-m", tiny_model(), "-p", "0", "-n", "3", "-r", "1", "--as-run"});
    ASSERT_EQ(md.code, 0) << md.err;
    EXPECT_TRUE(has(md.out, "| tg3 as run |")) << md.out;
}

// --parallel: each tg test decodes B streams in one batch (BatchEngine); t/s counts every stream.
TEST(Cli, BenchParallel) {
    const RunResult r = tern({"bench", "-m", tiny_model(), "-p", "0", "-n", "3", "-d", "0,5", "--parallel", "1,3",
                              "-r", "2", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j.size(), 4u) << r.out;  // no single-stream tg tests beside them
    const char * names[] = {"tg3 x1", "tg3 x3", "tg3 x1 @ d5", "tg3 x3 @ d5"};
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(j[i]["test"], names[i]);
        EXPECT_EQ(j[i]["n_streams"], i % 2 == 0 ? 1 : 3);
        EXPECT_GT(j[i]["avg_ts"].get<double>(), 0.0);
        EXPECT_GT(j[i]["ms_per_step"].get<double>(), 0.0);
        EXPECT_EQ(j[i]["samples_ts"].size(), 2u);
    }
    const RunResult md = tern({"bench", "-m", tiny_model(), "-p", "4", "-n", "2", "--parallel", "2", "-r", "1"});
    ASSERT_EQ(md.code, 0) << md.err;
    EXPECT_TRUE(has(md.out, "| tg2 x2 | 2 |")) << md.out;
    EXPECT_TRUE(has(md.out, "| pp4 |")) << md.out;
}

// bench on the shipped default model (no -m) with the CPU backend: the bandwidth columns are there
// and add up, the CPU reports no dispatch count (it has none), --roofline measures a copy bandwidth.
TEST(Cli, BenchReportsBytesBandwidthAndRoofline) {
    const RunResult r = tern({"bench", "--backend", "cpu", "-t", "2", "-p", "16", "-n", "40", "-r", "2", "--json", "--roofline"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j.size(), 2u);
    const auto & pp = j[0];
    const auto & tg = j[1];
    ASSERT_EQ(pp["test"], "pp16");
    ASSERT_EQ(tg["test"], "tg40");
    for (const auto & row : j) {
        EXPECT_EQ(row["backend"], "cpu");
        ASSERT_TRUE(row.contains("dispatches_per_token"));
        EXPECT_TRUE(row["dispatches_per_token"].is_null()) << "the CPU backend counts no dispatches";
        EXPECT_NEAR(row["ms_per_token"].get<double>(), 1000.0 / row["avg_ts"].get<double>(), 1e-9);
        EXPECT_GT(row["copy_gbps"].get<double>(), 0.1);
    }
    EXPECT_FALSE(pp.contains("bytes_per_token")) << "bytes per token are a decode figure";
    const double weights = tg["weight_bytes_per_token"].get<double>();
    const double kv      = tg["kv_bytes_per_token"].get<double>();
    const double bytes   = tg["bytes_per_token"].get<double>();
    const double model   = tg["model_bytes"].get<double>();
    // Every weight a decode step reads, in the CPU layout: ternary codes at 2 bits (the file's size for
    // these), the LM head in the file's layout: within a small factor of the file size.
    EXPECT_GT(weights, 0.5 * model);
    EXPECT_LT(weights, 1.5 * model);
    EXPECT_GT(kv, 0.0);
    EXPECT_LT(kv, weights);
    EXPECT_DOUBLE_EQ(bytes, weights + kv);
    const double ts = tg["avg_ts"].get<double>();
    EXPECT_NEAR(tg["gbps"].get<double>(), bytes * ts / 1e9, 1e-9 * bytes * ts / 1e9);
    EXPECT_NEAR(tg["pct_copy_bandwidth"].get<double>(), 100.0 * tg["gbps"].get<double>() / tg["copy_gbps"].get<double>(),
                1e-6 * tg["pct_copy_bandwidth"].get<double>());
    if (tg.contains("read_gbps")) {  // the fast CPU kernels measure it (the scalar reference does not)
        EXPECT_NEAR(tg["pct_read_bandwidth"].get<double>(), 100.0 * tg["gbps"].get<double>() / tg["read_gbps"].get<double>(),
                    1e-6 * tg["pct_read_bandwidth"].get<double>());
        // A read burst before each of the 2 timed runs and after the last, and inside each run one
        // between its segments of 16 tokens (40 tokens: 16 + 16 + 8, so 2 bursts); each run's % of
        // what the read loop read in its seconds (each segment's seconds x the mean of the bursts
        // around it), and their median (of 2: the mean); the older % against the two bursts around
        // the run alone beside it.
        const auto & around = tg["read_gbps_around_runs"];
        const auto & in     = tg["read_gbps_in_runs"];
        const auto & segs   = tg["segment_s_runs"];
        const auto & runs   = tg["pct_read_bandwidth_runs"];
        const auto & runs_a = tg["pct_read_bandwidth_around_runs"];
        const auto & tps    = tg["samples_ts"];
        ASSERT_EQ(around.size(), 3u);
        ASSERT_EQ(in.size(), 2u);
        ASSERT_EQ(segs.size(), 2u);
        ASSERT_EQ(runs.size(), 2u);
        ASSERT_EQ(runs_a.size(), 2u);
        ASSERT_EQ(tps.size(), 2u);
        for (const auto & x : around) EXPECT_GT(x.get<double>(), 0.1);
        for (size_t i = 0; i < 2; ++i) {
            ASSERT_EQ(in[i].size(), 2u) << i;
            ASSERT_EQ(segs[i].size(), 3u) << i;
            const std::vector<double> b = {around[i].get<double>(), in[i][0].get<double>(), in[i][1].get<double>(),
                                           around[i + 1].get<double>()};
            double read = 0, s = 0;
            for (size_t k = 0; k < 3; ++k) {
                const double sk = segs[i][k].get<double>();
                read += sk * 0.5e9 * (b[k] + b[k + 1]);
                s += sk;
            }
            EXPECT_NEAR(s, 40.0 / tps[i].get<double>(), 1e-9 * s) << "the segments are the run's timed seconds";
            const double want = 100.0 * bytes * 40.0 / read;
            EXPECT_NEAR(runs[i].get<double>(), want, 1e-6 * want) << i;
            const double ceiling  = 0.5e9 * (b[0] + b[3]);
            const double want_a   = 100.0 * bytes * tps[i].get<double>() / ceiling;
            EXPECT_NEAR(runs_a[i].get<double>(), want_a, 1e-6 * want_a) << i;
        }
        const double med = 0.5 * (runs[0].get<double>() + runs[1].get<double>());
        EXPECT_NEAR(tg["pct_read_bandwidth_median"].get<double>(), med, 1e-9 * med);
        const double med_a = 0.5 * (runs_a[0].get<double>() + runs_a[1].get<double>());
        EXPECT_NEAR(tg["pct_read_bandwidth_around_median"].get<double>(), med_a, 1e-9 * med_a);
    } else {
        EXPECT_FALSE(tg.contains("pct_read_bandwidth_runs")) << "no bursts where no read bandwidth is measured";
    }
    EXPECT_FALSE(pp.contains("read_gbps_around_runs")) << "bursts go around tg runs only";
    // The CPU runs ops eagerly: no dispatch count, so no best share at the dispatch floor.
    EXPECT_FALSE(tg.contains("pct_copy_bandwidth_dispatch_floor"));

    // The f32 cache doubles the K/V bytes and nothing else.
    // (Same threads: the CPU's tile layout may follow the thread count.)
    const RunResult r32 = tern({"bench", "--backend", "cpu", "-t", "2", "-p", "0", "-n", "40", "-r", "1", "--json",
                                "--cache-type", "f32"});
    ASSERT_EQ(r32.code, 0) << r32.err;
    const auto j32 = nlohmann::json::parse(r32.out);
    ASSERT_EQ(j32.size(), 1u);
    EXPECT_DOUBLE_EQ(j32[0]["kv_bytes_per_token"].get<double>(), 2.0 * kv);
    EXPECT_DOUBLE_EQ(j32[0]["weight_bytes_per_token"].get<double>(), weights);
    EXPECT_FALSE(j32[0].contains("copy_gbps")) << "no roofline without --roofline";

    const RunResult md = tern({"bench", "--backend", "cpu", "-p", "8", "-n", "4", "-r", "1", "--roofline"});
    ASSERT_EQ(md.code, 0) << md.err;
    EXPECT_TRUE(has(md.out, "copy bandwidth (cpu")) << md.out;
    EXPECT_TRUE(has(md.out, "| dispatches/token | MB/token | GB/s | % of copy BW |")) << md.out;
    EXPECT_TRUE(has(md.out, "| – |")) << md.out;
    EXPECT_FALSE(has(md.out, "at this dispatch count")) << md.out;
    EXPECT_TRUE(has(md.out, "read bandwidth sampled during each timed run")) << md.out;
    EXPECT_TRUE(has(md.out, "tg4: % of read BW per run (time-weighted): ")) << md.out;
    EXPECT_TRUE(has(md.out, "; read GB/s around runs: ")) << md.out;
    EXPECT_TRUE(has(md.out, "; median ")) << md.out;

}

// The WebGPU backend counts its dispatches; on the CPU-only CI machine it runs on SwiftShader.
TEST(Cli, BenchCountsWebGpuDispatchesPerDecodeStep) {
    const char * old_allow = std::getenv("TERN_WEBGPU_ALLOW_CPU");
    const std::string saved = old_allow ? old_allow : "";
    setenv("TERN_WEBGPU_ALLOW_CPU", "1", 1);  // SwiftShader is slow, not wrong
    const RunResult gpu = tern({"bench", "-m", tiny_model(), "--backend", "webgpu", "-p", "8", "-n", "2,4", "-r", "1", "--json"});
    if (old_allow) setenv("TERN_WEBGPU_ALLOW_CPU", saved.c_str(), 1); else unsetenv("TERN_WEBGPU_ALLOW_CPU");
    if (gpu.code != 0 && has(gpu.err, "no GPU device")) GTEST_SKIP() << "no Vulkan driver, not even SwiftShader: " << gpu.err;
    ASSERT_EQ(gpu.code, 0) << gpu.err;

    const RunResult info = tern({"inspect", tiny_model()});
    ASSERT_EQ(info.code, 0) << info.err;
    const size_t at = info.out.find("block_count");
    ASSERT_NE(at, std::string::npos) << info.out;
    const int64_t n_layer = std::stoll(info.out.substr(info.out.find_first_of("0123456789", at)));

    const auto jg = nlohmann::json::parse(gpu.out);
    ASSERT_EQ(jg.size(), 3u) << gpu.out;
    ASSERT_EQ(jg[1]["test"], "tg2");
    ASSERT_EQ(jg[2]["test"], "tg4");
    for (const auto & row : jg) EXPECT_EQ(row["backend"], "webgpu");
    // Dispatches of one run: a tg n test is one batch of n greedy decode steps (ids are read back
    // every 32), each recording the same dispatches, plus the batch's last argmax_final (a step's
    // argmax_final is otherwise folded into the next step's embed: embed_argmax).
    const double d2   = 2 * jg[1]["dispatches_per_token"].get<double>();
    const double d4   = 4 * jg[2]["dispatches_per_token"].get<double>();
    const double step = (d4 - d2) / 2;
    EXPECT_EQ(d2 - 2 * step, 1.0) << d2 << " and " << d4 << " dispatches for 2 and 4 decode steps";
    // Per step: the embed, per layer qkv, attention, o-proj, gate+up, down, then the argmax-only head,
    // which is one dispatch (the int8 copy with its exact tail) or two (the f16 table's bounds, then
    // argmax_exact over the rows that can win, as on SwiftShader).
    EXPECT_TRUE(step == static_cast<double>(5 * n_layer + 2) || step == static_cast<double>(5 * n_layer + 3))
        << step << " dispatches per decode step with " << n_layer << " layers, expected 5 L + 2 or 5 L + 3";
    const double d_pp = jg[0]["dispatches_per_token"].get<double>();
    EXPECT_GT(d_pp, 0.0);
    EXPECT_LT(d_pp, step) << "a prompt's dispatches are shared by its tokens";
}

TEST(Cli, ChatReadsTurnsFromStdin) {
    const RunResult r = tern({"chat", "-m", tiny_model(), "-n", "8", "--seed", "1"}, "Hello there\n/reset\nSecond turn\n");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "conversation reset")) << r.err;
}

TEST(Cli, ConvertsAnHfCheckpoint) {
    const auto      out = (test::temp_dir("cli-convert") / "m.gguf").string();
    const RunResult r   = tern({"convert", test::data_path("hf_parity/tiny_tied"), "-o", out});
    ASSERT_EQ(r.code, 0) << r.err;
    const RunResult run = tern({"run", "-m", out, "-p", "def f", "-n", "4", "--temp", "0"});
    EXPECT_EQ(run.code, 0) << run.err;
    const RunResult bad = tern({"convert", test::temp_dir("cli-empty").string(), "-o", out + ".2"});
    EXPECT_EQ(bad.code, 1) << bad.err;
    EXPECT_TRUE(has(bad.err, "config.json")) << bad.err;
}

}  // namespace
}  // namespace tern
