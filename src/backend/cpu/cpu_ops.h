// Scalar reference kernels of the CPU backend, one row or one head at a time. Their numerics follow
// bitnet.cpp's decode path (FORMATS.md §4.6-§4.10); each says where it differs and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::cpu {

// The halving sum, tern's fixed order for f32 sums that GPUs reproduce bit for bit: t[0..p) (p a
// power of two; shorter sums are zero-padded to one) is reduced by levels h = p/2, p/4, ..., 1, each
// adding t[i + h] onto t[i] for i < h; returns t[0] (t is overwritten). Zero padding to any larger
// power of two gives the same bits (for sums that cannot be -0), so a GPU may pad to its workgroup
// (or a 32-lane team) and reduce across invocations at distances WG/2 .. 1 (or 16 .. 1).
float halving_sum(float * t, int64_t p);

// sum x[i]^2 (each square rounded to f32) in the block-halving order: the squares of each block of
// k_norm_block consecutive elements (the last zero-padded) in the halving order, then the block sums
// in the halving order. A GPU kernel that writes a vector in workgroups of whole blocks can leave
// the next kernel the block sums of its squares instead of the whole reduction (the decode norm
// statistics, src/backend/webgpu/README.md).
inline constexpr int64_t k_norm_block = 32;
float                    sum_squares(const float * x, int64_t n);

// y = (x * w) * (1 / sqrt(mean(x^2) + eps)): f32 squares summed in the block-halving order (ggml sums
// them in double: docs/architecture.md, "Numerics", says why tern does not), mean = sum / n in f32,
// scale = 1.0f / sqrtf(mean + eps); the weight multiply first, each product rounded to f32. (ggml
// multiplies by the scale first; tern weights first, so that max |y| = fl(max |x * w| * scale)
// exactly, rounding being monotonic: a GPU kernel reduces max |x * w| while it computes the scale.)
void rms_norm_row(const float * x, const float * w, float * y, int64_t n, float eps);

// Per-token int8 quantization (bitnet.cpp quantize_row_i8_s, FORMATS.md §4.7):
//   max = max(1e-5, max|x|) in double; scale = (float)(127 / max);
//   q = clamp(round_half_even(x * scale), -128, 127). Returns scale.
float quantize_act_row(const float * x, int8_t * q, int64_t n);

// Unpacks K 2-bit codes (CpuLinear layout, code = value + 1) into signed values.
void unpack_codes_row(const uint8_t * codes, int64_t k, int8_t * values);

// Sum of a[i] * b[i] in int32 (|a| <= 2, |b| <= 128: no overflow below 2^23 elements).
int32_t dot_i8(const int8_t * a, const int8_t * b, int64_t n);

// One output of a BitLinear: groups of `group` values with one scale each.
//   one group (I2_S): ((float)dot / act_scale) * scale          (bitnet.cpp epilogue order)
//   several:          sum_g ((float)dot_g / act_scale) * scale_g
float bitlinear_dot(const int8_t * w_values, const float * w_scales, int64_t group, const int8_t * q, float act_scale,
                    int64_t k);

// NeoX RoPE of one head in place: pairs (i, i + n_rot/2), theta_i = pos * base^(-2i/n_rot) computed
// as ggml does (f32 recurrence theta *= theta_scale), cos and sin by cos_sin_fixed (not libm's
// cosf / sinf, which differ by library). Dimensions >= n_rot pass through.
void rope_neox_head(float * x, int64_t n_rot, int64_t pos, float freq_base);

// The blocked order, tern's order for dot products that every backend reproduces bit for bit (the
// attention scores): blocks of 16 terms, each block's rounded products summed in order from 0, the
// block sums added in order from 0. GEMM-like kernels keep one block sum and one total per output
// while they walk the dimension in chunks of 16 or 32.
float dot_blocked16(const float * a, const float * b, int64_t n);

// The position order, tern's order for sums over attention positions (the softmax denominator, P·V
// of a row of at most 512 positions) that every backend reproduces bit for bit: blocks of 32
// positions, each summed in order from 0; the block sums of each superblock of 512 positions in order
// from 0; the superblock sums in order from 0. Attention applies it to rows of at most one superblock
// (longer rows take the block order below), so its rows never reach the outer level; a sum over more
// positions still adds its superblocks in order.
inline constexpr int64_t k_pos_block = 32;
inline constexpr int64_t k_pos_super = 512;
float sum_positions(const float * t, int64_t n);

