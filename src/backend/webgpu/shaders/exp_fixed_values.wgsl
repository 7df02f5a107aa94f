// exp_fixed_values: lib/numerics.wgsl's exp_fixed on the f32 bit patterns start + i * stride
// (i < count, wrapping), for WebGpuBackend::exp_fixed_values, whose caller compares the bits with
// cpu::exp_fixed's.
//
//   out: [count] u32, the bits of exp_fixed(x)
// Bindings: 0 out (read_write), 1 params (uniform)
// Dispatch: (ceil(count / 256), 1, 1)

// #include "lib/numerics.wgsl"

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
    out[gid.x] = bitcast<u32>(exp_fixed(bitcast<f32>(p.start + gid.x * p.stride)));
}
