// Host emulation of lib/numerics.wgsl's exp_rn_fast: the same f32 operations (fma where the kernel
// writes fma), on every f32 bit pattern in [-103.97, 88.72], against expl() rounded to f32. Prints
// the largest relative error of the double-float result S + d before its rounding (the margin of
// Ziv's test must exceed it), how often the test falls back to exp_rn, and any wrong result; with a
// value, also a sample of x uniform in [-value, 0]. Not part of the build or the tests (the GPU test
// WebGpuNumerics.ExpRnFastGivesExpRnsBits is); a check for anyone who changes exp_rn_fast:
//   g++ -O2 -ffp-contract=off -std=c++20 -pthread tools/exp_rn_fast_check.cpp -o /tmp/exp_rn_fast_check
//   /tmp/exp_rn_fast_check [sample_range]      (all 2^32 patterns: ~11 CPU minutes over all cores)
// The 2^(j/64) table is rebuilt from exp2l (hi = nearest f32, lo = nearest f32 to the rest), which
// gives tools/gen_exp2_table.py's values.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

float table[64][2];

void two_sum(float a, float b, float & s, float & e) {
    s              = a + b;
    const float bb = s - a;
    e              = (a - (s - bb)) + (b - bb);
}

void fast_two_sum(float a, float b, float & s, float & e) {
    s = a + b;
    e = b - (s - a);
}

struct Result {
    float y;        // the rounded candidate, before the scaling by 2^k
    int   k;        // the scaling
    float s, d;     // the double-float it was rounded from
    bool  fallback; // Ziv's test (or a subnormal result) sends x to exp_rn
};

// exp_rn_fast past its special cases, step for step.
Result exp_fast(float x) {
    const float n  = std::nearbyint(x * 92.3324814f);
    const float r0 = std::fma(-n, 0.010833740234375f, x);
    const float ph = n * 3.31553815e-06f, pl = std::fma(n, 3.31553815e-06f, -ph);
    float rh, e1;
    two_sum(r0, ph, rh, e1);
    const float rl    = std::fma(-n, 2.57280464e-14f, e1 + pl);
    const float sh    = rh * rh, sl = std::fma(rh, rh, -sh);
    const float cube  = sh * rh * std::fma(std::fma(rh, 1.0f / 120.0f, 1.0f / 24.0f), rh, 1.0f / 6.0f);
    const float cross = rl * std::fma(0.5f * rh, rh, rh);
    const float small = ((cube + cross) + rl) + 0.5f * sl;
    float ah, al;
    fast_two_sum(rh, 0.5f * sh, ah, al);
    const float el = al + small;
    const int   ni = static_cast<int>(n);
    const float th = table[ni & 63][0], tl = table[ni & 63][1];
    const float prh = th * ah, prl = std::fma(th, ah, -prh);
    float s, se;
    fast_two_sum(th, prh, s, se);
    const float d = se + (prl + std::fma(th, el, std::fma(tl, ah, tl)));
    const float y = s + d;
    const float e = (s - y) + d;
    float half_ulp = std::bit_cast<float>((std::bit_cast<uint32_t>(y) & 0x7f800000u) - 0x0c000000u);
    if ((std::bit_cast<uint32_t>(y) & 0x007fffffu) == 0 && e < 0.0f) half_ulp *= 0.5f;
    const int k = ni >> 6;
    return {y, k, s, d, std::fabs(std::fabs(e) - half_ulp) <= y * 1.13686838e-13f || k < -125};
}

bool in_range(float x) { return x <= 88.72284f && x >= -103.97209f; }

float want(float x) { return static_cast<float>(expl(static_cast<long double>(x))); }

}  // namespace

int main(int argc, char ** argv) {
    for (int j = 0; j < 64; ++j) {
        const long double v = exp2l(j / 64.0L);
        table[j][0]         = static_cast<float>(v);
        table[j][1]         = static_cast<float>(v - table[j][0]);
    }
    if (argc > 1) {
        const double lim = std::atof(argv[1]);
        uint64_t     state = 12345, fallbacks = 0, wrong = 0;
        const uint64_t n = 200000000;
        for (uint64_t i = 0; i < n; ++i) {
            state         = state * 6364136223846793005ull + 1442695040888963407ull;
            const float x = static_cast<float>(-lim * static_cast<double>(state >> 11) / 9007199254740992.0);
            const Result r = exp_fast(x);
            if (r.fallback) ++fallbacks;
            else if (std::ldexp(r.y, r.k) != want(x)) ++wrong;
        }
        std::printf("x uniform in [-%g, 0], %llu calls: %llu fallbacks (one in %.0f), %llu wrong\n", lim,
                    static_cast<unsigned long long>(n), static_cast<unsigned long long>(fallbacks),
                    static_cast<double>(n) / static_cast<double>(std::max<uint64_t>(fallbacks, 1)),
                    static_cast<unsigned long long>(wrong));
        return wrong == 0 ? 0 : 1;
    }
    std::atomic<uint64_t> total{0}, fallbacks{0}, wrong{0};
    std::vector<double>   worst(std::max(1u, std::thread::hardware_concurrency()), 0.0);
    std::vector<std::thread> threads;
    const uint64_t           parts = worst.size();
    for (uint64_t t = 0; t < parts; ++t) {
        threads.emplace_back([&, t] {
            uint64_t tot = 0, fb = 0, bad = 0;
            for (uint64_t b = (uint64_t{1} << 32) * t / parts; b < (uint64_t{1} << 32) * (t + 1) / parts; ++b) {
                const float x = std::bit_cast<float>(static_cast<uint32_t>(b));
                if (!in_range(x)) continue;
                ++tot;
                const Result      r     = exp_fast(x);
                const long double exact = std::ldexp(expl(static_cast<long double>(x)), -r.k);
                if (r.k >= -125) {
                    const long double v = static_cast<long double>(r.s) + static_cast<long double>(r.d);
                    worst[t] = std::max(worst[t], static_cast<double>(fabsl((v - exact) / exact)));
                }
                if (r.fallback) ++fb;
                else if (std::ldexp(r.y, r.k) != want(x)) ++bad;
            }
            total += tot;
            fallbacks += fb;
            wrong += bad;
        });
    }
    for (auto & th : threads) th.join();
    const double w = *std::max_element(worst.begin(), worst.end());
    std::printf("%llu inputs: largest relative error of S + d %.3g (2^%.2f), margin 2^-43; %llu fallbacks "
                "(one in %.0f); %llu wrong\n",
                static_cast<unsigned long long>(total.load()), w, std::log2(w),
                static_cast<unsigned long long>(fallbacks.load()),
                static_cast<double>(total.load()) / static_cast<double>(std::max<uint64_t>(fallbacks.load(), 1)),
                static_cast<unsigned long long>(wrong.load()));
    return wrong == 0 && w < 0x1p-43 ? 0 : 1;
}
