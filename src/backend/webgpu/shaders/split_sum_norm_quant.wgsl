// split_sum_norm_quant: gemm_split_sum.wgsl (y += the split GEMM's result, last = 1) followed by
// rms_norm_quant.wgsl of the same y, in one dispatch (a batched step's o and down projections, whose
// sums feed the next norm: 60 dispatches fewer per 2B4T step). Each workgroup owns one token, so
// it first adds its token's row sums into y (every element, gemm_split_sum's operations, so y gets
// the same bits), makes them visible to the workgroup (storageBarrier), then quantizes rms_norm(y) * w
// exactly as rms_norm_quant.wgsl does. The GEMM's activation scale of the token is read before
// the new scale replaces it (the same slot: both are the step's act_scale).
//
//   x (y): [K, T] f32   w: [K] f32   q: [K, T] int8 (u32 words)   scales: [T] f32 (read, then written)
//   weights: the GEMM's codes | group scales [K] f32 | output scales [K] f32 (u32 words)
//   part: [SPLIT][T][K] i32 (the GEMM's shares; K = its rows = n_out), as vec4 words
// Bindings: 0 x, 1 w, 2 q, 3 scales (read_write but w), 4 weights, 5 part (read), 6 params (uniform)
// Dispatch: (T, 1, 1).

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"

override WG: u32 = 256u;  // a power of two, 32 WG >= k

struct Params {
    k: u32,             // elements per token (the GEMM's rows), a multiple of 4
    eps: f32,
    x_offset: u32,      // f32 index of x[0, 0]
    x_stride: u32,      // f32 elements between tokens
    w_offset: u32,      // f32 index of w[0]
    q_offset: u32,      // u32 index (bytes / 4) of q[0, 0]
    q_stride: u32,      // u32 words between tokens
    scale_offset: u32,  // f32 index of scales[0]: the GEMM's activation scales, then the new ones
    n_tokens: u32,      // T (part's token stride)
    n_split: u32,
    scales_offset: u32,   // u32 index of the GEMM's group scales in `weights`
    oscales_offset: u32,  // u32 index of its output scales
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> q: array<u32>;
@group(0) @binding(3) var<storage, read_write> scales: array<f32>;
@group(0) @binding(4) var<storage, read> weights: array<u32>;
@group(0) @binding(5) var<storage, read> part: array<vec4<i32>>;
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.x;
    let xo = p.x_offset + t * p.x_stride;
    let s  = scales[p.scale_offset + t];  // (every invocation reads it before the barriers below)
    let rs = recip_part(s);
    let i0 = NORM_BLOCK * lid;            // this invocation's block: elements i0 .. i0 + 31
    let mine = i0 < p.k;

    // 1. y = x + the GEMM's result (gemm_split_sum with last = 1): every load first, then the sums.
    var y: array<vec4<f32>, 8>;   // [word][element]: y, later (y w) inv
    var wv: array<vec4<f32>, 8>;  // the norm's weights
    if (mine) {
        var gs: array<vec4<f32>, 8>;
        var os: array<vec4<f32>, 8>;
        for (var r = 0u; r < 8u; r++) {
            for (var c = 0u; c < 4u; c++) {
                let i = i0 + 4u * r + c;
                if (i < p.k) {
                    y[r][c]  = x[xo + i];
                    wv[r][c] = w[p.w_offset + i];
                    gs[r][c] = bitcast<f32>(weights[p.scales_offset + i]);
                    os[r][c] = bitcast<f32>(weights[p.oscales_offset + i]);
                }
            }
        }
        var sum: array<vec4<i32>, 8>;
        for (var z = 0u; z < p.n_split; z++) {
            let base = (z * p.n_tokens + t) * p.k + i0;  // (k, i0: multiples of 4)
            for (var r = 0u; r < 8u; r++) {
                if (i0 + 4u * r < p.k) { sum[r] += part[base / 4u + r]; }
            }
        }
        for (var r = 0u; r < 8u; r++) {
            if (i0 + 4u * r < p.k) {
                for (var c = 0u; c < 4u; c++) {
                    let v = div_by(f32(sum[r][c]), s, rs) * gs[r][c];
                    y[r][c] = y[r][c] + mul_rn(v, os[r][c]);
                    x[xo + i0 + 4u * r + c] = y[r][c];
                }
            }
        }
    }

    // 2. rms_norm_quant.wgsl on y: the squares' block sum, the workgroup's total (lib/inv_rms.wgsl).
    var bs = 0.0;
    if (mine) {
        var sq: array<vec4<f32>, 8>;
        for (var r = 0u; r < 8u; r++) { sq[r] = squares4(y[r]); }  // (zero past k)
        bs = block_sum_words(sq);
    }
    let inv = inv_rms_of(blocks_total(lid, bs));
    var m = 0.0;
    if (mine) {
        for (var r = 0u; r < 8u; r++) {
            if (i0 + 4u * r < p.k) {
                y[r] = (y[r] * wv[r]) * inv;  // two roundings, as the CPU
                m = max(m, max_abs4(y[r]));
            }
        }
    }
    let amax = wg_max(lid, m);
    let qs   = act_scale_of_max(amax);
    if (mine) {
        let qo = p.q_offset + t * p.q_stride;
        for (var r = 0u; r < 8u; r++) {
            if (i0 + 4u * r < p.k) {
                var word = 0u;
                for (var b = 0u; b < 4u; b++) {
                    let c = clamp(round(y[r][b] * qs), -128.0, 127.0);
                    word |= (bitcast<u32>(i32(c)) & 0xffu) << (8u * b);
                }
                q[qo + i0 / 4u + r] = word;
            }
        }
    }
    if (lid == 0u) { scales[p.scale_offset + t] = qs; }
}
