// head_grid_batch: the first stage of the batched greedy head (lm_head_i8_batch.wgsl, issue 53):
// each column's head input on the 16-bit grid of lm_head_i8_argmax.wgsl, and its norms for the bound.
// Column c of h (already rms_norm(x) * nw, the exact head's input; rounded to f16 here when
// ROUND_IN is set, as lm_head.wgsl does) becomes H = round(h / S), S = max|h| / 32639, split as
// H = 256 a + b with a and b int8 (4 to a u32 word, element 4j + i in byte i of word j), and
//   norms = (||h|| + ||eta||, ||eta||, S),  eta = h - S H,  |eta_i| <= 0.51 S,
// all from above (a margin of 2^-8 covers the f32 sum of K <= 4096 squares), so that a row's int8
// value f = (s S) (256 sum q a + sum q b) is within B = c norms.x + sq norms.y of its exact logit
// (head_i8_pack.wgsl's (s, c, sq)). It also zeroes the column's threshold slot (the lowest key).
//
//   h: [K, T] f32 (column stride h_stride)   grid: [T][a words K/4, b words K/4] u32, then the
//   norms [T] vec4<f32> (bits) from u32 index T K / 2   thr: [T] u32
// Bindings: 0 h (read), 1 grid (read_write), 2 thr (read_write), 3 params (uniform)
// Dispatch: (T, 1, 1), a workgroup per column.

// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"

override K: u32 = 2560u;  // elements per column, a multiple of 4, at most 4 WG 4
override WG: u32 = 256u;  // a power of two
override ROUND_IN: bool = false;  // h rounded to f16 first

struct Params {
    n_cols: u32,
    h_offset: u32,     // f32 index of h[0, 0]
    h_stride: u32,
    rn_zero: u32,      // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> h: array<f32>;
@group(0) @binding(1) var<storage, read_write> grid: array<u32>;
@group(0) @binding(2) var<storage, read_write> thr: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

fn h_word(col: u32, i: u32) -> vec4<f32> {
    let o = p.h_offset + col * p.h_stride + 4u * i;
    var v = vec4<f32>(h[o], h[o + 1u], h[o + 2u], h[o + 3u]);
    if (ROUND_IN) { v = vec4<f32>(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w)); }
    return v;
}

fn pack_bytes(v: vec4<i32>) -> u32 {
    let b = bitcast<vec4<u32>>(v) & vec4<u32>(0xffu);
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let col   = wid.x;
    let words = K / 4u;
    var v: array<vec4<f32>, 4>;
    var sq = 0.0;
    var mx = 0.0;
    for (var u = 0u; u < 4u; u++) {
        let i = lid + u * WG;
        if (i < words) {
            v[u] = h_word(col, i);
            sq += dot(v[u], v[u]);
            mx = max(mx, max_abs4(v[u]));
        }
    }
    let ms   = wg_max_sum(lid, mx, sq);
    let vmax = ms.x;
    let inv  = select(32639.0 / vmax, 0.0, vmax == 0.0);
    let step = select(vmax / 32639.0, 0.0, vmax == 0.0);
    let base = col * (K / 2u);
    for (var u = 0u; u < 4u; u++) {
        let i = lid + u * WG;
        if (i < words) {
            let hq = vec4<i32>(clamp(round(v[u] * inv), vec4<f32>(-32639.0), vec4<f32>(32639.0)));
            let a  = (hq + vec4<i32>(128)) >> vec4<u32>(8u);
            grid[base + i]         = pack_bytes(a);
            grid[base + words + i] = pack_bytes(hq - a * 256);
        }
    }
    if (lid == 0u) {
        let margin = 1.0 + 1.0 / 256.0;
        let eta    = 0.51 * step * sqrt(f32(K)) * margin;
        let nb     = p.n_cols * (K / 2u) + 4u * col;
        grid[nb]      = bitcast<u32>(sqrt(ms.y) * margin + eta);
        grid[nb + 1u] = bitcast<u32>(eta);
        grid[nb + 2u] = bitcast<u32>(step);
        grid[nb + 3u] = 0u;
        thr[col]      = 0u;
    }
}
