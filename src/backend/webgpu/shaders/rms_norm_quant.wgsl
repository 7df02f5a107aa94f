// rms_norm_quant: a = int8-quantize(rms_norm(x) * w) for each token (cpu::rms_norm_row followed by
// cpu::quantize_act_row, FORMATS.md §4.7), bit-exact: the sum of squares in the block-halving order
// (lib/inv_rms.wgsl), division and square root correctly rounded, the quantization scale 127 / max|y|.
//
//   x: [K, T] f32   w: [K] f32   q: [K, T] int8, four per u32   scale: [T] f32
// Bindings: 0 x (read), 1 w (read), 2 q (read_write), 3 scale (read_write), 4 params (uniform)
// Dispatch: (T, 1, 1). One workgroup per token; thread i handles elements i, i + WG, ... and words
// i, i + WG, ... of q.

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"

override WG: u32 = 256u;  // a power of two
// false: a = int8-quantize(x) alone (cpu::quantize_act_row; the families' ternary projections
// without a norm in front); w is then not read.
override NORM: bool = true;

struct Params {
    k: u32,             // elements per token, a multiple of 4
    eps: f32,
    x_offset: u32,      // f32 index of x[0, 0]
    x_stride: u32,      // f32 elements between tokens
    w_offset: u32,      // f32 index of w[0]
    q_offset: u32,      // u32 index (bytes / 4) of q[0, 0]
    q_stride: u32,      // u32 words between tokens
    scale_offset: u32,  // f32 index of scale[0]
    rn_zero: u32,       // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> q: array<u32>;
@group(0) @binding(3) var<storage, read_write> scales: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

// Element i of y: (x * w) * inv (two roundings, as the CPU), or x without the norm.
fn normed(xo: u32, i: u32, inv: f32) -> f32 {
    if (!NORM) { return x[xo + i]; }
    return (x[xo + i] * w[p.w_offset + i]) * inv;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.x;
    let xo = p.x_offset + t * p.x_stride;

    var inv = 1.0;
    if (NORM) { inv = inv_rms(lid, xo); }  // as the CPU, bit for bit (lib/inv_rms.wgsl)

    // max |y|, y = (x * w) * inv (two roundings, as the CPU).
    var m = 0.0;
    for (var i = lid; i < p.k; i += WG) {
        m = max(m, abs(normed(xo, i, inv)));
    }
    let amax = wg_max(lid, m);
    let qs   = act_scale_of_max(amax);

    // q = clamp(round_half_even(y * qs)), four bytes per word.
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
