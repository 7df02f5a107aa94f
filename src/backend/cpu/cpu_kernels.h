// The fast CPU backend's kernel table: one set of function pointers per instruction set
// (kernels_avx512.cpp, kernels_avx2.cpp, kernels_neon.cpp, each compiled with its own flags and
// chosen at run time from the CPU's features: cpu_isa.h). Every kernel computes bit for bit what
// the scalar reference (cpu_ops.h, cpu_backend.cpp) computes, in the reference's order of
// operations; tests/backend/cpu_kernels_test.cpp checks each against it on random data.
//
// The kernel files include nothing but this header and intrinsics: an inline function or template
// instantiated in a file built with -mavx512f could be the copy the linker keeps for everyone.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::cpu {

// ----------------------------------------------------------------------------- ternary tiles
// Low-bit weights repacked for integer dot products ("tiles", cpu_tiles.h makes them). A tile is
// 16 consecutive output rows; its codes are K/16 chunks of 64 bytes, chunk c covering columns
// 16c .. 16c + 15 of all 16 rows:
//
//   byte 4r + m of chunk c, bits 2s+1..2s  =  code of row r, column 16c + 4s + m     (r < 16, m, s < 4)
//
// code = value + 1 (0, 1, 2; 3 only for Q2_0's +2). Shifting a chunk right by 2s and masking with
// 3 gives, in each 32-bit lane r, the 4 codes of row r at columns 16c + 4s .. + 3: the operand of
// one vpdpbusd / sdot lane per row against 4 activation bytes broadcast to every lane, so 16 rows
// accumulate side by side with no horizontal sums. Rows past n_rows are padding (code 1).
//
// Base-3 tiles (weights that are -1, 0, +1 only, for kernel sets with base3 set): 5 codes per byte,
// 1.6 bits per weight instead of 2 (decoding stream a fifth fewer bytes). Each scale group of G
// columns is ceil(G / 20) chunks of 64 bytes, chunk c of group g covering columns g G + 20c .. + 19:
//
//   byte 4r + m of chunk c  =  ceil(v 256 / 243),  v = sum_j code(row r, column g G + 20c + 4j + m) 3^(4-j)
//
// (j < 5; TQ1_0's byte encoding). With x_0 = byte, code_j = (x_j 3) >> 8 and x_(j+1) = x_j 3 mod 256,
// so each j again gives every lane r the 4 codes of row r at columns g G + 20c + 4j .. + 3 for one
// vpdpbusd. Positions past the group's end (20c + 4j >= G) are padding: never multiplied.
inline constexpr int64_t k_tile_rows  = 16;
inline constexpr int64_t k_tile_cols  = 16;   // columns per chunk (2-bit tiles)
inline constexpr int64_t k_tile_chunk = 64;   // bytes per chunk
inline constexpr int64_t k_base3_cols = 20;   // columns per chunk (base-3 tiles)

struct TernaryTiles {
    const uint8_t * codes      = nullptr;  // [n_tiles][chunks per tile][64]
    const float *   scales     = nullptr;  // [n_tiles][n_groups][16]: the group scales of a tile's rows
    const float *   out_scales = nullptr;  // [n_tiles * 16] extra multiplier, or null when all are 1
    int64_t         k          = 0;        // columns (multiple of 16)
    int64_t         n_rows     = 0;
    int64_t         group      = 0;        // columns per scale (multiple of 16, divides k)
    bool            base3      = false;    // base-3 chunks (above) instead of 2-bit ones
    int64_t n_groups() const { return k / group; }
    int64_t n_tiles() const { return (n_rows + k_tile_rows - 1) / k_tile_rows; }
    int64_t chunks_per_group() const { return base3 ? (group + k_base3_cols - 1) / k_base3_cols : group / k_tile_cols; }
    int64_t tile_bytes() const { return n_groups() * chunks_per_group() * k_tile_chunk; }
};

