// numerics_probe: measures whether fma is fused on this adapter and whether plain f32 division and
// sqrt are correctly rounded, so the backend can pick the exact arithmetic of lib/numerics.wgsl
// (override FMA_FUSED). The host compares with its own IEEE results.
//
//   a, b: [n] f32 (b != 0, a > 0)   out: [n][3] f32 = fma(a, b, -(a * b)), a / b, sqrt(a)
// Bindings: 0 a (read), 1 b (read), 2 out (read_write), 3 params (uniform)
// Dispatch: (ceil(n / 64), 1, 1); one thread per element.

struct Params {
    n: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.n) { return; }
    let x = a[i];
    let y = b[i];
    out[3u * i]      = fma(x, y, -(x * y));  // non-zero for some inputs only when fused
    out[3u * i + 1u] = x / y;
    out[3u * i + 2u] = sqrt(x);
}
