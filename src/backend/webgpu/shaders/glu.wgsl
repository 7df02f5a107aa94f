// glu: f = act(g) * u from stacked gate and up rows (matmul_glu after matmul.wgsl), as the CPU's
// matmul_glu: SiLU g / (1 + exp_fixed(-g)) with a correctly rounded division, or ReLU² (ffn_gate).
//
//   gu: [2 n_ff, T] f32 (gate rows, then up rows)   f: [n_ff, T] f32
// Bindings: 0 gu (read), 1 f (read_write), 2 params (uniform)
// Dispatch: (ceil(n_ff / WG), T, 1).

// #include "lib/numerics.wgsl"

override WG: u32 = 64u;

struct Params {
    n_ff: u32,
    gu_offset: u32,
    f_offset: u32,
    activation: u32,  // 0 ReLU², 1 SiLU
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> gu: array<f32>;
@group(0) @binding(1) var<storage, read_write> f: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    let t = gid.y;
    if (r >= p.n_ff) { return; }
    let go = p.gu_offset + t * 2u * p.n_ff + r;
    f[p.f_offset + t * p.n_ff + r] = ffn_gate(gu[go], gu[go + p.n_ff], p.activation);
}
