// `tern bench --parallel`: batched decoding (issue 53), the engine under `tern serve` without HTTP,
// tokenizer or sampler. A test "tg N x B @ dD" opens B sequences in one BatchEngine (a paged KV
// pool with room for all of them), feeds each D + 1 tokens (untimed, in passes of up to 512
// tokens), then times N steps: each step is one batched forward pass over the B sequences' newest
// tokens, each sequence's next token its argmax, found on the device and read back after the step
// (the scheduler's loop, with greedy sampling). Aggregate tokens/s = B * N / seconds; a step's
// milliseconds are each stream's latency per token.
#include "bench_batched.h"

#include "core/error.h"
#include "engine/batch_engine.h"

#include <algorithm>
#include <chrono>

namespace tern::cli {
namespace {

constexpr int64_t k_page_size   = 64;   // tern serve's default --kv-page-size
constexpr int64_t k_prefill_max = 512;  // tokens per prefill pass
constexpr double  k_warm_up_s   = 1.0;  // as the single-stream tests: pipelines compiled, clocks up

// Deterministic token ids, different per stream.
int32_t bench_token(int64_t stream, int64_t i, int64_t n_vocab) {
    return static_cast<int32_t>((i * 7919 + stream * 104729 + 13) % n_vocab);
}

// One run: open, prefill (untimed), n timed steps, close. Returns the timed seconds.
double run_once(BatchEngine & eng, int64_t streams, int64_t n_gen, int64_t depth, int64_t n_vocab) {
    std::vector<SequenceId> seqs;
    for (int64_t s = 0; s < streams; ++s) {
        const auto id = eng.open(depth + 1 + n_gen);
        TERN_ASSERT(id.has_value(), "bench: the pool was sized for every stream");
        seqs.push_back(*id);
    }
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(streams));
    std::vector<int32_t>              next(static_cast<size_t>(streams));
    std::vector<BatchItem>            items(static_cast<size_t>(streams));
    for (int64_t s = 0; s < streams; ++s) {
        auto & p = prompts[static_cast<size_t>(s)];
        for (int64_t i = 0; i <= depth; ++i) p.push_back(bench_token(s, i, n_vocab));
        items[static_cast<size_t>(s)] = {seqs[static_cast<size_t>(s)], p, {}, &next[static_cast<size_t>(s)]};
    }
    eng.step(items);  // the prompts; each stream's first generated token
    // A per-kernel profile ($TERN_WEBGPU_PROFILE) covers the timed steps of the last run only.
    eng.model().backend().restart_profile();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n_gen; ++i) {
        for (int64_t s = 0; s < streams; ++s) {
            items[static_cast<size_t>(s)].tokens = std::span<const int32_t>(&next[static_cast<size_t>(s)], 1);
        }
        eng.step(items);  // reads each `next` before it writes it
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (SequenceId id : seqs) eng.close(id);
    return seconds;
}

}  // namespace

std::vector<BatchedResult> bench_batched(const BitnetModel & model, const BatchedBenchArgs & a) {
    std::vector<BatchedResult> out;
    const int64_t              n_vocab = model.config().n_vocab;
    for (int64_t d : a.depth) {
        for (int64_t n : a.tg) {
            if (n <= 0) continue;
            for (int64_t b : a.streams) {
                if (b < 1 || b > 4096) {
                    fail(ErrorKind::invalid_argument,
                         format("--parallel %lld is out of range (expected 1..4096)", static_cast<long long>(b)));
                }
                BatchEngineOptions o;
                o.page_size = k_page_size;
                o.n_pages   = b * ((d + 1 + n + k_page_size - 1) / k_page_size);
                o.n_chunk   = std::max(b, k_prefill_max);
                o.max_seqs  = b;
                o.type_k = o.type_v = a.cache_type;
                BatchEngine   eng(model, o);
                BatchedResult r{b, n, d, {}, {}};
                double        warm_s = 0;
                for (int rep = -1; rep < a.reps; ++rep) {  // rep -1: the warm-up, repeated for k_warm_up_s
                    const double s = run_once(eng, b, n, d, n_vocab);
                    if (rep < 0 && (warm_s += s) < k_warm_up_s) --rep;
                    if (rep >= 0) {
                        r.tps.push_back(static_cast<double>(b * n) / s);
                        r.step_ms.push_back(1000.0 * s / static_cast<double>(n));
                    }
                }
                out.push_back(std::move(r));
            }
        }
    }
    return out;
}

}  // namespace tern::cli
