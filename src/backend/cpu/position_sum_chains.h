// cpu::sum_positions as scalar chains, and the scalar parts of issue 52's block order inside one
// superblock, shared by the attention files of every set (no intrinsics; internal linkage, so each
// file keeps its own copy under its own flags).
#pragma once

#include <cstdint>

namespace tern::cpu {
namespace {

// l[b] = block b's terms t[32 b .. min(32 b + 32, n)) summed in one chain from 0, for every block of
// n >= 1 terms (at most 16): 4 blocks' chains side by side in registers. The block sums of both orders:
// sum_positions_chains adds them up; the block order's l_b are these.
inline void block_chains(const float * t, int64_t n, float * l) {
    alignas(64) static const float zeros[32] = {};
    const int64_t nb = n / 32;  // whole blocks, then a part
    for (int64_t b = 0; b < nb; b += 4) {
        const float * r0 = t + 32 * b;
        const float * r1 = b + 1 < nb ? r0 + 32 : zeros;
        const float * r2 = b + 2 < nb ? r0 + 64 : zeros;
        const float * r3 = b + 3 < nb ? r0 + 96 : zeros;
        float         a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        for (int j = 0; j < 32; ++j) {
            a0 = a0 + r0[j];
            a1 = a1 + r1[j];
            a2 = a2 + r2[j];
            a3 = a3 + r3[j];
        }
        l[b] = a0;
        if (b + 1 < nb) l[b + 1] = a1;
        if (b + 2 < nb) l[b + 2] = a2;
        if (b + 3 < nb) l[b + 3] = a3;
    }
    if (n % 32 != 0) {
        float part = 0.0f;
        for (int64_t p = 32 * nb; p < n; ++p) part = part + t[p];
        l[nb] = part;
    }
}

// cpu::sum_positions of n >= 0 terms, the same sums in the same order: each superblock's block sums
// by block_chains (scalar chains, 4 blocks side by side in registers), then added in order from 0. The
// gathers this replaces (blocks in the lanes) were 12% of the AVX-512 BM_AttentionLayer's samples at 64
// positions, and one chain per block kept in an array 9% (each add waited on a store; block_chains
// stores a block's sum once, after its chain).
inline float sum_positions_chains(const float * t, int64_t n) {
    float total = 0.0f;
    for (int64_t s0 = 0; s0 < n; s0 += 512) {
        const int64_t len = n - s0 < 512 ? n - s0 : 512;
        float         l[16];
        block_chains(t + s0, len, l);
        float super = 0.0f;
        for (int64_t b = 0; b < (len + 31) / 32; ++b) super = super + l[b];
        total = total + super;
    }
    return total;
}

// ------------------------------------------------------------------------- the block order (issue 52)
// One superblock of a row longer than 512 positions in the block order (cpu_ops.h, "Attention over a
// row of positions", steps 2-4): the kernels compute each block's max m_b and e_i = exp_fixed(s_i - m_b)
// in vectors (l_b by block_chains); the rest is scalar and short (at most 16 blocks and 8 chunks).

// How P.V joins one superblock's blocks (cpu::join_partials' operations): block b's o_b weighs
// a[b] = exp_fixed(m_b - M_c) in its chunk c = b / 2, chunk c's O_c weighs A[c] = exp_fixed(M_c - M)
// in the superblock; m and l are the superblock's M and L.
struct BlockJoins {
    float a[16], A[8];
    float m, l;
};

// std::max(a, b): a unless a < b (so a max over NaN-free values keeps the earlier of equal ones).
inline float max_first(float a, float b) { return a < b ? b : a; }

// A block's max from a vector reduction (exact in any order), as the reference takes it: where it is
// 0, which zero (+0 or -0) is the first in position order's, so the block's rem terms (at most 32 read)
// are scanned again with max_first.
inline float block_max_as_reference(float mb, const float * sb, int64_t rem) {
    if (mb != 0.0f) return mb;
    mb = -__FLT_MAX__;
    for (int64_t i = 0; i < rem && i < 32; ++i) mb = max_first(mb, sb[i]);
    return mb;
}

// The joins of nb <= 16 blocks from their maxima m[b] and sums l[b]; exp16(x) applies exp_fixed to
// x[0 .. 16) in place (the set's vector exp_fixed). Chunk c = blocks 2c, 2c + 1 (the last may have
// one): M_c = max, L_c = (0 + a_2c l_2c) + a_2c+1 l_2c+1; the superblock: M = max over M_c,
// L = ((0 + A_0 L_0) + A_1 L_1) + ... (each product rounded, then each sum).
template <class Exp16> inline void block_joins(const float * m, const float * l, int64_t nb, Exp16 && exp16, BlockJoins & j) {
    const int64_t     nc = (nb + 1) / 2;
    float             mc[8], lc[8];
    alignas(64) float x[16] = {};
    for (int64_t c = 0; c < nc; ++c) mc[c] = 2 * c + 1 < nb ? max_first(m[2 * c], m[2 * c + 1]) : m[2 * c];
    for (int64_t b = 0; b < nb; ++b) x[b] = m[b] - mc[b / 2];
    exp16(x);
    for (int64_t b = 0; b < 16; ++b) j.a[b] = x[b];
    for (int64_t c = 0; c < nc; ++c) {
        float s = 0.0f + j.a[2 * c] * l[2 * c];
        if (2 * c + 1 < nb) s = s + j.a[2 * c + 1] * l[2 * c + 1];
        lc[c] = s;
    }
    float mx = mc[0];
    for (int64_t c = 1; c < nc; ++c) mx = max_first(mx, mc[c]);
    for (int64_t i = 0; i < 16; ++i) x[i] = i < nc ? mc[i] - mx : 0.0f;
    exp16(x);
    float sum = 0.0f;
    for (int64_t c = 0; c < 8; ++c) j.A[c] = x[c];
    for (int64_t c = 0; c < nc; ++c) sum = sum + j.A[c] * lc[c];
    j.m = mx;
    j.l = sum;
}

}  // namespace
}  // namespace tern::cpu
