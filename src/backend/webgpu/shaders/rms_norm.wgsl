// rms_norm: y = rms_norm(x) * w for each token (cpu::rms_norm_row), bit-exact like rms_norm_quant.
// x and y are different buffers (for an in-place norm the host passes a copy of x).
//
//   x: [K, T] f32   w: [K] f32   y: [K, T] f32
// Bindings: 0 x (read), 1 w (read), 2 y (read_write), 3 params (uniform)
// Dispatch: (T, 1, 1). One workgroup per token; thread i handles elements i, i + WG, ...

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"

override WG: u32 = 256u;  // a power of two

struct Params {
    k: u32,         // elements per token
    eps: f32,
    x_offset: u32,  // f32 index of x[0, 0]
    x_stride: u32,  // f32 elements between tokens
    w_offset: u32,  // f32 index of w[0]
    y_offset: u32,  // f32 index of y[0, 0]
    y_stride: u32,  // f32 elements between tokens
    rn_zero: u32,   // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;


@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.x;
    let xo = p.x_offset + t * p.x_stride;
    let inv = inv_rms(lid, xo);  // as the CPU, bit for bit (lib/inv_rms.wgsl)
    let yo = p.y_offset + t * p.y_stride;
    for (var i = lid; i < p.k; i += WG) {
        y[yo + i] = (x[xo + i] * w[p.w_offset + i]) * inv;
    }
}