// Quantized activations of T tokens: q[t * ld + i], i < k; group_sums[t * n_groups + g] = the sum
// of q over group g (the codes carry value + 1: dot(value, q) = dot(code, q) - sum(q)).
// Issue 51: bytes a one-token product asks the caches for while it streams its tiles, a few lines
// per tile over the thread's range — the layer's K and V rows that its attention reads next
// (decoding finds them in DRAM, and their latency, not their bytes, bounded attention: cpu README,
// "The layer's K and V during its [q; k; v] product"). Rows r < n_rows of each of the two blocks:
// row_bytes bytes at base[b] + r * stride. A hint: a kernel may ignore it (the AVX-512 and AVX2
// one-token 2-bit loops read it; base-3 tiles and NEON do not).
struct Touch {
    const uint8_t * base[2]   = {nullptr, nullptr};
    int64_t         stride    = 0;
    int64_t         row_bytes = 0;
    int64_t         n_rows    = 0;
};

struct ActView {
    const int8_t *  q          = nullptr;
    int64_t         ld         = 0;
    const float *   scale      = nullptr;  // [T]
    const int32_t * group_sums = nullptr;  // [T][n_groups]
    int64_t         n_tokens   = 0;
    uint8_t *       scratch    = nullptr;  // the calling thread's: 272 k bytes, 64-byte aligned (base-3 tiles:
                                           // a tile's code bytes, 64 tokens' activations regrouped)
    const Touch *   touch      = nullptr;  // where not null: touched during a one-token product (a hint)
};

// ----------------------------------------------------------------------------- Q-block tiles
// Q4_0 and Q8_0 weights of the llama / qwen3 / phi3 families, repacked at load (cpu_qtiles.cpp) for
// the same one-lane-per-row vpdpbusd / sdot products as the ternary tiles: 16 rows per tile, each
// 32-column block (the file's block) stored as the 16 rows' fp16 scales d (32 bytes) and then the
// codes in chunks of 64 bytes, byte 4r + m of chunk c for row r:
//
//   Q4_0 (4 chunks):  the file's qs byte 4c + m: low nibble = code of column 4c + m, high nibble =
//                     code of column 16 + 4c + m; value = code - 8
//   Q8_0 (8 chunks):  code of column 4c + m = q + 128 (unsigned); value = code - 128
//
// so a tile-block is 16 x 18 (Q4_0) or 16 x 34 (Q8_0) bytes, the file's size. Rows past n_rows are
// padding (d = 0, codes 0).
struct QBlockTiles {
    const uint8_t * data   = nullptr;  // [n_tiles][k / 32][block_bytes()]
    int64_t         k      = 0;        // columns (multiple of 32)
    int64_t         n_rows = 0;
    bool            q8     = false;    // Q8_0 (else Q4_0)
    int64_t block_bytes() const { return 32 + (q8 ? 512 : 256); }
    int64_t tile_bytes() const { return (k / 32) * block_bytes(); }
    int64_t n_tiles() const { return (n_rows + 15) / 16; }
};

// Binary tiles: Q1_0 weights of a family model (values -1, +1; only ever against Q8_0 blocks),
// 1 bit per weight as in the file. 16 rows per tile; chunk c (64 bytes) covers columns 32c .. 32c + 31
// (activation block c):
//
//   byte 4r + m of chunk c, bit s  =  1 where row r, column 32c + 4s + m is +1
//
// Masking bit s (or shifting by s and masking 1) gives each lane r the bits of its 4 columns
// 32c + 4s .. + 3 for one vpdpbusd; a block's dot product is 2 sum(bit q) - sum(q). Scales as the
// ternary tiles': [n_tiles][k / group][16] f32. Rows past n_rows: bits 0, scale 0.
struct BinaryTiles {
    const uint8_t * codes      = nullptr;  // [n_tiles][k / 32][64]
    const float *   scales     = nullptr;  // [n_tiles][n_groups][16]
    const float *   out_scales = nullptr;  // [n_tiles * 16], or null when all are 1
    int64_t         k          = 0;        // columns (multiple of 32)
    int64_t         n_rows     = 0;
    int64_t         group      = 0;        // columns per scale (multiple of 32, divides k)
    int64_t n_groups() const { return k / group; }
    int64_t n_tiles() const { return (n_rows + 15) / 16; }
    int64_t tile_bytes() const { return (k / 32) * 64; }
};

