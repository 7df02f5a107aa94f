// norm_quant_words: rms_norm_quant.wgsl's norm + int8 quantization of each token's row (SPLIT = 0),
// or with SPLIT = S > 0 a split GEMM's sum first (gemm_split_sum.wgsl's operations: x += the o or
// down projection's rows), with each invocation holding whole vec4 words of its token's row in
// registers: every load of the
// row (x, the norm weights, with SPLIT the S integer shares and the epilogue's scales) is issued in
// one wave before any arithmetic, and the row is never read again. The sum of squares takes the
// block-halving order from the words in registers (lib/sum_squares.wgsl: sum_squares_words_sg
// where subgroups are 32 wide; otherwise invocation b re-reads block b), the max of |x w| is reduced
// beside it (max |y| = fl(max |x w| inv): rounding is monotonic and inv > 0, as lib/act_stage.wgsl),
// so the kernel has 3 barriers on the subgroup path where the strided kernels have ~20 and three
// passes over the row. Same operations per element as those kernels: the same bits
// (tests/backend/webgpu_gemm_test.cpp). H200, 2B4T at 64 streams, depth 256 (GPU profile): 9.2-10.0 us
// per dispatch at 1,024 threads against 14.5 (rms_norm_quant) and 21.9 (the split sum + norm as
// strided loops, one 256-thread workgroup per token: a chain of L2 latencies each).
//
//   x (y): [K, T] f32 (vec4 words)   w: [K] f32 (vec4 words)   q: [K, T] int8 (u32 words)
//   scales: [T] f32 (SPLIT: the GEMM's activation scales, read, then the new ones written)
//   weights: the GEMM's codes | group scales [K] f32 | output scales [K] f32 (u32 words)
//   part: [SPLIT][T][K] i32 (vec4 words; the GEMM's shares, K = its rows = n_out)
// Bindings: 0 x (read_write: SPLIT writes y back), 1 w, 2 q, 3 scales, 4 weights (read), 5 part
// (read), 6 params (uniform). Without SPLIT, 4 and 5 are not read (the host binds w there).
// Dispatch: (T, 1, 1). Word j of a row is held by invocation j % WG (its u = j / WG), so a block of
// 32 elements (8 words) lies in 8 neighbouring invocations. The host picks U = ceil(K / 4 / WG) <= 8
// and checks K <= 8192 (at most 256 blocks: lib/sum_squares.wgsl's block_sums_total_sg).

// #include "lib/numerics.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"

override WG: u32 = 256u;    // a power of two, >= 32
override U: u32 = 1u;       // vec4 words per invocation, 1..8
override SPLIT: u32 = 0u;   // 0: x as it is; S: x += the split GEMM's S shares first (y written back)

