// `tern bench`: prompt-processing (pp N) and generation (tg N) throughput, like llama-bench:
// a warm-up (untimed runs for at least 1 s), then r timed repetitions; Markdown table or JSON.
#include "bench_batched.h"
#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"

#include "core/error.h"
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string_view>
#include <nlohmann/json.hpp>

namespace tern::cli {
namespace {

struct BenchArgs {
    ModelArgs            model;
    std::vector<int64_t> pp{512};
    std::vector<int64_t> tg{128};
    std::vector<int64_t> depth{0};  // context already in the cache when a test starts (llama-bench -d)
    int                  reps = 5;
    int64_t              n_batch = 512;
    int64_t              n_ubatch = 0;  // llama-bench -ub: 0 = not given
    std::string          cache_type_k = "f16", cache_type_v = "f16";
    std::string          output = "md";  // llama-bench -o: md or json
    bool                 json = false;
    bool                 roofline = false;
    std::vector<int64_t> parallel;  // --parallel: tg tests decode this many streams together instead
    bool                 as_run = false;  // --as-run: tg tests generate as `tern run` does
    SamplerParams        sampling;        // (--as-run) tern run's sampler flags and defaults
    std::string          seed = "1";
};

struct Result {
    std::string         test;
    int64_t             n_prompt = 0, n_gen = 0, n_depth = 0;
    std::vector<double> tps;
    int64_t             dispatches = 0;  // over the timed repetitions
    int64_t             tokens     = 0;  // tokens of the timed repetitions
    double              encode_s   = 0;  // tg: host seconds spent recording + submitting steps
    bool                as_run     = false;  // tg: generated as `tern run` does (--as-run)
    // (--roofline, CPU tg tests) read bursts, bytes per second: one before each timed run and one
    // after the last (reps + 1 values, run i between bursts i and i + 1), and per run the bursts
    // between its segments of k_tokens_per_burst tokens with each segment's seconds.
    std::vector<double>              read_bps_around;
    std::vector<std::vector<double>> read_bps_in, segment_s;
};

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Each timed run's bytes as a % of what the read loop read in the same seconds (empty without
// bursts): each of its segments' seconds x the mean of the two bursts around that segment, summed
// (the run's first segment after the burst before it, its last before the burst after it). The
// ceiling on this machine moves by +-20% between minutes, so a figure against one measurement taken
// before or after the test can be wrong either way; sampled every k_tokens_per_burst tokens the
// per-run figure spread less over repeated runs (src/backend/cpu/README.md, "Against the read loop").
std::vector<double> pct_read_per_run(const Result & r, double bytes) {
    std::vector<double> pct;
    if (r.read_bps_around.size() != r.tps.size() + 1 || r.read_bps_in.size() != r.tps.size()) return pct;
    for (size_t i = 0; i < r.tps.size(); ++i) {
        std::vector<double> b{r.read_bps_around[i]};
        b.insert(b.end(), r.read_bps_in[i].begin(), r.read_bps_in[i].end());
        b.push_back(r.read_bps_around[i + 1]);
        const auto & seg = r.segment_s[i];
        if (b.size() != seg.size() + 1) return {};
        double read = 0, s = 0;  // bytes the read loop read in the run's seconds; the seconds
        for (size_t j = 0; j < seg.size(); ++j) {
            read += seg[j] * 0.5 * (b[j] + b[j + 1]);
            s += seg[j];
        }
        pct.push_back(read > 0 ? 100.0 * bytes * r.tps[i] * s / read : 0.0);
    }
    return pct;
}
// The same against the mean of the two bursts around the run alone (the figure before
// 2026-11-29's session 17, for comparisons with older tables).
std::vector<double> pct_read_around_per_run(const Result & r, double bytes) {
    std::vector<double> pct;
    if (r.read_bps_around.size() != r.tps.size() + 1) return pct;
    for (size_t i = 0; i < r.tps.size(); ++i) {
        const double around = 0.5 * (r.read_bps_around[i] + r.read_bps_around[i + 1]);
        pct.push_back(around > 0 ? 100.0 * bytes * r.tps[i] / around : 0.0);
    }
    return pct;
}

// The burst's buffer: well past a last-level cache, short enough (~8 sweeps) to take tens of ms.
constexpr size_t k_read_burst_bytes = size_t{128} << 20;
constexpr int    k_read_burst_sweeps = 7;  // timed sweeps per burst (the best counts), after one untimed
// A CPU tg run under --roofline decodes this many tokens at a time, a burst between (untimed).
constexpr int64_t k_tokens_per_burst = 16;

double mean(const std::vector<double> & v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / static_cast<double>(v.size());
}
double stddev(const std::vector<double> & v) {
    if (v.size() < 2) return 0;
    const double m = mean(v);
    double       s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// Deterministic token ids; speed does not depend on which tokens they are.
std::vector<int32_t> bench_tokens(int64_t n, int64_t n_vocab) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % n_vocab);
    return ids;
}

// "tg64 x8 @ d512": a batched test's name.
std::string batched_name(const BatchedResult & r) {
    return "tg" + std::to_string(r.n_gen) + " x" + std::to_string(r.streams) +
           (r.depth > 0 ? " @ d" + std::to_string(r.depth) : "");
}

// The warm-up of a test runs until it has taken k_warm_up_s in all: one run compiles the pipelines,
// but a GPU that idled meanwhile (compiling is host work) is still at its idle clock, and the first
// timed run would pay for the clock ramp (measured on an H100: 345 MHz idle, 1980 MHz busy; the
// first timed pp512 ran at a third of the speed of the next ones).
constexpr double k_warm_up_s = 1.0;

// One run of a test: its seconds, the dispatches it recorded and the host's encode seconds; a run
// timed in segments (CPU tg under --roofline) also each segment's seconds and the read bursts
// between them.
struct Run {
    double              s          = 0;
    int64_t             dispatches = 0;
    double              encode_s   = 0;
    std::vector<double> segment_s, read_bps_in;
};

// Warm-up runs until k_warm_up_s has passed (at least one), then `reps` timed runs of `tokens`
// tokens each, added to r. With a `burst` (a read-bandwidth measurement), one before each timed run
// and one after the last, into r.read_bps_around.
template <class RunOnce>
void time_test(Result & r, int reps, int64_t tokens, ProgressBar & bar, RunOnce run_once,
               const std::function<double()> & burst = {}) {
    double warm_s = 0;
    for (int rep = -1; rep < reps; ++rep) {  // rep -1 is the warm-up, repeated for k_warm_up_s
        bar.set_suffix(rep < 0 ? r.test + ": warm-up" : format("%s: run %d of %d", r.test.c_str(), rep + 1, reps));
        if (rep >= 0 && burst) r.read_bps_around.push_back(burst());
        const Run x = run_once();
        if (rep < 0 && (warm_s += x.s) < k_warm_up_s) --rep;
        if (rep >= 0) {
            r.tps.push_back(static_cast<double>(tokens) / x.s);
            r.dispatches += x.dispatches;
            r.tokens += tokens;
            r.encode_s += x.encode_s;
            if (burst) {
                r.segment_s.push_back(x.segment_s);
                r.read_bps_in.push_back(x.read_bps_in);
            }
        }
    }
    if (burst) r.read_bps_around.push_back(burst());
}

int close_sink(FILE * f) { return f != nullptr ? std::fclose(f) : 0; }

// One --as-run test run: the context filled to the test's depth and its first token evaluated
// (untimed), then generate() as `tern run` calls it (a new sampler with the same seed, each token
// detokenized, written and flushed; end-of-generation tokens do not stop it) for n decode steps
// after the token from those logits. Its time is tern run's: from that first token to the last.
Run generate_as_run(Session & session, const Tokenizer & tokenizer, const SamplerParams & params,
                    const std::function<void()> & fill, int32_t first, int64_t n, Backend & be, FILE * sink) {
    fill();
    const int32_t feed[1] = {first};
    session.eval(feed);
    Sampler sampler(params, static_cast<int32_t>(session.logits().size()));
    be.take_dispatch_count();
    session.take_encode_seconds();
    const GenerationStats st = generate(
        session, tokenizer, sampler, {}, n + 1,
        [&](int32_t, const std::string & piece) {
            write_text(sink, piece);
            std::fflush(sink);
            return true;
        },
        /*stop_at_eog=*/false);
    if (st.n_generated != n + 1 || st.decode_ms <= 0) {
        fail(ErrorKind::internal, format("--as-run: generated %lld of %lld tokens", static_cast<long long>(st.n_generated),
                                         static_cast<long long>(n + 1)));
    }
    return Run{st.decode_ms / 1000.0, be.take_dispatch_count(), session.take_encode_seconds()};
}

void bench(BenchArgs a) {
    if (a.reps < 1) fail(ErrorKind::invalid_argument, format("-r must be >= 1 (got %d)", a.reps));
    if (a.output == "json") a.json = true;
    int64_t n_tests = 0;
    for (int64_t n : a.pp) n_tests += n > 0;
    for (int64_t n : a.tg) n_tests += n > 0;
    if (n_tests == 0) {
        fail(ErrorKind::invalid_argument, "nothing to measure: every -p and -n length is 0",
             "give a prompt length (-p 512) or a generation length (-n 128) above 0");
    }
    n_tests *= static_cast<int64_t>(a.depth.size());
    if (a.as_run && !a.parallel.empty()) {
        fail(ErrorKind::invalid_argument, "--as-run and --parallel do not go together",
             "--as-run times one stream as `tern run` generates it; --parallel many streams together");
    }
    if (a.as_run) finish_sampler_params(a.sampling, a.seed);
    LoadedModel         lm = load_model(a.model, a.json);
    const ModelConfig & c  = lm.model->config();
    Backend &           be = *lm.backend;
    using clock            = std::chrono::steady_clock;
    for (int64_t d : a.depth) {
        if (d < 0) fail(ErrorKind::invalid_argument, format("-d must be >= 0 (got %lld)", static_cast<long long>(d)));
    }
    int64_t max_ctx = 1;
    for (int64_t d : a.depth) {
        for (int64_t n : a.pp) max_ctx = std::max(max_ctx, d + n);
        for (int64_t n : a.tg) max_ctx = std::max(max_ctx, d + n + 1);
    }
    SessionOptions so;
    so.n_ctx   = max_ctx;
    so.n_batch = a.n_ubatch > 0 ? std::min(a.n_batch, a.n_ubatch) : a.n_batch;
    so.type_k  = a.cache_type_k == "f32" ? DType::f32 : DType::f16;
    so.type_v  = a.cache_type_v == "f32" ? DType::f32 : DType::f16;
    Session session(*lm.model, so);
    // --as-run: the text goes where nothing reads it, written and flushed per token as tern run does.
    const std::unique_ptr<FILE, int (*)(FILE *)> sink(a.as_run ? std::fopen("/dev/null", "w") : nullptr, &close_sink);
    if (a.as_run && !sink) fail(ErrorKind::io, "cannot open /dev/null for --as-run's text");
    // Warm-ups and repetitions can take minutes on a CPU: a bar over the tests (terminal only).
    ProgressBar bar("bench", static_cast<uint64_t>(n_tests), true, 1.0);
    int64_t     tests_done = 0;

    std::vector<Result> results;
    // --roofline on the CPU: read bursts around each tg run (a GPU's ceiling does not drift as a
    // shared VM's does, and its measurement is not short).
    std::function<double()> burst;
    if (a.roofline && be.name() == "cpu") {
        burst = [&be] {
            const std::vector<double> bps = be.read_sweeps(k_read_burst_bytes, k_read_burst_sweeps);
            return bps.empty() ? 0.0 : *std::max_element(bps.begin(), bps.end());
        };
    }
    // A test at depth d starts from d tokens already evaluated (untimed), as llama-bench's -d: what
    // decode and prefill cost deep into a context, where attention reads d positions more.
    auto test_name = [](const char * kind, int64_t n, int64_t d) {
        return kind + std::to_string(n) + (d > 0 ? " @ d" + std::to_string(d) : "");
    };
    for (int64_t d : a.depth) {
        const auto depth_ids = bench_tokens(d + 1, c.n_vocab);  // the context, then a tg test's first token
        auto       fill      = [&] {
            session.reset();
            if (d > 0) session.eval(std::span<const int32_t>(depth_ids.data(), static_cast<size_t>(d)));
        };
        for (int64_t n : a.pp) {
            if (n <= 0) continue;
            Result     r{test_name("pp", n, d), n, 0, d, {}};
            const auto ids = bench_tokens(n, c.n_vocab);
            time_test(r, a.reps, n, bar, [&] {
                fill();
                be.take_dispatch_count();
                const auto t0 = clock::now();
                session.eval(ids);
                return Run{std::chrono::duration<double>(clock::now() - t0).count(), be.take_dispatch_count(), 0.0};
            });
            results.push_back(r);
            bar.update(static_cast<uint64_t>(++tests_done));
        }
        for (int64_t n : a.tg) {
            if (n <= 0 || !a.parallel.empty()) continue;  // (--parallel: bench_batched below)
            Result     r{test_name("tg", n, d), 0, n, d, {}};
            const auto ids = bench_tokens(n + 1, c.n_vocab);
            if (a.as_run) {
                r.test   = test_name("tg", n, 0) + " as run" + (d > 0 ? " @ d" + std::to_string(d) : "");
                r.as_run = true;
                time_test(r, a.reps, n, bar, [&] { return generate_as_run(session, *lm.tokenizer, a.sampling, fill,
                                                                          ids[0], n, be, sink.get()); });
                results.push_back(r);
                bar.update(static_cast<uint64_t>(++tests_done));
                continue;
            }
            time_test(r, a.reps, n, bar, [&] {
                fill();
                session.eval(std::span<const int32_t>(ids.data(), 1));
                be.take_dispatch_count();
                // n decode steps as greedy generation runs them: each step's token chosen on the device
                // and fed to the next step, ids read back every 32 steps.
                // With bursts (CPU, --roofline): k_tokens_per_burst tokens at a time, each segment
                // continuing from the last id of the one before (the same positions and ids as one
                // call), a read burst between segments outside the timing.
                session.take_encode_seconds();
                Run     run;
                int32_t last = ids[1];
                for (int64_t done = 0; done < n;) {
                    const int64_t m  = burst ? std::min(k_tokens_per_burst, n - done) : n;
                    const auto    t0 = clock::now();
                    session.decode_greedy(last, m, [&last](int32_t id) {
                        last = id;
                        return true;
                    });
                    const double s = std::chrono::duration<double>(clock::now() - t0).count();
                    run.s += s;
                    run.segment_s.push_back(s);
                    if ((done += m) < n) run.read_bps_in.push_back(burst());
                }
                run.dispatches = be.take_dispatch_count();
                run.encode_s   = session.take_encode_seconds();
                return run;
            }, burst);
            results.push_back(r);
            bar.update(static_cast<uint64_t>(++tests_done));
        }
    }
    bar.finish(false);
    std::vector<BatchedResult> batched;
    if (!a.parallel.empty()) {
        batched = bench_batched(*lm.model, {a.parallel, a.tg, a.depth, a.reps, so.type_k});
    }
    const double                copy_bps = a.roofline ? be.measure_copy_bandwidth() : 0.0;
    const double                read_bps = a.roofline ? be.measure_read_bandwidth() : 0.0;
    const Backend::DispatchCost dc       = a.roofline ? be.measure_dispatch_cost() : Backend::DispatchCost{};

    int64_t n_params = 0;
    for (const auto & t : lm.file->tensors()) n_params += t.n_elements;
    const double size_bytes   = static_cast<double>(lm.file->file_size());
    // tg tests decode greedily: the head is read as norm_lm_head_argmax reads it.
    const double weight_bytes = static_cast<double>(lm.model->greedy_weight_bytes_per_token());
    // K and V of every layer at every position attended to: a tg n test at depth d decodes positions
    // d + 1 .. d + n (after the first token), attending to p + 1 positions at position p: d + (n + 3) / 2
    // on average.
    const double kv_bytes_per_pos = static_cast<double>(c.n_layer * c.n_embd_kv()) *
                                    static_cast<double>(dtype_row_bytes(so.type_k, 1) + dtype_row_bytes(so.type_v, 1));
    auto kv_bytes = [&](const Result & r) {
        return kv_bytes_per_pos * (static_cast<double>(r.n_depth) + static_cast<double>(r.n_gen + 3) / 2.0);
    };
    // The bytes a tg test reads per token are known where its head is read as greedy decoding reads
    // it: not for --as-run with a sampler (its head writes every logit).
    const auto & sp        = a.sampling;
    const bool   run_greedy = sp.temp <= 0.0f && sp.repeat_penalty == 1.0f && sp.frequency_penalty == 0.0f &&
                            sp.presence_penalty == 0.0f;
    auto has_bytes = [&](const Result & r) { return r.n_gen > 0 && (!r.as_run || run_greedy); };
    const bool        counted = be.counts_dispatches();
    // The best share of copy bandwidth a tg test's dispatch count allows: every dispatch at the
    // measured cost of a dependent one (one workgroup) and its bytes read at the copy rate, nothing
    // else (the kernels' own latency, the head, the host): bytes/copy / (dispatches x cost + bytes/copy).
    const bool floor_known = a.roofline && counted && dc.gpu_s_one > 0 && copy_bps > 0;
    auto       floor_pct   = [&](const Result & r, double bytes) {
        const double disp = static_cast<double>(r.dispatches) / static_cast<double>(std::max<int64_t>(1, r.tokens));
        return 100.0 * (bytes / copy_bps) / (disp * dc.gpu_s_one + bytes / copy_bps);
    };
    const std::string name    = c.name.empty() ? a.model.model : c.name;
    const std::string backend = std::string(be.name());
    const int threads = a.model.threads > 0 ? a.model.threads : default_thread_count();
    if (a.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto & r : results) {
            const double ts = mean(r.tps);
            nlohmann::json j = {{"model", name}, {"model_bytes", size_bytes}, {"n_params", n_params},
                                {"backend", backend}, {"threads", threads}, {"test", r.test}, {"n_prompt", r.n_prompt},
                                {"n_gen", r.n_gen}, {"n_depth", r.n_depth}, {"avg_ts", ts}, {"stddev_ts", stddev(r.tps)},
                                {"ms_per_token", ts > 0 ? 1000.0 / ts : 0.0}, {"samples_ts", r.tps}};
            j["dispatches_per_token"] = counted ? nlohmann::json(static_cast<double>(r.dispatches) /
                                                                 static_cast<double>(std::max<int64_t>(1, r.tokens)))
                                                : nlohmann::json(nullptr);
            if (r.as_run) {
                j["as_run"]  = true;
                j["sampler"] = {{"temp", sp.temp}, {"top_k", sp.top_k}, {"top_p", sp.top_p}, {"min_p", sp.min_p},
                                {"repeat_penalty", sp.repeat_penalty}, {"presence_penalty", sp.presence_penalty},
                                {"frequency_penalty", sp.frequency_penalty}, {"seed", sp.seed}};
            }
            if (r.n_gen > 0) {
                j["encode_ms_per_token"] = 1000.0 * r.encode_s / static_cast<double>(std::max<int64_t>(1, r.tokens));
            }
            if (has_bytes(r)) {
                const double bytes          = weight_bytes + kv_bytes(r);
                j["weight_bytes_per_token"] = weight_bytes;
                j["kv_bytes_per_token"]     = kv_bytes(r);
                j["bytes_per_token"]        = bytes;
                j["gbps"]                   = bytes * ts / 1e9;
                if (a.roofline) j["pct_copy_bandwidth"] = copy_bps > 0 ? 100.0 * bytes * ts / copy_bps : 0.0;
                if (a.roofline && read_bps > 0) j["pct_read_bandwidth"] = 100.0 * bytes * ts / read_bps;
                if (floor_known) j["pct_copy_bandwidth_dispatch_floor"] = floor_pct(r, bytes);
                const auto pct = pct_read_per_run(r, bytes);
                if (!pct.empty() && pct[0] > 0) {
                    std::vector<double>              around;
                    std::vector<std::vector<double>> in;
                    for (double x : r.read_bps_around) around.push_back(x / 1e9);
                    for (const auto & run : r.read_bps_in) {
                        in.emplace_back();
                        for (double x : run) in.back().push_back(x / 1e9);
                    }
                    const auto pct_around                 = pct_read_around_per_run(r, bytes);
                    j["read_gbps_around_runs"]            = around;
                    j["read_gbps_in_runs"]                = in;
                    j["segment_s_runs"]                   = r.segment_s;
                    j["pct_read_bandwidth_runs"]          = pct;
                    j["pct_read_bandwidth_median"]        = median(pct);
                    j["pct_read_bandwidth_around_runs"]   = pct_around;
                    j["pct_read_bandwidth_around_median"] = median(pct_around);
                }
            }
            if (a.roofline) j["copy_gbps"] = copy_bps / 1e9;
            if (a.roofline && read_bps > 0) j["read_gbps"] = read_bps / 1e9;
            if (a.roofline && dc.gpu_s_one > 0) {
                j["dependent_dispatch_us"] = {{"gpu_one_group", 1e6 * dc.gpu_s_one},
                                              {"gpu_wide", 1e6 * dc.gpu_s_wide},
                                              {"wide_groups", dc.wide_groups},
                                              {"host", 1e6 * dc.host_s}};
            }
            out.push_back(j);
        }
        for (const auto & r : batched) {
            out.push_back({{"model", name}, {"backend", backend}, {"threads", threads},
                           {"test", batched_name(r)}, {"n_gen", r.n_gen}, {"n_depth", r.depth},
                           {"n_streams", r.streams}, {"avg_ts", mean(r.tps)}, {"stddev_ts", stddev(r.tps)},
                           {"ms_per_step", mean(r.step_ms)}, {"samples_ts", r.tps}});
        }
        std::printf("%s\n", out.dump(2).c_str());
        return;
    }
    if (a.roofline) {
        std::printf("copy bandwidth (%s, %s): %.1f GB/s (read + written)\n\n", backend.c_str(),
                    be.device_info().name.c_str(), copy_bps / 1e9);
        if (read_bps > 0) {
            std::printf("read bandwidth: %.1f GB/s (read only, as decoding streams the weights%s)\n\n", read_bps / 1e9,
                        backend == "cpu" ? format(", %d threads", threads).c_str() : "");
        }
        if (dc.gpu_s_one > 0) {
            std::printf("dependent dispatches (tiny kernel, 400 in a row): %.2f us each on the GPU with 1 workgroup, "
                        "%.2f us with %u; %.2f us each to record and submit\n\n",
                        1e6 * dc.gpu_s_one, 1e6 * dc.gpu_s_wide, dc.wide_groups, 1e6 * dc.host_s);
        }
    }
    if (!batched.empty()) {
        std::printf("| model | backend | threads | test | streams | t/s (all streams) | ms/step (per stream) |\n");
        std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
        for (const auto & r : batched) {
            std::printf("| %s | %s | %d | %s | %lld | %.2f ± %.2f | %.2f |\n", name.c_str(), backend.c_str(), threads,
                        batched_name(r).c_str(), static_cast<long long>(r.streams), mean(r.tps), stddev(r.tps),
                        mean(r.step_ms));
        }
        if (results.empty()) return;
        std::printf("\n");
    }
    const bool read_col = a.roofline && read_bps > 0;
    std::printf("| model | size | params | backend | threads | test | t/s | ms/token | host ms/token | dispatches/token | "
                "MB/token | GB/s |%s%s%s\n",
                a.roofline ? " % of copy BW |" : "", read_col ? " % of read BW |" : "",
                floor_known ? " best % of copy BW at this dispatch count |" : "");
    std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |%s%s%s\n",
                a.roofline ? " ---: |" : "", read_col ? " ---: |" : "", floor_known ? " ---: |" : "");
    for (const auto & r : results) {
        const double      ts    = mean(r.tps);
        const bool        known = has_bytes(r);
        const double      bytes = known ? weight_bytes + kv_bytes(r) : 0.0;
        const std::string disp  = counted ? format("%.1f", static_cast<double>(r.dispatches) /
                                                               static_cast<double>(std::max<int64_t>(1, r.tokens)))
                                          : "–";
        const std::string host = r.n_gen > 0 ? format("%.3f", 1000.0 * r.encode_s /
                                                                  static_cast<double>(std::max<int64_t>(1, r.tokens)))
                                             : "";
        std::printf("| %s | %s | %.2f B | %s | %d | %s | %.2f ± %.2f | %.2f | %s | %s | %s | %s |", name.c_str(),
                    human_bytes(size_bytes).c_str(), static_cast<double>(n_params) / 1e9, backend.c_str(), threads,
                    r.test.c_str(), ts, stddev(r.tps), ts > 0 ? 1000.0 / ts : 0.0, host.c_str(), disp.c_str(),
                    known ? format("%.2f", bytes / 1e6).c_str() : "",
                    known ? format("%.2f", bytes * ts / 1e9).c_str() : "");
        if (a.roofline) {
            std::printf(" %s |", known && copy_bps > 0 ? format("%.1f", 100.0 * bytes * ts / copy_bps).c_str() : "");
        }
        if (read_col) std::printf(" %s |", known ? format("%.1f", 100.0 * bytes * ts / read_bps).c_str() : "");
        if (floor_known) std::printf(" %s |", known ? format("%.1f", floor_pct(r, bytes)).c_str() : "");
        std::printf("\n");
    }
    bool first_interleaved = true;
    for (const auto & r : results) {
        if (!has_bytes(r)) continue;
        const auto pct = pct_read_per_run(r, weight_bytes + kv_bytes(r));
        if (pct.empty() || pct[0] <= 0) continue;
        if (first_interleaved) {
            std::printf("\nread bandwidth sampled during each timed run (%zu MiB bursts, best of %d sweeps, %d threads, "
                        "before the run, every %lld tokens and after it; untimed):\n",
                        k_read_burst_bytes >> 20, k_read_burst_sweeps, threads,
                        static_cast<long long>(k_tokens_per_burst));
        }
        first_interleaved = false;
        const auto  pct_around = pct_read_around_per_run(r, weight_bytes + kv_bytes(r));
        std::string around, runs, runs_around;
        for (double x : r.read_bps_around) around += format(" %.1f", x / 1e9);
        for (double x : pct) runs += format(" %.1f", x);
        for (double x : pct_around) runs_around += format(" %.1f", x);
        std::printf("%s: %% of read BW per run (time-weighted):%s; median %.1f %% (against the bursts around each "
                    "run alone:%s; median %.1f %%); read GB/s around runs:%s\n",
                    r.test.c_str(), runs.c_str(), median(pct), runs_around.c_str(), median(pct_around),
                    around.c_str());
    }
}

}  // namespace

