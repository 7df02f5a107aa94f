// exp_check: lib/numerics.wgsl's exp_rn_fast (FAST) or exp_rn_ziv (fast paths with Ziv's test)
// against exp_rn on the f32 bit patterns start + i * stride (i < count, wrapping; NaN and infinity
// skipped), for WebGpuBackend::exp_check. Writes out[0] += mismatches (atomic) and out[1] = the smallest
// mismatching bit pattern (atomicMin; 0xffffffff when none).
//
// Bindings: 0 out (read_write, 2 atomic u32), 1 params (uniform)
// Dispatch: (ceil(count / 256), 1, 1)

// #include "lib/numerics.wgsl"

override FAST: bool = true;  // exp_rn_fast, else exp_rn_ziv

fn checked_exp(x: f32) -> f32 {
    if (FAST) { return exp_rn_fast(x); }
    return exp_rn_ziv(x);
}

struct Params {
    start: u32,
    stride: u32,
    count: u32,
    rn_zero: u32,  // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read_write> out: array<atomic<u32>, 2>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= p.count) { return; }
    let bits = p.start + gid.x * p.stride;
    if ((bits & 0x7f800000u) == 0x7f800000u) { return; }
    let x = bitcast<f32>(bits);
    if (bitcast<u32>(checked_exp(x)) != bitcast<u32>(exp_rn(x))) {
        atomicAdd(&out[0], 1u);
        atomicMin(&out[1], bits);
    }
}
