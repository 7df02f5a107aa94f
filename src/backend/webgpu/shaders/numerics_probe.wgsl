// numerics_probe: measures whether fma is fused on this adapter, whether plain f32 division and
// sqrt are correctly rounded, and whether the compiler contracts a plain `a * b + c` into an fma
// (one rounding) and whether lib/numerics.wgsl's mul_rn prevents that, so the backend can pick the
// exact arithmetic of lib/numerics.wgsl (override FMA_FUSED) and report the rest. The host compares
// with its own IEEE results.
//
//   a: [n] f32 (a > 0)   b: [2n] f32 = b_i (!= 0), then c_i = -(a_i * b_i) rounded to f32
//   out: [n][5] f32 = fma(a, b, -(a * b)), a / b, sqrt(a), a * b + c, mul_rn(a, b) + c
// With two roundings a * b + c is exactly 0; contracted it is the product's rounding error, which
// is non-zero for most inputs.
// Bindings: 0 a (read), 1 b (read), 2 out (read_write), 3 params (uniform)
// Dispatch: (ceil(n / 64), 1, 1); one thread per element.

// #include "lib/numerics.wgsl"

struct Params {
    n: u32,
    rn_zero: u32,  // 0 (lib/numerics.wgsl mul_rn)
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
    let c = b[p.n + i];
    out[5u * i]      = fma(x, y, -(x * y));  // non-zero for some inputs only when fused
    out[5u * i + 1u] = x / y;
    out[5u * i + 2u] = sqrt(x);
    out[5u * i + 3u] = x * y + c;            // non-zero for some inputs only when contracted
    out[5u * i + 4u] = mul_rn(x, y) + c;     // must be 0
}
