// Truncation and draw stages of the sampling chain; see sampler_stages.h.
#include "sampler/sampler_stages.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tern {

double exp_nonpositive(double x) {
    if (!(x > -745.0)) return 0.0;  // also -inf and NaN; e^-745 is below the smallest subnormal
    if (x > 0.0) x = 0.0;
    // k = nearest integer to x / ln2 (floor(y + 0.5) is exact here: |y| < 1075).
    constexpr double inv_ln2 = 1.4426950408889634074;
    constexpr double ln2_hi  = 6.93147180369123816490e-01;  // ln2 with the low 32 bits of mantissa clear
    constexpr double ln2_lo  = 1.90821492927058770002e-10;  // ln2 - ln2_hi
    const double     k       = std::floor(x * inv_ln2 + 0.5);
    const double     r       = (x - k * ln2_hi) - k * ln2_lo;  // |r| <= 0.35; k * ln2_hi is exact
    // Taylor series of e^r to degree 13: the omitted term is below 0.35^14 / 14! ~ 5e-18.
    double p = 1.0 / 6227020800.0;  // 1/13!
    constexpr double inv_fact[13] = {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
                                     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,     1.0 / 120.0,
                                     1.0 / 24.0,        1.0 / 6.0,        0.5,             1.0,
                                     1.0};
    for (double c : inv_fact) p = p * r + c;
    return std::ldexp(p, static_cast<int>(k));
}

size_t argmax(std::span<const float> values) {
    size_t best = 0;
    float  max  = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] > max) {  // strict: the first maximum wins; NaN never compares greater
            max  = values[i];
            best = i;
        }
    }
    return best;
}

void sort_candidates(std::span<Candidate> c) { std::sort(c.begin(), c.end(), candidate_before); }

size_t top_k_stage(std::span<Candidate> c, size_t k) {
    k = std::clamp<size_t>(k, 1, c.size());
    std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end(), candidate_before);
    return k;
}

size_t top_p_stage(std::span<const Candidate> c, float p) {
    if (c.size() <= 1) return c.size();
    const double max   = c[0].logit;
    double       total = 0.0;
    for (const Candidate & x : c) total += exp_nonpositive(x.logit - max);
    // Compare unnormalised: cumulative >= p * total  <=>  cumulative probability >= p.
    const double target = static_cast<double>(p) * total;
    double       cum    = 0.0;
    for (size_t i = 0; i < c.size(); ++i) {
        cum += exp_nonpositive(c[i].logit - max);
        if (cum >= target) return i + 1;
    }
    return c.size();  // rounding kept cum just below p * total: keep everything
}

size_t min_p_stage(std::span<Candidate> c, float min_p) {
    if (c.empty()) return 0;
    float max = c[0].logit;
    for (const Candidate & x : c) max = std::max(max, x.logit);
    size_t kept = 0;
    for (const Candidate & x : c) {
        if (exp_nonpositive(static_cast<double>(x.logit) - max) >= min_p) c[kept++] = x;
    }
    return kept > 0 ? kept : 1;  // the maximum has weight 1 >= min_p unless every logit is -inf
}

int32_t run_chain(std::span<Candidate> c, const SamplingChain & ch, float u, std::span<double> weights) {
    bool sorted = false;
    if (ch.top_k > 0 && static_cast<size_t>(ch.top_k) < c.size()) {
        c      = c.first(top_k_stage(c, static_cast<size_t>(ch.top_k)));
        sorted = true;
    }
    if (ch.top_p < 1.0f) {
        if (!sorted) sort_candidates(c);
        c = c.first(top_p_stage(c, ch.top_p));
    }
    if (ch.min_p > 0.0f) c = c.first(min_p_stage(c, ch.min_p));
    return c[draw_stage(c, ch.temp, static_cast<double>(u), weights)].id;
}

int32_t sample_chain(std::span<const float> logits, const SamplingChain & ch, float u) {
    constexpr float        inf = std::numeric_limits<float>::infinity();
    std::vector<Candidate> c(logits.size());
    for (size_t i = 0; i < c.size(); ++i) {
        const float l = logits[i];
        c[i]          = {static_cast<int32_t>(i), std::isnan(l) ? -inf : (l == inf ? std::numeric_limits<float>::max() : l)};
    }
    std::vector<double> weights(c.size());
    return run_chain(c, ch, u, weights);
}

size_t draw_stage(std::span<const Candidate> c, float temp, double u, std::span<double> weights) {
    if (c.size() <= 1) return 0;
    float max = c[0].logit;
    for (const Candidate & x : c) max = std::max(max, x.logit);
    if (max == -std::numeric_limits<float>::infinity()) return 0;  // nothing has any mass
    const double inv_temp = 1.0 / static_cast<double>(temp);
    double       total    = 0.0;
    for (size_t i = 0; i < c.size(); ++i) {
        weights[i] = exp_nonpositive((static_cast<double>(c[i].logit) - max) * inv_temp);
        total += weights[i];
    }
    const double target = u * total;
    double       cum    = 0.0;
    size_t       last   = 0;  // last candidate with non-zero weight (the fallback for rounding)
    for (size_t i = 0; i < c.size(); ++i) {
        if (weights[i] == 0.0) continue;
        cum += weights[i];
        last = i;
        if (cum > target) return i;
    }
    return last;
}

}  // namespace tern
