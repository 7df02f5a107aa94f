// Session: one conversation with a model. Owns the KV cache and the forward buffers, evaluates
// prompts in batches of n_batch tokens, and runs the generation loop with a streaming callback and
// stop conditions. Allocation happens once, in the constructor.
//
//   Session s(model, {.n_ctx = 4096});
//   s.eval(prompt_ids);                        // prefill; logits of the last token available
//   int32_t id = sampler.sample(s.logits());
#pragma once

#include "model/bitnet_model.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace tern {

struct SessionOptions {
    int64_t n_ctx   = 4096;        // context length (KV cache positions)
    int64_t n_batch = 512;         // tokens per forward pass when prefilling
    DType   type_k  = DType::f16;  // KV cache types: f16 (bitnet.cpp) or f32 (exact)
    DType   type_v  = DType::f16;
    // Round the final hidden state to f16 before an f16 LM head, as ggml does. Default: when the
    // K cache is f16 (bitnet.cpp numerics); off with an f32 cache (exact f32 reference).
    std::optional<bool> round_head_input_f16;
};

class Session {
public:
    // Throws Error(invalid_argument) for an n_ctx / n_batch out of range.
    Session(const BitnetModel & model, const SessionOptions & options);

    const BitnetModel & model() const { return model_; }
    int64_t n_ctx() const { return kv_.n_ctx; }
    int64_t n_past() const { return n_past_; }
    const KvCache & kv_cache() const { return kv_; }

    // Appends tokens at position n_past() and advances it. Afterwards logits() holds the logits of
    // the last token. With all_logits, `out` (n_tokens x n_vocab floats) receives every row.
    // Throws Error(invalid_argument) if the tokens do not fit the remaining context.
    void eval(std::span<const int32_t> tokens, std::span<float> all_logits = {});
    std::span<const float> logits() const { return logits_view(); }

    // Greedy decoding with the token kept on the device (DESIGN.md decision 4): feeds `first` at
    // position n_past(), then each step embeds the previous step's argmax without a host round trip;
    // ids come back to the host every `batch` steps (the next batch's first step is recorded before
    // they are read, so the device does not wait for the host between batches). on_token(id) gets
    // each new id in order and returns false to stop; the stopping id itself is not fed (as with
    // generate(); a step recorded ahead may have run past it, into cache rows beyond n_past()). At
    // most n_max ids, and never past the context. Returns the number of ids produced. logits() is
    // not updated.
    int64_t decode_greedy(int32_t first, int64_t n_max, const std::function<bool(int32_t)> & on_token,
                          int64_t batch = 32);

    // Sampled decoding with each step recorded while the one before runs on the device: draws an
    // id from logits() (the last eval's) with `sampler` (sample_top_k when its chain starts with
    // top-k: only those rows are read back), accepts it, feeds it, passes it to on_token while the
    // device runs that step (false: stop; n_past() then does not count that id, whose step ran into
    // the cache row at n_past()), and so on, never past the context. The next step is recorded
    // before the current one's results are read, and submitted once its token is written
    // (Backend::hold_step). Needs Backend::can_hold_steps(); generate() uses it where it can.
    // Returns the number of ids drawn. With -v it logs the host's time per token in each part.
    int64_t decode_sampled(Sampler & sampler, const std::function<bool(int32_t)> & on_token);

    void reset() { n_past_ = 0; }
    // Forgets positions n.. (n <= n_past()): the next eval writes there again. For undoing a turn
    // whose prompt was interrupted (chat's Ctrl-C).
    void rewind(int64_t n);

    // Called by an eval of more than one token with (0, n) first, then after each batch of n_batch
    // tokens with (tokens done, n): progress for long prompts. It may throw to abandon the eval; the batches done so far stay in
    // the cache (n_past() counts them), so the caller can rewind().
    void set_eval_progress(std::function<void(int64_t done, int64_t total)> fn) { eval_progress_ = std::move(fn); }

    // Host seconds decode_greedy spent recording and submitting steps (not waiting for ids) since
    // the last call: with a device backend, when this approaches the wall time the host is the
    // bottleneck, not the device. `tern bench` reports it as encode ms/token.
    double take_encode_seconds() { return std::exchange(encode_seconds_, 0.0); }

private:
    std::span<const float> logits_view() const;
    // The last token's logits into top_rows_ (top_k and the backend lists them) or last_logits_.
    void read_last_logits(const Tensor & logits, bool top_k);

    const BitnetModel &  model_;
    SessionOptions       options_;
    KvCache              kv_;
    ForwardBuffers       buf_;
    mutable std::vector<float> last_logits_;  // filled from top_rows_ by logits() when stale
    std::vector<Candidate>                   top_rows_;       // decode_sampled: the rows read back
    std::vector<std::pair<int32_t, float>>   top_rows_read_;  // read_top_k_rows' scratch
    mutable bool                             logits_stale_ = false;  // last_logits_ awaits top_rows_
    OwnedTensor          sampled_token_;  // [1] i32: decode_sampled's token, written before its step runs
    OwnedTensor          greedy_ids_;     // [2 (batch + 1)] i32: ids chained on the device by decode_greedy
    std::vector<int32_t> greedy_host_;
    int64_t              n_past_ = 0;
    bool                 round_head_ = false;
    double               encode_seconds_ = 0.0;
    std::function<void(int64_t, int64_t)> eval_progress_;
};

struct GenerationStats {
    int64_t n_prompt    = 0;
    int64_t n_generated = 0;
    double  prompt_ms   = 0;  // evaluating the prompt
    double  generate_ms = 0;  // from the end of the prompt to the last token
    // From the first generated token to the last: the decode steps that made tokens 2..n (the first
    // comes from the prompt's logits). Tokens per second of generation = (n_generated - 1) / decode_ms.
    double  decode_ms   = 0;
    bool    stopped_by_eog = false;
};

// Called with each new token id and its decoded text (possibly empty while a UTF-8 sequence is
// incomplete). Return false to stop.
using TokenCallback = std::function<bool(int32_t id, const std::string & text)>;

// Prefills `prompt` and samples up to n_predict tokens (n_predict < 0: until the context is full),
// stopping at an end-of-generation token (not printed). The session keeps the whole exchange.
GenerationStats generate(Session & session, const Tokenizer & tokenizer, Sampler & sampler,
                         std::span<const int32_t> prompt, int64_t n_predict, const TokenCallback & on_token);

}  // namespace tern
