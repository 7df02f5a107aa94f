// quantize_q8_0: the Q8_0-block form of f32 activations, as ggml's quantize_row_q8_0_ref and the CPU
// reference (cpu::quantize_row_q8_0_acts) compute it, bit for bit: per block of 32 values
// d = amax / 127 (correctly rounded), id = 1 / d (0 for d = 0), q = roundf(x * id) (half away from
// zero), and d stored as its f16 rounding. The input of matmul.wgsl for Q4_0 / Q8_0 weights.
//
//   x: [K, T] f32   codes: [T][K/32][8] u32 (four int8 codes per word, element 4w + e in byte e)
//   dq: [T][K/32] f32 (the f16 d as f32)
// Bindings: 0 x (read), 1 codes (read_write), 2 dq (read_write), 3 params (uniform)
// Dispatch: (ceil(K/32 / WG), T, 1); one thread per block.

// #include "lib/numerics.wgsl"

override WG: u32 = 64u;

struct Params {
    n_blocks: u32,  // K / 32
    x_offset: u32,  // f32 index of x[0, 0]
    x_stride: u32,  // f32 elements between tokens of x
    rn_zero: u32,   // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> codes: array<u32>;
@group(0) @binding(2) var<storage, read_write> dq: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// roundf: the integer part, plus one step away from zero when the dropped fraction is at least a
// half (v - trunc(v) is exact for |v| < 2^23).
fn round_away(v: f32) -> f32 {
    let t = trunc(v);
    return select(t, t + sign(v), abs(v - t) >= 0.5);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x;
    let t = gid.y;
    if (b >= p.n_blocks) { return; }
    let xo = p.x_offset + t * p.x_stride + b * 32u;
    var amax = 0.0;
    for (var j = 0u; j < 32u; j++) { amax = max(amax, abs(x[xo + j])); }
    let d  = div_rn(amax, 127.0);
    let id = select(0.0, div_rn(1.0, d), d != 0.0);
    let o  = t * p.n_blocks + b;
    for (var w = 0u; w < 8u; w++) {
        var word = 0u;
        for (var e = 0u; e < 4u; e++) {
            let q = i32(round_away(mul_rn(x[xo + 4u * w + e], id)));
            word |= (bitcast<u32>(q) & 0xffu) << (8u * e);
        }
        codes[o * 8u + w] = word;
    }
    dq[o] = round_f16(d);
}
