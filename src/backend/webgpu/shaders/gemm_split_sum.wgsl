// gemm_split_sum: the second half of a GEMM split along K (ternary_gemm.wgsl / ternary_gemm_mma.wgsl
// with SPLIT > 1, one scale group per row): adds each row's SPLIT integer partial sums (exact, so
// the order does not matter: the sum of the whole row) and applies the GEMMs' epilogue with the
// same operations (div_by, the group scale, mul_rn by the output scale; GATE_UP: ffn_gate of the
// gate and up rows; else y = v or y += v), so the result is the unsplit GEMM's, bit for bit.
//
//   weights: codes | group scales [N] f32 | output scales [N] f32 (u32 words)
//   part: [SPLIT][T][N] i32 (N = every weight row: n_out, or 2 n_out with GATE_UP)
//   act_scale: [T] f32   y: [n_out, T] f32 (y_offset, y_stride)
// Bindings: 0 weights, 1 part, 2 act_scale (read), 3 y (read_write), 4 params (uniform)
// Dispatch: (ceil(n_out / WG), T, 1).

// #include "lib/numerics.wgsl"

override WG: u32 = 64u;
override GATE_UP: bool = false;

struct Params {
    n_out: u32,
    n_tokens: u32,
    n_rows: u32,  // N, part's row stride
    n_split: u32,
    scales_offset: u32,
    oscales_offset: u32,
    ascale_offset: u32,
    y_offset: u32,
    y_stride: u32,
    last: u32,     // bitlinear: 1 = y += W a; GATE_UP: 0 = relu², 1 = silu
    rn_zero: u32,  // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> weights: array<u32>;
@group(0) @binding(1) var<storage, read> part: array<i32>;
@group(0) @binding(2) var<storage, read> act_scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

// Weight row `row`'s output for token t (s: its activation scale, rs = recip_part(s)).
fn row_value(row: u32, t: u32, s: f32, rs: f32) -> f32 {
    var sum = 0;
    for (var z = 0u; z < p.n_split; z++) { sum += part[(z * p.n_tokens + t) * p.n_rows + row]; }
    let gs = bitcast<f32>(weights[p.scales_offset + row]);
    let os = bitcast<f32>(weights[p.oscales_offset + row]);
    let x  = div_by(f32(sum), s, rs) * gs;
    return mul_rn(x, os);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let o = gid.x;
    let t = wid.y;
    if (o >= p.n_out) { return; }
    let s  = act_scale[p.ascale_offset + t];
    let rs = recip_part(s);
    let yi = p.y_offset + t * p.y_stride + o;
    if (GATE_UP) {
        y[yi] = ffn_gate(row_value(o, t, s, rs), row_value(p.n_out + o, t, s, rs), p.last);
    } else if (p.last != 0u) {
        y[yi] = y[yi] + row_value(o, t, s, rs);
    } else {
        y[yi] = row_value(o, t, s, rs);
    }
}
