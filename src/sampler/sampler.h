// Sampler: turns one step's logits into a token id, with llama.cpp semantics. Chain (DESIGN.md):
//   penalties -> top-k -> top-p -> min-p -> temperature -> seeded draw;  temp <= 0: greedy argmax.
// Entry points: validate(params) for CLI/server flags, Sampler(params, n_vocab), sample(logits),
// accept(token) after each token is fed to the model, reset() at a new conversation.
// All buffers are sized at construction: sample() and accept() never allocate. Draws come from
// rng.h, so a seed gives the same tokens on every platform for the same logits.
#pragma once

#include "sampler/rng.h"
#include "sampler/sampler_stages.h"

#include <cstdint>
#include <span>
#include <vector>

namespace tern {

// llama.cpp's LLAMA_DEFAULT_SEED: "pick a random seed".
constexpr uint64_t k_sampler_random_seed = 0xFFFFFFFFull;

struct SamplerParams {
    float    temp              = 0.8f;   // <= 0: greedy (argmax after penalties)
    int32_t  top_k             = 40;     // <= 0: disabled
    float    top_p             = 0.95f;  // (0, 1]; 1: disabled
    float    min_p             = 0.05f;  // [0, 1]; 0: disabled
    float    repeat_penalty    = 1.0f;   // > 0; 1: disabled
    int32_t  repeat_last_n     = 64;     // window of accepted tokens the penalties look at; 0: none, -1: all since reset()
    float    frequency_penalty = 0.0f;   // subtracted count times
    float    presence_penalty  = 0.0f;   // subtracted once if count > 0
    uint64_t seed              = k_sampler_random_seed;
};

// Throws Error(invalid_argument) naming the flag, the allowed range and the value, e.g.
// "--temp must be >= 0 (got -1)". Values are rejected, never clamped.
void validate(const SamplerParams & params);

class Sampler {
public:
    // Validates params (see validate) and n_vocab >= 1; resolves k_sampler_random_seed through
    // std::random_device.
    Sampler(const SamplerParams & params, int32_t n_vocab);

    // logits: [n_vocab] f32 for the next position. Returns the chosen token id. NaN logits count as
    // -inf, +inf as the largest finite float. Throws Error(invalid_argument) on a size mismatch.
    int32_t sample(std::span<const float> logits);

    // Whether the chain starts with top-k: temp > 0, 0 < top_k < n_vocab, no penalties. Then only
    // the top_k largest logits matter (sample_top_k).
    bool starts_with_top_k() const;

    // sample() for a sampler whose chain starts with top-k (starts_with_top_k()),
    // given only some rows: (id, logit) candidates that include every row that can be among the
    // top_k largest (those equal to the top_k-th too), in any order; the rest count as -inf. Gives
    // what sample() gives for the full logits (the stages' order is total), reading only the
    // candidates. Throws Error(invalid_argument) when the params do not start with top-k, for fewer
    // than top_k candidates or an id outside the vocabulary.
    int32_t sample_top_k(std::span<const Candidate> rows);

    // The chain after the penalties (top-k 0 where it keeps every row), for a backend that
    // samples on the device (Backend::sample).
    SamplingChain chain() const;
    // Whether the penalties change any logit (a window and a penalty other than neutral).
    bool has_penalties() const;
    // Whether sample() is the chain alone: temp > 0 and no penalties. Then a device may draw with
    // the chain and uniforms from next_uniform(), one per token, and give the same tokens.
    bool chain_only() const;
    // The random number the next draw would use (advances the stream: one per sampled token).
    float next_uniform() { return rng_.next_float(); }
    // The random stream's state, to rewind it past numbers drawn for steps that were discarded.
    const Rng & rng() const { return rng_; }
    void set_rng(const Rng & rng) { rng_ = rng; }

    // Records a token that entered the context (prompt or generated) for the penalties.
    // Throws Error(invalid_argument) if token is outside [0, n_vocab).
    void accept(int32_t token);

    // Forgets the accepted tokens and restarts the random stream from seed(): after reset() the
    // same logits give the same tokens again.
    void reset();

    // The seed in use (the resolved one when params.seed was k_sampler_random_seed).
    uint64_t seed() const { return seed_; }
    const SamplerParams & params() const { return params_; }

    // Applies the repetition / frequency / presence penalties of the current window to logits
    // ([n_vocab], in place), as sample() does first. For each token t with count c > 0 in the last
    // repeat_last_n accepted tokens:
    //   logit <= 0 ? logit *= repeat_penalty : logit /= repeat_penalty;  logit -= c * freq + presence.
    void apply_penalties(std::span<float> logits) const;

private:
    // NaN -> -inf, +inf -> the largest finite float (how sample() reads logits).
    static float finite_logit(float l);
    // top-k, top-p, min-p and the draw over candidates c, as sample() runs them after the penalties.
    int32_t draw_from(std::span<Candidate> c);
    void    count_add(int32_t token);
    void count_remove(int32_t token);

    SamplerParams params_;
    int32_t       n_vocab_;
    uint64_t      seed_;
    Rng           rng_;

    // Penalty window: ring_ holds the last repeat_last_n accepted tokens (unused when the window is
    // unlimited); counts_[t] is t's count in the window; present_ lists the tokens with count > 0,
    // present_pos_[t] is t's index in present_ (for O(1) removal).
    std::vector<int32_t> ring_;
    size_t               ring_head_ = 0;
    size_t               ring_size_ = 0;
    std::vector<int32_t> counts_;
    std::vector<int32_t> present_;      // [n_vocab], first n_present_ used
    std::vector<int32_t> present_pos_;  // [n_vocab]
    size_t               n_present_ = 0;

    // Scratch for sample(), sized n_vocab.
    std::vector<float>     work_;        // [n_vocab] penalised logits
    std::vector<Candidate> candidates_;  // [n_vocab]
    std::vector<double>    weights_;     // [n_vocab]
};

}  // namespace tern