// Activations of T tokens as ggml's Q8_0 blocks (cpu::quantize_row_q8_0_acts): q[t * ld + i],
// d[t * (k / 32) + b] the block's fp16 scale as f32, bsum[t * (k / 32) + b] = the sum of its 32 codes.
struct Q8BlockActs {
    const int8_t *  q        = nullptr;
    int64_t         ld       = 0;
    const float *   d        = nullptr;
    const int32_t * bsum     = nullptr;
    int64_t         n_tokens = 0;
};

// ----------------------------------------------------------------------------- attention
// One query token, one KV head and the `n_q` query heads that share it (GQA), over cache
// positions 0 .. n_pos - 1 (n_pos <= 512: one superblock), in tern's attention order (cpu_ops.h,
// "Attention over a row of positions"). A row of at most 512 positions is one job (blocks = false:
// the single-pass softmax, cpu::attention_row's step 0). cpu_fast_attention.cpp runs a longer row
// a superblock at a time (the cache views shifted to its first position) with blocks = true, and
// joins each head's superblocks with cpu::join_partials, then cpu::finish_partial.
struct AttentionJob {
    const float * q       = nullptr;  // [n_q][head_dim] query heads (f32, before any f16 rounding)
    int64_t       n_q     = 0;
    int64_t       n_pos   = 0;
    float         scale   = 0;
    float *       out     = nullptr;  // [n_q][head_dim]
    float *       sup_max = nullptr;  // [n_q] with blocks: each head's M (below); not read otherwise
    float *       sup_sum = nullptr;  // [n_q] with blocks: each head's L
    // The block order (cpu_ops.h steps 1-4) for ONE superblock of a row of more than 512 positions:
    // out[g * head_dim + d] = the superblock's unnormalised O, sup_max[g] = M, sup_sum[g] = L (both
    // non-null), bit for bit cpu::superblock_partial's (m, l, o) of head g.
    bool blocks = false;
};
// The cache of one KV head converted once per call (attention_prepare): K transposed in blocks of
// 16 positions, kt[(p / 16) * head_dim * 16 + d * 16 + p % 16], and V as f32 rows, v[p * head_dim + d].
struct AttentionKv {
    const float * kt       = nullptr;
    const float * v        = nullptr;
    int64_t       head_dim = 0;
    bool          k_f16    = false;  // q rounded to f16 before q . k
    bool          v_f16    = false;  // probabilities rounded to f16 before P . V
};
// The cache geometry attention_prepare reads: column p of K (or V) is at base + p * stride
// elements, the head's dimensions at [first, first + head_dim).
struct CacheView {
    const void * k = nullptr;
    const void * v = nullptr;
    bool         f16_k = false, f16_v = false;
    int64_t      stride = 0, first = 0, head_dim = 0;
    int64_t      next_first = -1;  // where >= 0: the column of the KV head this thread attends next (a prefetch hint)
};

// One row of an F16 head's int8 copy (cpu_fast_head.cpp): s = max |e| / 127, q = round(e / s)
// clamped to [-127, 127] (0 where s is 0), and the sums the bound needs, in double:
// dd = sum (e - s q)^2, qq = sum q^2, ee = sum e^2 (any order: the caller rounds them up).
struct HeadI8Row {
    float   s     = 0;
    int32_t q_sum = 0;
    double  dd = 0, qq = 0, ee = 0;
    double  ea = 0;  // sum |e| (f16_rows_dot_checked's bound)
};

// The int8 head's bounds of rows [0, n) (cpu_fast_head.cpp's header comment derives them), in double:
//   f = (s[r] S) dots[r],  B = (1 + 2^-20)(q_norm[r] eta_norm + d_norm[r] h_norm) + 2^-22 (|f| + e_norm[r] h_norm),
// then lo[r] = f - B and hi[r] = f + B as floats padded outward: v -/+ 2^-22 |v| -/+ 2^-140 rounded to
// float (so still below / above v), lo at most FLT_MAX and hi at least -FLT_MAX. Returns the largest
// lo (-inf for n = 0). Inputs finite. The scalar form, each set's fallback and the tests' oracle
// (defined in cpu_fast_head.cpp, built with the baseline flags).
struct HeadBoundGrid {
    double S = 1, eta_norm = 0, h_norm = 0;
};
float i8_head_bounds_ref(const int64_t * dots, const float * s, const float * q_norm, const float * d_norm,
                         const float * e_norm, int64_t n, const HeadBoundGrid & g, float * lo, float * hi);