void register_bench(CLI::App & app) {
    auto   args = std::make_shared<BenchArgs>();
    auto * cmd  = app.add_subcommand("bench", "measure prompt processing (pp) and generation (tg) speed");
    add_model_args(*cmd, args->model);
    const auto length = int_in(0, int64_t{1} << 24);
    cmd->add_option("-p,--n-prompt", args->pp, "prompt lengths to time (pp tests), comma-separated; 0 = none")
        ->delimiter(',')->check(length)->capture_default_str();
    cmd->add_option("-n,--n-gen", args->tg,
                    "generation lengths to time (tg tests: greedy decoding, token chosen on the device), comma-separated; "
                    "0 = none")
        ->delimiter(',')->check(length)->capture_default_str();
    cmd->add_option("-d,--n-depth", args->depth,
                    "context already in the KV cache when each test starts (evaluated untimed, as llama-bench's "
                    "-d), comma-separated: tg128 @ d4096 decodes positions 4097..4224")
        ->delimiter(',')->check(length)->capture_default_str();
    cmd->add_option("-r,--repetitions", args->reps, "timed repetitions per test (after a warm-up: untimed runs until 1 s has passed, at least one)")
        ->check(int_in(1, 1000))->capture_default_str();
    cmd->add_option("-b,--batch-size", args->n_batch, "tokens per forward pass in pp tests")
        ->check(int_in(1, int64_t{1} << 16))->capture_default_str();
    cmd->add_option("--ubatch-size", args->n_ubatch, "llama-bench's -ub: pp tests evaluate min(-b, -ub) tokens per pass")
        ->check(int_in(1, int64_t{1} << 16));
    const auto kv_type = one_of({"f16", "f32"});
    cmd->add_option("--cache-type-k", args->cache_type_k, "KV cache type for K (-ctk): f16 or f32")->check(kv_type)
        ->capture_default_str();
    cmd->add_option("--cache-type-v", args->cache_type_v, "KV cache type for V (-ctv): f16 or f32")->check(kv_type)
        ->capture_default_str();
    cmd->add_option_function<std::string>(
           "--cache-type", [args](const std::string & t) { args->cache_type_k = args->cache_type_v = t; },
           "KV cache type for K and V")
        ->check(kv_type);
    cmd->add_option("-o,--output", args->output, "llama-bench's -o: md (a Markdown table) or json (as --json)")
        ->check(one_of({"md", "json"}))->capture_default_str();
    cmd->add_option("--parallel", args->parallel,
                    "streams decoded together, comma-separated: each tg test then runs as B sequences in one batch "
                    "(the engine under `tern serve`: one forward pass per step for all of them, each stream's next "
                    "token its argmax) after each was fed d + 1 tokens; t/s counts every stream's tokens")
        ->delimiter(',')->check(int_in(1, 4096));
    cmd->add_flag("--as-run", args->as_run,
                  "tg tests generate as `tern run` does: a sampler from the flags below (tern run's defaults; seed 1 "
                  "unless -s), each token detokenized, written and flushed (to /dev/null), the time from the first "
                  "token to the last (tern run's tok/s); end-of-text tokens do not stop it. \"tgN as run\" in the "
                  "table; --temp 0 is tern run's greedy decoding");
    add_sampler_args(*cmd, args->sampling, args->seed);
    cmd->add_flag("--json", args->json, "print a JSON array instead of a Markdown table");
    cmd->add_flag("--roofline", args->roofline,
                  "also measure the device's copy bandwidth (best of several timed copies of a 256 MiB buffer, "
                  "read + written: device to device for a GPU, memcpy over the threads for the CPU) and its read-only "
                  "bandwidth (a 320 MiB buffer read as decoding streams weights: on the CPU every thread of the test "
                  "reads its own slice with the kernels' widest loads, best of 7; on a GPU the best of several "
                  "layouts), and print each tg test's GB/s as a percentage of both; on a GPU also the cost of one "
                  "dispatch in a chain of dependent dispatches (GPU time with 1 and 128 workgroups, the median of five "
                  "chains; host time to record and submit). On the CPU each timed tg run is also measured "
                  "against the read bandwidth it had: it decodes 16 tokens at a time with a short read burst (128 MiB, "
                  "the test's threads, best of 7 sweeps after one: 40-80 ms on the development VM, up to ~0.2 s under load; not timed) before its first segment, "
                  "between segments and after its last, and its bytes are printed as a % of what the read loop read "
                  "in the same seconds (each segment's seconds x the mean of the bursts around it), with the median "
                  "over the runs and, for older figures, the % against the mean of the two bursts around the run "
                  "alone (JSON: pct_read_bandwidth_runs / _median, pct_read_bandwidth_around_runs / _median, "
                  "read_gbps_around_runs, read_gbps_in_runs, segment_s_runs): the ceiling of a shared machine "
                  "moves between minutes");
    cmd->footer("Columns: dispatches/token = GPU dispatches recorded per token over the timed runs (pp: per prompt "
                "token; \"–\" for the CPU, which runs ops eagerly). MB/token and GB/s (tg tests only) = bytes read "
                "per generated token: every weight a decode step reads in the backend's own layout (layer linears "
                "and norms, final norm, the whole LM head or tied embedding table as greedy decoding reads it (the "
                "WebGPU and fast CPU backends stream an int8 copy of an F16 head of 64 MiB or more), one embedding "
                "row) plus the K and V cache at the test's average context length; GB/s = MB/token x t/s. Activations are not counted. "
                "Best % of copy BW at this dispatch count (GPU, --roofline) = the share a tg test would reach with every dispatch "
                "at the measured cost of a dependent one-workgroup dispatch and its bytes read at the copy rate: "
                "MB/copy rate / (dispatches/token x that cost + MB/copy rate).\n"
                "Example: tern bench -m models/synth-2b4t.gguf -p 64 -n 16 -d 0,512 -r 3 --roofline\n"
                "As tern run: tern bench -m models/synth-2b4t.gguf -p 0 -n 512 --as-run --temp 0\n"
                "Batched: tern bench -m models/synth-2b4t.gguf -p 0 -n 64 --parallel 1,8,32,64");
    cmd->callback([args, cmd] {
        for (const char * flag : {"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n",
                                  "--presence-penalty", "--frequency-penalty", "--seed"}) {
            if (!args->as_run && cmd->get_option(flag)->count() > 0) {
                fail(ErrorKind::invalid_argument, format("%s sets the sampler of --as-run tests", flag),
                     "add --as-run (tg tests then generate as tern run does), or leave it out");
            }
        }
        bench(*args);
    });
}

}  // namespace tern::cli
