// Sampler: parameter validation, the penalty window and the chain of sampler_stages.h.
#include "sampler/sampler.h"

#include "core/error.h"

#include <cmath>
#include <limits>
#include <random>

namespace tern {
namespace {

void require(bool ok, const char * flag, const char * rule, double got, const char * hint = "") {
    if (!ok) fail(ErrorKind::invalid_argument, format("%s must be %s (got %g)", flag, rule, got), hint);
}

uint64_t random_seed() {
    std::random_device rd;
    uint64_t           s = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    if (s == k_sampler_random_seed) s ^= 0x5bd1e995ull;  // a resolved seed never means "random" again
    return s;
}

}  // namespace

void validate(const SamplerParams & p) {
    require(std::isfinite(p.temp) && p.temp >= 0.0f, "--temp", "a finite number >= 0", p.temp,
            "use --temp 0 for greedy decoding");
    require(p.top_p > 0.0f && p.top_p <= 1.0f, "--top-p", "in (0, 1]", p.top_p, "use --top-p 1 to disable it");
    require(p.min_p >= 0.0f && p.min_p <= 1.0f, "--min-p", "in [0, 1]", p.min_p, "use --min-p 0 to disable it");
    require(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f, "--repeat-penalty", "a finite number > 0",
            p.repeat_penalty, "use --repeat-penalty 1 to disable it");
    require(p.repeat_last_n >= -1, "--repeat-last-n", ">= -1", p.repeat_last_n,
            "0 disables the penalties, -1 looks at every token since the start");
    require(std::isfinite(p.frequency_penalty), "--frequency-penalty", "a finite number", p.frequency_penalty);
    require(std::isfinite(p.presence_penalty), "--presence-penalty", "a finite number", p.presence_penalty);
}

Sampler::Sampler(const SamplerParams & params, int32_t n_vocab) : params_(params), n_vocab_(n_vocab) {
    validate(params);
    if (n_vocab < 1) fail(ErrorKind::invalid_argument, format("sampler: vocabulary size must be >= 1 (got %d)", n_vocab));
    seed_ = params.seed == k_sampler_random_seed ? random_seed() : params.seed;
    rng_.reseed(seed_);
    const auto n = static_cast<size_t>(n_vocab);
    if (params.repeat_last_n > 0) ring_.assign(static_cast<size_t>(params.repeat_last_n), 0);
    counts_.assign(n, 0);
    present_.assign(n, 0);
    present_pos_.assign(n, 0);
    work_.assign(n, 0.0f);
    candidates_.assign(n, Candidate{0, 0.0f});
    weights_.assign(n, 0.0);
}

void Sampler::count_add(int32_t token) {
    if (counts_[token]++ == 0) {
        present_pos_[token]   = static_cast<int32_t>(n_present_);
        present_[n_present_++] = token;
    }
}

void Sampler::count_remove(int32_t token) {
    if (--counts_[token] == 0) {  // swap-remove token from present_
        const int32_t pos  = present_pos_[token];
        const int32_t last = present_[--n_present_];
        present_[pos]      = last;
        present_pos_[last] = pos;
    }
}

void Sampler::accept(int32_t token) {
    if (token < 0 || token >= n_vocab_) {
        fail(ErrorKind::invalid_argument,
             format("sampler: token id %d is outside the vocabulary [0, %d)", token, n_vocab_));
    }
    if (params_.repeat_last_n == 0) return;
    if (params_.repeat_last_n > 0) {
        if (ring_size_ == ring_.size()) {  // full: evict the oldest, which sits where the next one goes
            count_remove(ring_[ring_head_]);
        } else {
            ++ring_size_;
        }
        ring_[ring_head_] = token;
        ring_head_        = (ring_head_ + 1) % ring_.size();
    }
    count_add(token);
}

void Sampler::reset() {
    for (size_t i = 0; i < n_present_; ++i) counts_[present_[i]] = 0;
    n_present_ = 0;
    ring_head_ = 0;
    ring_size_ = 0;
    rng_.reseed(seed_);
}

void Sampler::apply_penalties(std::span<float> logits) const {
    if (logits.size() != static_cast<size_t>(n_vocab_)) {
        fail(ErrorKind::invalid_argument,
             format("sampler: logits have %zu entries, expected n_vocab = %d", logits.size(), n_vocab_));
    }
    const float rep = params_.repeat_penalty, freq = params_.frequency_penalty, pres = params_.presence_penalty;
    if (rep == 1.0f && freq == 0.0f && pres == 0.0f) return;
    for (size_t i = 0; i < n_present_; ++i) {
        const int32_t t = present_[i];
        const int32_t c = counts_[t];
        float &       l = logits[static_cast<size_t>(t)];
        l               = l <= 0.0f ? l * rep : l / rep;
        l -= static_cast<float>(c) * freq + pres;
    }
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (logits.size() != static_cast<size_t>(n_vocab_)) {
        fail(ErrorKind::invalid_argument,
             format("sampler: logits have %zu entries, expected n_vocab = %d", logits.size(), n_vocab_));
    }
    for (size_t i = 0; i < logits.size(); ++i) work_[i] = finite_logit(logits[i]);
    apply_penalties(work_);

    if (params_.temp <= 0.0f) return static_cast<int32_t>(argmax(work_));

    std::span<Candidate> c(candidates_);
    for (size_t i = 0; i < c.size(); ++i) c[i] = {static_cast<int32_t>(i), work_[i]};
    return draw_from(c);
}

float Sampler::finite_logit(float l) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    return std::isnan(l) ? -inf : (l == inf ? std::numeric_limits<float>::max() : l);
}

