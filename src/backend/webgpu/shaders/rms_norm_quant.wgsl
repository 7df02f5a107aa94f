// rms_norm_quant: a = int8-quantize(rms_norm(x) * w) for each token (cpu::rms_norm_row followed by
// cpu::quantize_act_row, FORMATS.md §4.7), bit-exact: the sum of squares in the halving order
// (lib/sum_squares.wgsl), division and square root correctly rounded, the quantization scale 127 / max|y|.
//
//   x: [K, T] f32   w: [K] f32   q: [K, T] int8, four per u32   scale: [T] f32
// Bindings: 0 x (read), 1 w (read), 2 q (read_write), 3 scale (read_write), 4 params (uniform)
// Dispatch: (T, 1, 1). One workgroup per token; thread i handles words i, i + WG, ... (4 elements
// each) of x and of q, reading x and w once.

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"

override WG: u32 = 256u;  // a power of two

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

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t       = wid.x;
    let xo      = p.x_offset + t * p.x_stride;
    let n_words = p.k / 4u;

    // Words lid + u WG of x (4 elements each, k <= 32 WG: at most 8) and of w, read once into
    // registers; the squares in the halving order (lib/sum_squares.wgsl, as the decode prologue).
    var xs: array<vec4<f32>, 8>;
    var ws: array<vec4<f32>, 8>;
    for (var u = 0u; u < 8u; u++) {
        let j = lid + u * WG;
        if (j < n_words) {
            let i = xo + 4u * j;
            let o = p.w_offset + 4u * j;
            xs[u] = vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
            ws[u] = vec4<f32>(w[o], w[o + 1u], w[o + 2u], w[o + 3u]);
        }
    }
    var sq: array<vec4<f32>, 8>;  // (absent words are zero)
    for (var u = 0u; u < 8u; u++) { sq[u] = squares4(xs[u]); }
    let inv = inv_rms_of(sum_squares_words(lid, sq));  // as the CPU, bit for bit

    // y = (x * inv) * w (two roundings, as the CPU) and max |y|.
    var m = 0.0;
    for (var u = 0u; u < 8u; u++) {
        let y = (xs[u] * inv) * ws[u];
        xs[u] = y;
        m = max(m, max(max(abs(y.x), abs(y.y)), max(abs(y.z), abs(y.w))));
    }
    // The CPU takes max(1e-5, max|y|) in double: below the double 1e-5 (the largest f32 below it is
    // 9.99999974738e-06) the scale is (float)(127 / 1e-5) = 12700000.
    let amax = wg_max(lid, m);
    let qs   = select(div_rn(127.0, amax), 12700000.0, amax <= 9.99999974738e-06);

    // q = clamp(round_half_even(y * qs)), four bytes per word.
    let qo = p.q_offset + t * p.q_stride;
    for (var u = 0u; u < 8u; u++) {
        let j = lid + u * WG;
        if (j < n_words) {
            let c = vec4<i32>(clamp(round(xs[u] * qs), vec4<f32>(-128.0), vec4<f32>(127.0)));
            let b = vec4<u32>(bitcast<vec4<u32>>(c) & vec4<u32>(0xffu));
            q[qo + j] = b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
        }
    }
    if (lid == 0u) { scales[p.scale_offset + t] = qs; }
}
