// The accuracy of cpu::exp_fixed (the softmax's exp, src/backend/cpu/cpu_ops.h) on every f32 in
// [-86.9, 88.7] against expl(): the largest error in ulps of the exact value, where it occurs, how
// many results are 1 ulp or more off and the fraction that is correctly rounded. Not part of the
// build or the tests (CpuReference.ExpFixed checks a sample); a check for anyone who changes
// exp_fixed (the GPU's copy must then change with it: WebGpuNumerics.ExpFixedGivesTheCpusBits):
//   g++ -O2 -ffp-contract=off -std=c++20 -pthread -Isrc tools/exp_fixed_check.cpp \
//       src/backend/cpu/cpu_ops.cpp -o /tmp/exp_fixed_check && /tmp/exp_fixed_check
// (~3 CPU minutes in all, spread over the cores.)
#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

struct Tally {
    uint64_t inputs = 0, correctly_rounded = 0, one_ulp_or_more = 0;
    double   worst_ulps = 0;
    float    worst_x    = 0;
};

// Bit patterns u = first, first + step, ... below 2^32.
Tally scan(uint64_t first, uint64_t step) {
    Tally t;
    for (uint64_t u = first; u < (uint64_t{1} << 32); u += step) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(u));
        if (!(x >= -86.9f && x <= 88.7f)) continue;
        const long double exact = expl(static_cast<long double>(x));
        const float       got   = tern::cpu::exp_fixed(x);
        const double      ulp   = std::ldexp(1.0, std::ilogb(static_cast<float>(exact)) - 23);
        const double      err   = static_cast<double>(std::fabs(static_cast<long double>(got) - exact)) / ulp;
        ++t.inputs;
        t.correctly_rounded += got == static_cast<float>(exact);
        t.one_ulp_or_more += err >= 1.0;
        if (err > t.worst_ulps) {
            t.worst_ulps = err;
            t.worst_x    = x;
        }
    }
    return t;
}

}  // namespace

int main() {
    const unsigned     n_threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<Tally> parts(n_threads);
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < n_threads; ++i) pool.emplace_back([&parts, i, n_threads] { parts[i] = scan(i, n_threads); });
    for (auto & th : pool) th.join();
    Tally all;
    for (const Tally & t : parts) {
        all.inputs += t.inputs;
        all.correctly_rounded += t.correctly_rounded;
        all.one_ulp_or_more += t.one_ulp_or_more;
        if (t.worst_ulps > all.worst_ulps) {
            all.worst_ulps = t.worst_ulps;
            all.worst_x    = t.worst_x;
        }
    }
    std::printf("%llu inputs in [-86.9, 88.7]: %.4f%% correctly rounded, %llu off by 1 ulp or more, "
                "the largest error %.4f ulp at x = %a\n",
                static_cast<unsigned long long>(all.inputs), 100.0 * static_cast<double>(all.correctly_rounded) / static_cast<double>(all.inputs),
                static_cast<unsigned long long>(all.one_ulp_or_more), all.worst_ulps, static_cast<double>(all.worst_x));
    return all.worst_ulps < 1.01 ? 0 : 1;
}