// The chain after the penalties, on candidates c (temp > 0): top-k, top-p, min-p, the draw.
int32_t Sampler::draw_from(std::span<Candidate> c) { return run_chain(c, chain(), rng_.next_float(), weights_); }

SamplingChain Sampler::chain() const {
    const SamplerParams & sp = params_;
    return {sp.temp, sp.top_k > 0 && sp.top_k < n_vocab_ ? sp.top_k : 0, sp.top_p, sp.min_p};
}

bool Sampler::has_penalties() const {
    return params_.repeat_last_n != 0 &&
           (params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f);
}

bool Sampler::starts_with_top_k() const {
    const SamplerParams & sp = params_;
    return sp.temp > 0.0f && sp.top_k > 0 && sp.top_k < n_vocab_ && sp.repeat_penalty == 1.0f &&
           sp.frequency_penalty == 0.0f && sp.presence_penalty == 0.0f;
}

bool Sampler::chain_only() const { return params_.temp > 0.0f && !has_penalties(); }

int32_t Sampler::sample_top_k(std::span<const Candidate> rows) {
    const SamplerParams & sp = params_;
    if (!starts_with_top_k()) {
        fail(ErrorKind::invalid_argument,
             "sampler: sample_top_k needs temp > 0, 0 < top_k < n_vocab and no penalties",
             "call sample() with every logit");
    }
    if (rows.size() < static_cast<size_t>(sp.top_k) || rows.size() > candidates_.size()) {
        fail(ErrorKind::invalid_argument, format("sampler: %zu candidate rows for top-k %d (vocabulary %d)",
                                                 rows.size(), sp.top_k, n_vocab_));
    }
    std::span<Candidate> c(candidates_.data(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        const int32_t id = rows[i].id;
        if (id < 0 || id >= n_vocab_) {
            fail(ErrorKind::invalid_argument, format("sampler: candidate id %d is outside [0, %d)", id, n_vocab_));
        }
        c[i] = {id, finite_logit(rows[i].logit)};
    }
    // sample() keeps the top_k best of all n_vocab; every one of them is here, and the order is
    // total. (With exactly top_k rows draw_from skips the cut, but they must still be sorted.)
    if (c.size() == static_cast<size_t>(sp.top_k)) sort_candidates(c);
    return draw_from(c);
}

}  // namespace tern
