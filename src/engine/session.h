// Session: one conversation with a model. Owns the KV cache (or views one: a lone sequence of
// `tern serve`'s page pool, BatchEngine::contiguous_view) and the forward buffers, evaluates
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
    // A session over a cache it does not own (a view into a KV pool: BatchEngine::contiguous_view;
    // its n_ctx and types replace the options'), whose first n_past positions are filled already.
    // The view's buffers must outlive the session.
    Session(const BitnetModel & model, const SessionOptions & options, KvCache view, int64_t n_past);

    const BitnetModel & model() const { return model_; }
    int64_t n_ctx() const { return kv_.n_ctx; }
    int64_t n_past() const { return n_past_; }
    const KvCache & kv_cache() const { return kv_; }

    // Appends tokens at position n_past() and advances it. Afterwards logits() holds the logits of
    // the last token. With all_logits, `out` (n_tokens x n_vocab floats) receives every row.
    // Throws Error(invalid_argument) if the tokens do not fit the remaining context.
    void eval(std::span<const int32_t> tokens, std::span<float> all_logits = {});
    std::span<const float> logits() const { return last_logits_; }

    // Greedy decoding with the token kept on the device (DESIGN.md decision 4): feeds `first` at
    // position n_past(), then each step embeds the previous step's argmax without a host round trip
    // (Backend::decode with the device's choice); ids come back to the host `batch` at a time while
    // the device runs ahead. on_token(id) gets each new id in order and returns false to stop; the
    // stopping id itself is not fed (steps run ahead of it wrote cache rows past n_past(), which are
    // overwritten when those positions are used). At most n_max ids, and never past the context.
    // Returns the number of ids produced. logits() is not updated.
    int64_t decode_greedy(int32_t first, int64_t n_max, const std::function<bool(int32_t)> & on_token,
                          int64_t batch = 32);

    // Sampled decoding: draws an id from logits() (the last eval's) with `sampler`, feeds it and
    // hands it to on_token while the device runs that step (false: stop; n_past() then does not
    // count that id), draws the next from the step's logits (only the top-k rows where the sampler
    // starts with top-k and the backend lists them), and so on, never past the context (the id drawn
    // from the last position's logits is handed out, not fed). The backend records each step while
    // the one before runs where it can (Backend::decode with a host picker). Returns the number of
    // ids drawn. logits() is not updated.
    // Where the sampler is its chain alone (Sampler::chain_only) and the backend samples it on the
    // device (Backend::samples_on_device), the device draws each id with the sampler's uniforms and
    // the ids come back in batches as in decode_greedy (the sampler's random stream is left where
    // the CPU's would be); otherwise each step's logits come to the host.
    int64_t decode_sampled(Sampler & sampler, const std::function<bool(int32_t)> & on_token);
    // decode_sampled after its first id: `first` was drawn (and accepted) elsewhere and handed out
    // already; it is fed at n_past() and on_token gets the ids after it. Returns how many it got.
    int64_t decode_sampled_after(Sampler & sampler, int32_t first, const std::function<bool(int32_t)> & on_token);

    void reset() { n_past_ = 0; }
    // Forgets positions n.. (n <= n_past()): the next eval writes there again. For undoing a turn
    // whose prompt was interrupted (chat's Ctrl-C).
    void rewind(int64_t n);

    // Called by an eval of more than one token with (0, n) first, then after each batch of n_batch
    // tokens with (tokens done, n): progress for long prompts. It may throw to abandon the eval; the batches done so far stay in
    // the cache (n_past() counts them), so the caller can rewind().
    void set_eval_progress(std::function<void(int64_t done, int64_t total)> fn) { eval_progress_ = std::move(fn); }

    // One decode step at position 0, greedy and (with a sampler the backend samples on the device)
    // sampled, each read back, so that a backend that compiles its kernels at first use (WebGPU)
    // does so now rather than inside the first tokens the user waits for (llama.cpp's warm-up run).
    // Greedy steps at positions 0..3 and two at each of Backend::warm_up_positions (where the
    // backend's kernels change form, e.g. attention past 128 positions: compiled here rather than
    // after 128 tokens). The cache rows it writes are written again before they are read. Requires
    // n_past() == 0; does nothing on a backend without dispatches (CPU). Positions at or past
    // `until` (e.g. prompt + -n: where generation cannot reach) are left out; < 0: the context's end.
    void warm_up(const Sampler * sampler = nullptr, int64_t until = -1);

    // Host seconds the decoders spent recording and submitting steps (not waiting for ids) since
    // the last call (DecodeStream::host_seconds): with a device backend, when this approaches the
    // wall time the host is the bottleneck, not the device. `tern bench` reports it as host ms/token.
    double take_encode_seconds() { return std::exchange(encode_seconds_, 0.0); }

private:
    // The request of decode_greedy / decode_sampled: from n_past(), at most n_max ids, the model's step.
    DecodeRequest decode_request(int32_t first, int64_t n_max);
    // decode_sampled after `first` was drawn on the host: on_token(first) first where hand_out_first.
    int64_t decode_sampled_from(Sampler & sampler, int32_t first, bool hand_out_first,
                                const std::function<bool(int32_t)> & on_token);
    // decode_sampled's device path, after `first` was drawn on the host.
    int64_t decode_sampled_on_device(Sampler & sampler, int32_t first, bool hand_out_first,
                                     const std::function<bool(int32_t)> & on_token);

    const BitnetModel &  model_;
    SessionOptions       options_;
    KvCache              kv_;
    ForwardBuffers       buf_;
    std::vector<float>   last_logits_;  // the last eval's last token
    std::vector<int32_t> ids_;          // decode_greedy's batch of ids
    std::vector<Candidate> rows_;       // decode_sampled's top-k rows for the sampler
    std::vector<float>     uniforms_;   // decode_sampled_on_device: the uniforms a stream drew
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
// stopping at an end-of-generation token (not printed) unless stop_at_eog is false (llama.cpp's
// --ignore-eos: the token is handed out as any other). An empty prompt continues from the last
// eval's logits. The session keeps the whole exchange.
GenerationStats generate(Session & session, const Tokenizer & tokenizer, Sampler & sampler,
                         std::span<const int32_t> prompt, int64_t n_predict, const TokenCallback & on_token,
                         bool stop_at_eog = true);

}  // namespace tern