struct Params {
    k: u32,             // elements per token, a multiple of 4
    eps: f32,
    x_offset: u32,      // vec4 index of x[0, 0]
    x_stride: u32,      // vec4 words between tokens
    w_offset: u32,      // vec4 index of w[0]
    q_offset: u32,      // u32 index (bytes / 4) of q[0, 0]
    q_stride: u32,      // u32 words between tokens
    scale_offset: u32,  // f32 index of scales[0]
    n_tokens: u32,      // T (part's token stride)
    scales_offset: u32,   // u32 index of the GEMM's group scales in `weights` (SPLIT)
    oscales_offset: u32,  // u32 index of its output scales (SPLIT)
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> q: array<u32>;
@group(0) @binding(3) var<storage, read_write> scales: array<f32>;
@group(0) @binding(4) var<storage, read> weights: array<u32>;
@group(0) @binding(5) var<storage, read> part: array<vec4<i32>>;
@group(0) @binding(6) var<uniform> p: Params;

// gemm_split_sum.wgsl's epilogue of one row from its integer sum: (sum / s) * gs, then * os
// rounded on its own.
fn row_out(sum: i32, row: u32, s: f32, rs: f32) -> f32 {
    let gs = bitcast<f32>(weights[p.scales_offset + row]);
    let os = bitcast<f32>(weights[p.oscales_offset + row]);
    let v  = div_by(f32(sum), s, rs) * gs;
    return mul_rn(v, os);
}

// The int8 word of 4 quantized values y * qs (lib/numerics.wgsl's i8_codes: clamp(round())).
fn quantize_word(y: vec4<f32>, qs: f32) -> u32 {
    let b = i8_codes(y * qs);
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.x;
    let nw = p.k / 4u;
    let xo = p.x_offset + t * p.x_stride;

    var s  = 1.0;
    var rs = 0.0;
    if (SPLIT > 0u) {
        s  = scales[p.scale_offset + t];
        rs = recip_part(s);
    }
    // This invocation's words y (zero past the row) and g = y * w, and the max of |g|.
    var ys: array<vec4<f32>, 8>;
    var gs: array<vec4<f32>, 8>;
    var m = 0.0;
    for (var u = 0u; u < U; u++) {
        let j = lid + u * WG;
        if (j < nw) {
            var y = x[xo + j];
            if (SPLIT > 0u) {
                // y += the GEMM's rows 4j .. 4j + 3 (integer shares: any order is exact).
                var sum = vec4<i32>(0);
                for (var z = 0u; z < SPLIT; z++) { sum += part[(z * p.n_tokens + t) * nw + j]; }
                let r = 4u * j;
                y = y + vec4<f32>(row_out(sum.x, r, s, rs), row_out(sum.y, r + 1u, s, rs),
                                  row_out(sum.z, r + 2u, s, rs), row_out(sum.w, r + 3u, s, rs));
                x[xo + j] = y;
            }
            ys[u] = y;
            let g = y * w[p.w_offset + j];
            gs[u] = g;
            m = max(m, max_abs4(g));
        }
    }

    // The norm factor (sum of squares in the block-halving order) and max |g|.
    let nb = (p.k + NORM_BLOCK - 1u) / NORM_BLOCK;
    var inv: f32;
    var gmax: f32;
    if (WG_REDUCE_SG && SG32) {
        var sq: array<vec4<f32>, 8>;
        for (var u = 0u; u < U; u++) { sq[u] = squares4(ys[u]); }
        if (wg_max_split()) {  // the max's barrier wait overlaps the sum's chain
            wg_umax_publish(lid, bitcast<u32>(m));
            inv = inv_rms_from(sum_squares_words_sg(lid, sq, U, nb), p.k, p.eps);
            workgroupBarrier();
            gmax = bitcast<f32>(umax_of_slots(lid));
        } else {
            gmax = wg_max_nonneg(lid, m);
            inv  = inv_rms_from(sum_squares_words_sg(lid, sq, U, nb), p.k, p.eps);
        }
    } else {
        storageBarrier();  // the y words written above are visible to the workgroup
        var b = 0.0;
        if (lid < nb) {
            var sq: array<vec4<f32>, 8>;
            for (var r = 0u; r < 8u; r++) {
                let j = 8u * lid + r;
                if (j < nw) { sq[r] = squares4(x[xo + j]); }
            }
            b = block_sum_words(sq);
        }
        inv  = inv_rms_from(blocks_total(lid, b), p.k, p.eps);
        gmax = wg_max_nonneg(lid, m);
    }
    let qs = act_scale_of_max(gmax * inv);

    // q = the codes of y = g * inv, one word per vec4.
    let qo = p.q_offset + t * p.q_stride;
    for (var u = 0u; u < U; u++) {
        let j = lid + u * WG;
        if (j < nw) { q[qo + j] = quantize_word(gs[u] * inv, qs); }
    }
    // With SPLIT every invocation read scales[t] (the GEMM's) before it is replaced.
    if (SPLIT > 0u) { storageBarrier(); }
    if (lid == 0u) { scales[p.scale_offset + t] = qs; }
}