// The same order for m sums at once, fed one position at a time (P·V: one sum per dimension).
struct PositionSum {
    explicit PositionSum(std::size_t m = 0) { reset(m); }
    void reset(std::size_t m);                 // m sums at 0 (keeps the allocation)
    void add(int64_t p, const float * terms);  // terms of position p; p = 0, 1, ... in order
    void finish(int64_t n, float * out);       // after positions 0 .. n - 1

    std::vector<float> block, super, total;

private:
    void close_block(int64_t end);
};

// ---- Attention over a row of positions: tern's order (issue #52) ----------------------------------
// The specification every backend reproduces bit for bit, for one query head over positions
// 0 .. n-1 (every value f32, every operation rounded once, -ffp-contract=off; f16(x) rounds to the
// nearest f16, ties to even, and applies only where the cache is f16):
//  0. Rows of at most k_pos_super = 512 positions keep the single-pass softmax: m = the max s_i (1.),
//     e_i = exp_fixed(s_i - m), l = sum_positions(e), r = 1.0f / l, p_i = e_i * r (then f16(p_i)
//     with an f16 V), out[d] = the p_i * v_i[d] in the position order (PositionSum). Steps 1-6 are
//     the BLOCK ORDER of every row of more than 512 positions.
//  1. s_i = dot_blocked16(f16(q), k_i) * scale                  (f16(q) with an f16 K)
//  2. BLOCK b = positions [32 b, min(32 b + 32, n)) (block_partial):
//       m_b = max(-FLT_MAX, s_i ...)                             (exact in any order)
//       e_i = exp_fixed(s_i - m_b)
//       l_b = ((0 + e_first) + e_next) + ... + e_last           (position order, one chain)
//       o_b[d] = ((0 + f16(e_first) * v_first[d]) + ...)        (position order; f16 x f16 exact)
//  3. CHUNK c = blocks [2c, 2c + 1] (64 positions; the last may have 1 block) = join(its blocks)
//  4. SUPERBLOCK s = chunks [8s, 8s + 8) (512 positions; the last may be short) = join(its chunks)
//     (superblock_partial: steps 2-4 for one superblock's scores)
//  5. ROW = join(its superblocks in order)
//  6. out[d] = O[d] * r,  r = 1.0f / L  (one correctly rounded reciprocal per row, then one product)
// join(parts p_0 .. p_k) -> (M, L, O) (join_partials), in part order, each product rounded, then
// each sum:  M = max_i m_i;  a_i = exp_fixed(m_i - M);  L = ((0 + a_0 * l_0) + a_1 * l_1) + ...;
//            O[d] = ((0 + a_0 * o_0[d]) + a_1 * o_1[d]) + ...
// A join of one part is exact (exp_fixed(0) == 1, 1 * x == x, 0 + x == x: no l or o is ever -0,
// every chain starting at +0). Why this shape: a GPU workgroup per chunk of 2 blocks writes one chunk
// partial (attention_block_pv.wgsl; 2 blocks measured best); the paged and prefill kernels, whose
// workgroups are per superblock, write superblock partials; the combine joins at most 8 chunks per
// superblock (in parallel over superblocks), then the row's few superblocks. On the H200, session
// 15's prototype of this order (one flat fold of the chunks, without step 4) decoded at depth 4096
// 17.7% faster than the per-superblock softmax + superblock combine it replaced (docs/architecture.md,
// "Numerics").
inline constexpr int64_t k_attn_chunk_blocks = 2;                                     // blocks per chunk
inline constexpr int64_t k_attn_chunk        = k_attn_chunk_blocks * k_pos_block;     // 64 positions
inline constexpr int64_t k_attn_super_chunks = k_pos_super / k_attn_chunk;            // 8 chunks

// A partial softmax over some positions: their max m, sum l = sum e_i, and o[d] = sum f16(e_i) v_i[d]
// (hd values at o, owned by the caller), all relative to m.
struct AttnPartial {
    float   m = 0.0f, l = 0.0f;
    float * o = nullptr;
};

// Step 2: the partial of one block of 1 <= len <= 32 positions from its scores s[0 .. len) and V
// rows v + i * v_stride (f32 values; v_f16: the cache is f16, so e_i is rounded to f16 before its
// products). Writes out.m, out.l and out.o[0 .. hd).
void block_partial(const float * s, int64_t len, const float * v, int64_t v_stride, int64_t hd, bool v_f16,
                   AttnPartial & out);

// join(parts[0 .. n_parts)) in part order, n_parts >= 1. out.o may be one of the parts' o (each O[d]
// is written after every part's o[d] is read).
void join_partials(const AttnPartial * parts, int64_t n_parts, int64_t hd, AttnPartial & out);