// Issue 51 (TERN_CPU_PAGE_AHEAD, cpu README, "A page ahead"): the AVX-512 and AVX2 one-token streams (the
// ternary tiles' one-token loop, the int8 head, the Q6_K head's bound pass, the read loop; StreamAhead in
// tile_loop.h) ask once per 4 KiB page for the line this many bytes ahead, so the hardware
// prefetcher, which stops at page ends, finds the next pages started (0: never; default 8192).
extern int64_t page_ahead;
// Issue 51 (TERN_CPU_LINE_AHEAD, cpu README, "A line ahead"): the same streams also ask for every
// 64-byte line this many bytes ahead (prefetcht1; 0: never; default 4096 on Intel CPUs, 0 on others).
extern int64_t line_ahead;
// Both process-wide; set from the environment by set_stream_ahead_from_env (the fast backend, the
// kernel bench), which fails on a value that is not a byte count and then changes neither.
void set_stream_ahead_from_env();

// ----------------------------------------------------------------------------- the table
struct Kernels {
    const char * name;  // "avx512-vnni(-vbmi)", "avx2(-vnni)", "neon-dotprod"
    // Base-3 tiles by default for ternary-valued weights (CpuOptions::base3; cpu_tiles.cpp packs
    // them). No set does: on the H200 host's Xeon 2-bit tiles won decode and prompts (cpu README,
    // "Tiles"). Q2_0's +2 needs the 2-bit tiles, which every set reads.
    bool base3;

    // One tile's 2-bit chunks (16 rows, k columns, scale groups of `group`) as base-3 chunks; null
    // where ternary_gemm does not read base-3 tiles.
    void (*tile_to_base3)(const uint8_t * two_bit, int64_t k, int64_t group, uint8_t * base3);

    // y[t * ldy + r - row0] for the rows r of tiles [tile0, tile1) that are < n_rows, every token:
    // the reference's bitlinear_dot (one group: ((float)dot / act) * scale; several: the sum over
    // groups in order of ((float)dot_g / act) * scale_g from 0.0f), times out_scale where that is
    // not 1, added to y when accumulate. Bytes of q past k are never read.
    void (*ternary_gemm)(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y,
                         int64_t ldy, int64_t row0, bool accumulate);

    // Q4_0 / Q8_0 tiles against Q8_0-block activations, rows of tiles [tile0, tile1) that are < n_rows,
    // every token: y[t * ldy + r - row0] (+= when accumulate) = ggml's generic vec_dot in block order,
    // sumf += ((float)sumi * d_w) * d_a (Q4_0) or (float)sumi * (d_w * d_a) (Q8_0) from 0.0f
    // (cpu::dot_q4_0_q8_0 / dot_q8_0_q8_0). Null where a set has none (the reference runs them).
    void (*qblock_gemm)(const QBlockTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                        int64_t row0, bool accumulate);
    // 2-bit ternary tiles (Q1_0 / Q2_0 / PQ2_0 of a family model; group a multiple of 32) against
    // Q8_0-block activations, as cpu::dot_lowbit_q8_0: per weight group s = sum over its activation
    // blocks of d_a * (float)sumi from 0.0f, sumf += scale_g * s, then times out_scale (1 when null).
    // Same rows, tokens and output as qblock_gemm. Null where a set has none.
    void (*lowbit_q8_gemm)(const TernaryTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y,
                           int64_t ldy, int64_t row0, bool accumulate);
    // Binary tiles (Q1_0) against Q8_0 blocks: the same sums as lowbit_q8_gemm on the same values.
    void (*binary_q8_gemm)(const BinaryTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y,
                           int64_t ldy, int64_t row0, bool accumulate);

    // cpu::sum_squares (the block-halving order).
    float (*sum_squares)(const float * x, int64_t n);
    // y = (x * w) * scale; returns max |y|.
    float (*norm_apply)(const float * x, const float * w, float scale, float * y, int64_t n);
    // cpu::quantize_act_row given max |x| (as float; the reference's double max is the same value).
    float (*quantize_row)(const float * x, float max_abs, int8_t * q, int64_t n);

