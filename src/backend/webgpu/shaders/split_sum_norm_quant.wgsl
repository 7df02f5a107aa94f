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
//   part: [SPLIT][T][K] i32 (the GEMM's shares; K = its rows = n_out)
// Bindings: 0 x, 1 w, 2 q, 3 scales (read_write but w), 4 weights, 5 part (read), 6 params (uniform)
// Dispatch: (T, 1, 1).

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"

override WG: u32 = 256u;  // a power of two

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
@group(0) @binding(5) var<storage, read> part: array<i32>;
@group(0) @binding(6) var<uniform> p: Params;

// gemm_split_sum.wgsl's row_value: weight row `row`'s output for token t (s: its activation scale).
fn row_value(row: u32, t: u32, s: f32, rs: f32) -> f32 {
    var sum = 0;
    for (var z = 0u; z < p.n_split; z++) { sum += part[(z * p.n_tokens + t) * p.k + row]; }
    let gs = bitcast<f32>(weights[p.scales_offset + row]);
    let os = bitcast<f32>(weights[p.oscales_offset + row]);
    let v  = div_by(f32(sum), s, rs) * gs;
    return mul_rn(v, os);
}

fn normed(xo: u32, i: u32, inv: f32) -> f32 {
    return (x[xo + i] * w[p.w_offset + i]) * inv;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.x;
    let xo = p.x_offset + t * p.x_stride;

    // 1. y += the GEMM's result (gemm_split_sum with last = 1).
    let s  = scales[p.scale_offset + t];
    let rs = recip_part(s);
    for (var i = lid; i < p.k; i += WG) {
        x[xo + i] = x[xo + i] + row_value(i, t, s, rs);
    }
    storageBarrier();  // every invocation's sums are visible to the workgroup (and it has read s)

    // 2. rms_norm_quant.wgsl on y.
    let inv  = inv_rms(lid, xo);
    var m = 0.0;
    for (var i = lid; i < p.k; i += WG) {
        m = max(m, abs(normed(xo, i, inv)));
    }
    let amax = wg_max(lid, m);
    let qs   = act_scale_of_max(amax);
    let qo = p.q_offset + t * p.q_stride;
    for (var j = lid; j < p.k / 4u; j += WG) {
        var word = 0u;
        for (var b = 0u; b < 4u; b++) {
            let i = 4u * j + b;
            let y = normed(xo, i, inv);
            let c = clamp(round(y * qs), -128.0, 127.0);
            word |= (bitcast<u32>(i32(c)) & 0xffu) << (8u * b);
        }
        q[qo + j] = word;
    }
    if (lid == 0u) { scales[p.scale_offset + t] = qs; }
}