// Steps 2-4: the partial of one superblock of 1 <= len <= 512 positions (blocks of 32 from its
// first position, chunks of 2 blocks, the chunks joined) from its scores and V rows, as block_partial.
void superblock_partial(const float * s, int64_t len, const float * v, int64_t v_stride, int64_t hd, bool v_f16,
                        AttnPartial & out);

// Step 1: s[i] = dot_blocked16(f16(q), k_i) * scale for i < n, K rows k + i * k_stride (f16(q): q
// rounded with k_f16, an f16 K cache).
void attention_scores(const float * q, const float * k, int64_t k_stride, int64_t n, int64_t hd, float scale,
                      bool k_f16, float * s);

// Step 6: out[d] = p.o[d] * (1.0f / p.l).
void finish_partial(const AttnPartial & p, int64_t hd, float * out);

// One query head's attention over positions 0 .. n-1 (n >= 1) in tern's order: step 0 for n <= 512,
// the block order (steps 1-6) above. q [hd] as computed (rounded to f16 here with k_f16); K rows
// k + i * k_stride and V rows v + i * v_stride as f32 values (an f16 cache's values, exactly);
// k_f16 / v_f16 say that the cache is f16 (the f16 roundings of q and of the probabilities).
// out [hd]. The oracle of every backend's attention: one call per (token, head) row.
void attention_row(const float * q, const float * k, int64_t k_stride, const float * v, int64_t v_stride, int64_t n,
                   int64_t hd, float scale, bool k_f16, bool v_f16, float * out);

// The same row in the block order whatever n (rows of at most 512 positions too: the order's
// definition, for tests of kernels that take it below 512 positions; attention_row is the contract).
void attention_row_blocks(const float * q, const float * k, int64_t k_stride, const float * v, int64_t v_stride,
                          int64_t n, int64_t hd, float scale, bool k_f16, bool v_f16, float * out);

// Dot product of f32 vectors accumulated in double (the LM head).
float dot_f32(const float * a, const float * b, int64_t n);

inline float relu2(float g) {
    const float r = g > 0.0f ? g : 0.0f;
    return r * r;
}
float silu(float g);  // g / (1 + exp_fixed(-g))

// exp(x) as a fixed sequence of f32 operations, each rounded once: tern's softmax and SiLU exp,
// which every backend reproduces bit for bit (lib/numerics.wgsl's exp_fixed; libm's expf differs by
// library, and a correctly rounded exp cost a GPU ~1% of decode: src/backend/webgpu/README.md,
// "Numerics"). The constants c1 .. c5 are in cpu_ops.cpp:
//   n = round_half_even(x * 1.44269502f),  r = (x - n * 0.693359375f) + n * 2.12194440e-4f
//   (ln2 in two parts, the first product exact),  z = r * r,
//   exp(r) = 1 + (r + z q),  q = a + (b + c z) z,  a = 1/2 + c1 r,  b = c2 + c3 r,  c = c4 + c5 r
//   (Cephes' expf polynomial in Estrin's order),  result = that * 2^n.
// Measured on every f32 in [-86.9, 88.7] against expl() (tools/exp_fixed_check.cpp): at most 1.004
// ulp off, 99.19% correctly rounded. Returns 0 below 2^-125 (x < -86.99, where the result would be
// subnormal, which GPUs may flush), +inf above 88.8, NaN for NaN.
float exp_fixed(float x);

// cos(x) and sin(x) of an f32 angle as a fixed sequence of double operations, each rounded once:
// tern's RoPE angles on every backend and platform. libm's cosf / sinf differ by library (glibc's,
// which ggml calls on Linux, is not correctly rounded: ~2% of 2B4T's RoPE table differs by an ulp
// from musl's, which the WebAssembly build links), so the reference cannot call them. The angle is
// reduced by k = round(x * 2/pi) against pi/2 in four parts (three of 25 bits: their products with
// k < 2^28 are exact), then sin and cos of the remainder (|r| <= pi/4) by their Taylor series to
// r^21 / r^20 in Horner's order, and the quadrant k mod 4 picks the signs. Both results are the
// correctly rounded f32 except where the exact value lies within ~2^-50 (relative) of a midpoint
// between two floats; none of the RoPE tables checked (tests/backend/cpu_kernels_test.cpp) has one.
// Accurate for |x| < 2^28 (positions are below 2^24); NaN for NaN and infinities.
void cos_sin_fixed(float x, float * c, float * s);

}  // namespace tern::cpu