    // NeoX rotation of n_heads heads of head_dim floats (stride head_dim) by the pair angles' cos
    // and sin (n_rot / 2 of each): x0 c - x1 s, x0 s + x1 c, each product rounded.
    void (*rope)(float * x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float * cos, const float * sin);
    void (*f32_to_f16)(const float * x, uint16_t * y, int64_t n);  // round to nearest even
    // ggml's Q8_0 activation blocks as cpu::quantize_row_q8_0_acts makes them, for n_blocks blocks of
    // 32 values at x: amax = max |x|, d[b] = amax / 127 (before its fp16 rounding, which the caller
    // does), codes q = (int8) roundf(x * (d ? 1 / d : 0)) and bsum[b] = their sum. A block whose d is
    // not finite, or that holds a NaN (d is then NaN), is left to the reference (its codes
    // unspecified). Null where a set has none.
    void (*q8_0_blocks)(const float * x, int64_t n_blocks, int8_t * q, float * d, int32_t * bsum);
    // f[i] = act(g[i]) * u[i] (relu2 or silu with exp_fixed), the reference gate_up's epilogue.
    void (*gate_act)(const float * g, const float * u, float * f, int64_t n, bool relu2);

    // Converts positions [0, n_pos) of one KV head into kt / v (AttentionKv's layouts; kt padded to
    // whole blocks of 16 positions).
    void (*attention_prepare)(const CacheView & cache, int64_t n_pos, float * kt, float * v);
    // One token's heads against a prepared KV head; scores: attention_scratch(n_q, n_pos, head_dim)
    // floats of scratch.
    void (*attention)(const AttentionKv & kv, const AttentionJob & job, float * scores);
    // attention_prepare + attention in one, reading the cache itself (no converted copy; the same
    // bits). Null where a set has none.
    void (*attention_cache)(const CacheView & cache, const AttentionJob & job, float * scores);

    // logits[t * ld + r - r0] = (float) sum_i e[r][i] h[t][i] for rows [r0, r1), summed in double in
    // order i = 0, 1, ... (cpu::dot_f32), e the f16 rows of `table` (row_stride elements apart).
    void (*f16_rows_dot)(const uint16_t * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k,
                         const float * h, int64_t n_tokens, float * logits, int64_t ld);
    // Head rows of a quantized table (Q8_0, Q4_0, Q4_K, Q6_K, BF16: ggml type id) dequantized
    // exactly as quant/block_formats.cpp does, out[r * k + i] for rows [0, n_rows) at src + r *
    // row_bytes; false for other types (cpu_dequant.h).
    bool (*dequant_rows)(uint32_t type, const uint8_t * src, int64_t row_bytes, int64_t n_rows, int64_t k, float * out);
    // f16_rows_dot's results, faster: each row summed in double in any order (vectors along the
    // row), which is within 2 gamma_k max|h| sum|e| of the reference's ordered sum; where both ends
    // of that interval round to the same f32, so does the reference's sum, and that f32 is the
    // result; other rows (a sum near a rounding boundary, ~1e-4 of them) take the ordered sum.
    // e_abs[r - r0] >= sum_i |e[r][i]|, h_absmax[t] >= max_i |h[t][i]|; h_f16: h holds f16 values
    // (products are then exact in f32). Null where a set has none.
    void (*f16_rows_dot_checked)(const uint16_t * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k,
                                 const float * h, int64_t n_tokens, float * logits, int64_t ld, const float * e_abs,
                                 const float * h_absmax, bool h_f16);
    // f16_rows_dot_checked on f32 rows (a quantized head's rows, dequantized; h's products with them
    // are exact in double whether or not h holds f16 values). Null where a set has none.
    void (*f32_rows_dot_checked)(const float * rows, int64_t row_stride, int64_t r0, int64_t r1, int64_t k,
                                 const float * h, int64_t n_tokens, float * logits, int64_t ld, const float * e_abs,
                                 const float * h_absmax);
    // The same for f32 rows (a quantized head's rows, dequantized).
    void (*f32_rows_dot)(const float * rows, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h,
                         int64_t n_tokens, float * logits, int64_t ld);
    // The wrapping sum of the n / 8 little-endian 64-bit words at p, plus the last n % 8 bytes,
    // read as fast as the kernels can stream (tern bench --roofline's read bandwidth: what a kernel
    // that only reads can reach).
    uint64_t (*read_bytes)(const uint8_t * p, int64_t n);

