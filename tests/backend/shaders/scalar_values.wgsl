// scalar_values: one of lib/numerics.wgsl's scalar functions on the f32 bit patterns
// start + i * stride (i < count, wrapping), for WebGpuBackend::scalar_values, whose caller compares
// the bits with the CPU's: FN 0 exp_fixed (cpu::exp_fixed), 1 inv_root_rn (1.0f / sqrtf(x), the
// norm factor's last two steps).
//
//   out: [count] u32, the bits of the function's value
// Bindings: 0 out (read_write), 1 params (uniform)
// Dispatch: (ceil(count / 256), 1, 1)

// #include "lib/numerics.wgsl"

override FN: u32 = 0u;

struct Params {
    start: u32,
    stride: u32,
    count: u32,
    rn_zero: u32,  // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= p.count) { return; }
    let x = bitcast<f32>(p.start + gid.x * p.stride);
    var v: f32;
    if (FN == 1u) {
        v = inv_root_rn(x);
    } else {
        v = exp_fixed(x);
    }
    out[gid.x] = bitcast<u32>(v);
}
