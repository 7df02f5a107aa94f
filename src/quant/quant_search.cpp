// Scale searches; see quant_search.h.
#include "quant/quant_search.h"

#include <algorithm>
#include <cmath>

namespace tern::quant {
namespace {

// Candidate grid: the extreme element is sent to level -(L + 0.4 - 0.1 k), k = 0..20, i.e. from just
// inside rounding up to L (slightly clipping it) down to ~1.6 levels below L (giving the bulk of the
// values finer steps at the cost of the extreme one). 21 candidates, as many as a few Lloyd steps.
constexpr int   k_grid_steps = 21;
constexpr float k_grid_top   = 0.4f;
constexpr float k_grid_step  = 0.1f;
// Refinement rounds after the grid: assign every value to its nearest level for the current scale,
// then re-fit the scale by least squares; stops early when the error no longer drops.
constexpr int k_lloyd_rounds = 3;

}  // namespace

int round_clamp(float v, int lo, int hi) {
    const float c = std::fmin(std::fmax(v, static_cast<float>(lo)), static_cast<float>(hi));  // NaN -> lo
    return static_cast<int>(std::lround(c));
}

double squared_error(const float * x, int n, float scale, const int8_t * q) {
    double e = 0;
    for (int i = 0; i < n; ++i) {
        const double d = static_cast<double>(x[i]) - static_cast<double>(scale) * q[i];
        e += d * d;
    }
    return e;
}

double squared_error(const float * x, int n, float scale, float min, const uint8_t * q) {
    double e = 0;
    for (int i = 0; i < n; ++i) {
        const double d = static_cast<double>(x[i]) - (static_cast<double>(scale) * q[i] - static_cast<double>(min));
        e += d * d;
    }
    return e;
}

float search_symmetric(const float * x, int n, int nmax_neg, int nmax_pos, int8_t * q) {
    float amax = 0, extreme = 0;
    for (int i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), extreme = x[i];
    }
    if (amax == 0 || !std::isfinite(amax)) {
        std::fill(q, q + n, 0);
        return 0.0f;
    }
    // For a fixed set of integers q the best scale is sum(x q) / sum(q q), which leaves an error of
    // sum(x x) - sum(x q)^2 / sum(q q): maximise sum(x q)^2 / sum(q q) over the candidates.
    int8_t best_q[256];
    double best_score = -1.0, best_scale = 0.0;
    auto   try_iscale = [&](float iscale) {
        double sxq = 0, sqq = 0;
        int8_t cand[256];
        for (int i = 0; i < n; ++i) {
            cand[i] = static_cast<int8_t>(round_clamp(x[i] * iscale, -nmax_neg, nmax_pos));
            sxq += static_cast<double>(x[i]) * cand[i];
            sqq += static_cast<double>(cand[i]) * cand[i];
        }
        if (sqq <= 0) return;
        const double score = sxq * sxq / sqq;
        if (score > best_score) {
            best_score = score;
            best_scale = sxq / sqq;
            std::copy(cand, cand + n, best_q);
        }
    };
    for (int k = 0; k < k_grid_steps; ++k) {
        const float level = static_cast<float>(nmax_neg) + k_grid_top - k_grid_step * static_cast<float>(k);
        try_iscale(-level / extreme);  // extreme -> -level: the side with nmax_neg levels
    }
    for (int round = 0; round < k_lloyd_rounds && best_scale != 0.0; ++round) {
        const double before = best_score;
        try_iscale(static_cast<float>(1.0 / best_scale));
        if (best_score <= before) break;
    }
    std::copy(best_q, best_q + n, q);
    return static_cast<float>(best_scale);
}

ScaleMin search_asymmetric(const float * x, int n, int nmax, uint8_t * q) {
    float lo = 0, hi = 0;  // lo <= 0: the lowest level, -min, cannot be above zero
    for (int i = 0; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    if (!(hi > lo) || !std::isfinite(hi - lo)) {
        std::fill(q, q + n, 0);
        return {};
    }
    uint8_t  best_q[256];
    double   best_err = -1;
    ScaleMin best;
    // Fits x ~= a q + b by least squares for the given integers, with b <= 0 (b = -min); returns false
    // if no positive scale fits (all q zero, or x falling as q rises).
    auto fit = [&](const uint8_t * cand, double & a, double & b) {
        double sq = 0, sqq = 0, sx = 0, sxq = 0;
        for (int i = 0; i < n; ++i) {
            sq += cand[i], sqq += static_cast<double>(cand[i]) * cand[i];
            sx += x[i], sxq += static_cast<double>(x[i]) * cand[i];
        }
        const double det = n * sqq - sq * sq;
        if (det <= 0) {  // all q equal: only a scale (no offset) can be fitted, if q is not 0
            if (sqq <= 0) return false;
            a = sxq / sqq, b = 0;
            return a > 0;
        }
        a = (n * sxq - sq * sx) / det;
        b = (sx - a * sq) / n;
        if (b > 0) b = 0, a = sxq / sqq;  // the offset can only lower the levels
        return a > 0;
    };
    auto try_assignment = [&](const uint8_t * cand) {
        double a = 0, b = 0;
        if (!fit(cand, a, b)) return;
        const float  scale = static_cast<float>(a), min = static_cast<float>(-b);
        const double err   = squared_error(x, n, scale, min, cand);
        if (best_err < 0 || err < best_err) {
            best_err = err;
            best     = {scale, min};
            std::copy(cand, cand + n, best_q);
        }
    };
    uint8_t cand[256];
    for (int k = 0; k < k_grid_steps; ++k) {
        // nmax + 1 ... nmax - 1 steps across [lo, hi]: the range's ends round in or just outside.
        const float iscale = (static_cast<float>(nmax) + 1.0f - k_grid_step * static_cast<float>(k)) / (hi - lo);
        for (int i = 0; i < n; ++i) cand[i] = static_cast<uint8_t>(round_clamp(iscale * (x[i] - lo), 0, nmax));
        try_assignment(cand);
    }
    for (int round = 0; round < k_lloyd_rounds && best.scale > 0; ++round) {
        const double before = best_err;
        for (int i = 0; i < n; ++i) cand[i] = static_cast<uint8_t>(round_clamp((x[i] + best.min) / best.scale, 0, nmax));
        try_assignment(cand);
        if (!(best_err < before)) break;
    }
    if (best_err < 0) {  // every candidate degenerate: one level fits best; use its mean as the offset
        std::fill(q, q + n, 0);
        double sx = 0;
        for (int i = 0; i < n; ++i) sx += x[i];
        return {0.0f, static_cast<float>(std::max(0.0, -sx / n))};
    }
    std::copy(best_q, best_q + n, q);
    return best;
}

}  // namespace tern::quant