    // Rows [r0, r1) of an F16 table (k columns) into its int8 copy q[r * k + i] and rows[r - r0].
    void (*head_i8_rows)(const uint16_t * table, int64_t r0, int64_t r1, int64_t k, int8_t * q, HeadI8Row * rows);

    // A Q6_K head's rows against int8 activations h8 (h8_sum4[i] = h8[4i] + .. + h8[4i + 3]):
    // f[r - r0] = sum over the row's 16-column sub-blocks j of dsc_j * sum_{i in j} (q_i - 32) h8_i,
    // dsc_j = (float)(d * scale_j) as the dequantizer rounds it, the integer sums exact, each
    // 4-column sum times dsc_j rounded to f32 and summed per lane in f32 over the row (a lane sees
    // at most k / 16 of them), the lanes then in double: |f - exact| <= (k / 16 + 2) 2^-24
    // sum |dsc_j D_j|, for the caller's bound.
    void (*q6k_rows_dot_i8)(const uint8_t * table, int64_t row_bytes, int64_t r0, int64_t r1, int64_t k, const int8_t * h8,
                            const int32_t * h8_sum4, double * f);
    // sumsq[r] = sum_i rows[r * k + i]^2 in double for r < n_rows, in any order (an upper bound's input).
    void (*row_sumsq)(const float * rows, int64_t n_rows, int64_t k, double * sumsq);

    // dots[r - r0] = sum_i q[r][i] H[i] exactly, q int8 rows (row_stride bytes apart) and H int16
    // given as its two bytes: hi[i] = (H[i] >> 8) + 128 and lo[i] = H[i] & 255 (unsigned, the
    // operands of vpdpbusd / udot), with q_sums[r] = sum_i q[r][i]:
    //   sum q H = 256 (sum q hi - 128 q_sum) + sum q lo.
    void (*i8_rows_dot_i16)(const int8_t * q, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const uint8_t * hi,
                            const uint8_t * lo, const int32_t * q_sums, int64_t * dots);
    // The int8 head's bounds (cpu_fast_head.cpp) of rows [0, n), as i8_head_bounds_ref computes
    // them, the same bits: rows side by side in the lanes. Null where a set has none.
    float (*i8_head_bounds)(const int64_t * dots, const float * s, const float * q_norm, const float * d_norm,
                            const float * e_norm, int64_t n, const HeadBoundGrid & g, float * lo, float * hi);
};

// The floats of scratch an attention kernel may use for one job: the scores (n_pos + 16 per head:
// whole blocks of 16), f16(q) (head_dim per head), and 64 per head for the block order's block and
// chunk maxima, sums and weights.
inline int64_t attention_scratch(int64_t n_q, int64_t n_pos, int64_t head_dim) {
    return n_q * (n_pos + 16 + head_dim + 64);
}

// The attention kernel interface in scalar code (kernels_none.cpp): each head of the job by
// cpu_ops.h's functions (the single pass of cpu::attention_row, or cpu::superblock_partial with
// blocks), reading the cache view itself; for tests (every set's attention and attention_cache
// take blocks jobs themselves).
void attention_cache_scalar(const CacheView & cache, const AttentionJob & job, float * scratch);

// The kernels of each instruction set this build has (null where the build has none).
// kernels_avx512(): with VBMI the base-3 codes come from vpermi2b lookups (kernels_avx512_vbmi(),
// null on a CPU without VBMI), else from 16-bit multiplies (kernels_avx512_multiply()); the
// results are the same, the tests run both.
const Kernels * kernels_avx512();
const Kernels * kernels_avx512_multiply();
const Kernels * kernels_avx512_vbmi();
// kernels_avx2(): with AVX-VNNI the ternary products and the int8 head use the VEX vpdpbusd
// (kernels_avx2_vnni(), null on a CPU without it), else vpmaddubsw / vpmaddwd
// (kernels_avx2_plain()); the results are the same, the tests run both.
const Kernels * kernels_avx2_plain();
const Kernels * kernels_avx2_vnni();
const Kernels * kernels_avx2();
const Kernels * kernels_neon();

}  // namespace tern::cpu
