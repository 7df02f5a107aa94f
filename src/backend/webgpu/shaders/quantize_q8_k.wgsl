// quantize_q8_k: the Q8_K-block form of f32 activations, as ggml's quantize_row_q8_K_ref and the CPU
// reference (cpu::quantize_row_q8_k_acts) compute it, bit for bit: per block of 256 values m = the
// first value of largest |x|, iscale = -127 / m (correctly rounded), q = min(127, round-half-even(
// iscale * x)), d = 1 / iscale (all zero for an all-zero block). The input of matmul.wgsl for Q4_K /
// Q6_K weights (which sums the codes of each 16 itself: ggml's bsums).
//
//   x: [K, T] f32   codes: [T][K/256][64] u32 (four int8 codes per word)   d: [T][K/256] f32
// Bindings: 0 x (read), 1 codes (read_write), 2 d (read_write), 3 params (uniform)
// Dispatch: (ceil(K/256 / WG), T, 1); one thread per block.

// #include "lib/numerics.wgsl"

override WG: u32 = 64u;

struct Params {
    n_blocks: u32,  // K / 256
    x_offset: u32,  // f32 index of x[0, 0]
    x_stride: u32,  // f32 elements between tokens of x
    rn_zero: u32,   // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> codes: array<u32>;
@group(0) @binding(2) var<storage, read_write> d: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x;
    let t = gid.y;
    if (b >= p.n_blocks) { return; }
    let xo = p.x_offset + t * p.x_stride + b * 256u;
    let o  = t * p.n_blocks + b;
    var amax = 0.0;
    var m    = 0.0;
    for (var j = 0u; j < 256u; j++) {
        let v = x[xo + j];
        if (abs(v) > amax) {
            amax = abs(v);
            m    = v;
        }
    }
    if (amax == 0.0) {
        for (var w = 0u; w < 64u; w++) { codes[o * 64u + w] = 0u; }
        d[o] = 0.0;
        return;
    }
    let iscale = div_rn(-127.0, m);
    for (var w = 0u; w < 64u; w++) {
        var word = 0u;
        for (var e = 0u; e < 4u; e++) {
            let q = min(127, i32(round(mul_rn(iscale, x[xo + 4u * w + e]))));
            word |= (bitcast<u32>(q) & 0xffu) << (8u * e);
        }
        codes[o * 64u + w] = word;
    }
    d[o] = div_rn(1.0, iscale);
}
