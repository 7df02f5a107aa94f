// The truncation and draw stages of the sampling chain (DESIGN.md: penalties -> top-k -> top-p ->
// min-p -> temperature -> draw), as free functions over a candidate list so each can be tested on
// its own. None of them allocates: each works in place on a span and returns how many candidates
// remain at its front. Semantics follow llama.cpp's samplers of the same names; every result is a
// deterministic function of the inputs (total order on ties, platform-independent exp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tern {

struct Candidate {
    int32_t id;
    float   logit;
};

// The one order used by every stage: higher logit first; on equal logits, lower id first. It is a
// strict total order, so which tokens survive a cut through a tie never depends on the std library.
inline bool candidate_before(const Candidate & a, const Candidate & b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// e^x for x <= 0 using only IEEE +, -, *, / and an exact power-of-two scaling, so the result is the
// same on every platform (libm exp() may differ in the last ulp). Relative error < 1e-15; 0 for
// x < -745 and for -inf.
double exp_nonpositive(double x);

// Index of the largest value; the lowest index on ties (and 0 if every value is -inf or NaN).
size_t argmax(std::span<const float> values);

// Sorts best first (candidate_before).
void sort_candidates(std::span<Candidate> c);

// Keeps the k best candidates (1 <= k <= c.size()) at the front, sorted best first. Returns k.
size_t top_k_stage(std::span<Candidate> c, size_t k);

// c sorted best first. Keeps the shortest prefix whose softmax mass (at temperature 1) reaches
// p, i.e. up to and including the candidate at which the cumulative probability first is >= p.
// Returns the prefix length (>= 1).
size_t top_p_stage(std::span<const Candidate> c, float p);

// Keeps, in their current order, the candidates whose probability is at least min_p times the
// largest one's: exp(logit - max_logit) >= min_p. Returns how many (>= 1: the maximum always stays).
size_t min_p_stage(std::span<Candidate> c, float min_p);

// The chain after the penalties, as one value (what a backend samples with, Backend::sample).
struct SamplingChain {
    float   temp  = 0.8f;  // > 0 (greedy is the argmax, not a chain)
    int32_t top_k = 0;     // 0: off (so is k >= n_vocab)
    float   top_p = 1.0f;  // 1: off
    float   min_p = 0.0f;  // 0: off
};

// The chain over every logit of one step ([n_vocab], NaN read as -inf, +inf as the largest finite
// float), drawing with u in [0, 1): top-k, top-p, min-p, the draw, as Sampler::sample runs them
// after its penalties. Allocates its scratch (the reference Backend::sample runs; Sampler keeps
// its own).
int32_t sample_chain(std::span<const float> logits, const SamplingChain & chain, float u);

// The chain on candidates c (finite-read logits, in id order or any order the caller had them):
// top-k (sorting), top-p (sorting if top-k did not), min-p, the draw with u. weights: scratch of
// c.size() doubles. Returns the chosen candidate's id.
int32_t run_chain(std::span<Candidate> c, const SamplingChain & chain, float u, std::span<double> weights);

// Draws one candidate with probability softmax(logit / temp) (temp > 0), walking c in order and
// picking the first whose cumulative weight exceeds u * total, u uniform in [0, 1). weights is
// scratch space of at least c.size() doubles. Returns the index into c.
size_t draw_stage(std::span<const Candidate> c, float temp, double u, std::span<double> weights);

}  // namespace tern
