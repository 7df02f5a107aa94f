// lm_head_q: logits[v, t] = head[v] · h[t] for a head kept in its file's blocks (Q8_0, Q4_0, Q6_K;
// GpuMatrix's layout) instead of lm_head.wgsl's f32 copy: 4 to 5 times fewer bytes per token. As the
// CPU's lm_head: each weight dequantized to f32 exactly as dequantize_row does (Q8_0 q * d, Q4_0
// (n - 8) * d, Q6_K (d * sc) * (q - 32)), h rounded to f16 first with round_input, the products summed
// in double-float like lm_head.wgsl (the CPU sums in double), rounded to f32 once. Also the first
// stage of the argmax (argmax_partial.wgsl's, over the workgroup's rows; ties to the lower index) into
// partial[t][workgroup], so that argmax_final.wgsl can follow directly.
//
//   w, ws: GpuMatrix words and block scales (matmul.wgsl's table)   h: [K, T] f32
//   logits: [n_vocab, T] f32   partial: [T][ceil(n_vocab / (WG / LANES))] (f32 value bits, u32 index)
// Bindings: 0 w, 1 ws, 2 h (read); 3 logits, 4 partial (read_write); 5 params (uniform)
// Dispatch: (ceil(n_vocab / (WG / LANES)), T, 1). A team of LANES lanes per row, lane l on the row's
// 32-value chunks l, l + LANES, ...; the lanes' sums added by a tree in workgroup memory.

// #include "lib/numerics.wgsl"
// #include "lib/best_index.wgsl"

override WG: u32 = 256u;
override LANES: u32 = 8u;   // a power of two dividing WG
override CPR: u32 = 64u;    // 32-value chunks per row (K / 32)
override WTYPE: u32 = 6u;   // 3 q8_0, 4 q4_0, 6 q6_k (matmul.wgsl's numbering)

struct Params {
    n_vocab: u32,
    h_offset: u32,     // f32 index of h[0, 0]
    h_stride: u32,
    out_offset: u32,   // f32 index of logits[0, 0]
    out_stride: u32,
    round_input: u32,  // 1: round h to f16 first
    rn_zero: u32,      // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> ws: array<f32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> red: array<vec2<f32>, WG>;

fn h_at(t: u32, i: u32) -> f32 {
    let v = h[p.h_offset + t * p.h_stride + i];
    return select(v, round_f16(v), p.round_input != 0u);
}

fn sbyte(word: u32, e: u32) -> i32 {
    return (bitcast<i32>(word << (24u - 8u * e))) >> 24u;
}

fn ubyte(word: u32, e: u32) -> u32 {
    return (word >> (8u * e)) & 0xffu;
}

// The 32 dequantized weights of chunk c of `row`.
fn chunk_weights(row: u32, c: u32) -> array<f32, 32> {
    var e: array<f32, 32>;
    if (WTYPE == 3u) {
        let d  = ws[row * CPR + c];
        let wo = (row * CPR + c) * 8u;
        for (var j = 0u; j < 32u; j++) { e[j] = mul_rn(f32(sbyte(w[wo + j / 4u], j % 4u)), d); }
    } else if (WTYPE == 4u) {
        let d  = ws[row * CPR + c];
        let wo = (row * CPR + c) * 4u;
        for (var j = 0u; j < 16u; j++) {
            let b = ubyte(w[wo + j / 4u], j % 4u);
            e[j]       = mul_rn(f32(i32(b & 0xfu) - 8), d);
            e[j + 16u] = mul_rn(f32(i32(b >> 4u) - 8), d);
        }
    } else {
        // Q6_K: block b = c / 8 (ql words 0..31, qh 32..47, int8 scales 48..51); chunk q = c % 8 holds
        // values 128 half + 32 k + l, l < 32 (half = q / 4, k = q % 4).
        let nbk  = CPR / 8u;
        let b    = c / 8u;
        let half = (c % 8u) / 4u;
        let k    = c % 4u;
        let wo   = (row * nbk + b) * 52u;
        let d    = ws[row * nbk + b];
        let lo_w = wo + 16u * half + 8u * (k & 1u);
        let hi_w = wo + 32u + 8u * half;
        for (var l = 0u; l < 32u; l++) {
            let lo = ubyte(w[lo_w + l / 4u], l % 4u);
            let hi = (ubyte(w[hi_w + l / 4u], l % 4u) >> (2u * k)) & 3u;
            let q  = i32(select(lo & 0xfu, lo >> 4u, k >= 2u) | (hi << 4u)) - 32;
            let si = (128u * half + 32u * k + l) / 16u;
            let sc = sbyte(w[wo + 48u + si / 4u], si % 4u);
            e[l] = mul_rn(mul_rn(d, f32(sc)), f32(q));
        }
    }
    return e;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let team = lid / LANES;
    let lane = lid % LANES;
    let row  = wid.x * (WG / LANES) + team;
    let t    = wid.y;
    var acc  = vec2<f32>(0.0, 0.0);
    if (row < p.n_vocab) {
        for (var c = lane; c < CPR; c += LANES) {
            let e = chunk_weights(row, c);
            for (var j = 0u; j < 32u; j++) { acc = df_fma(acc, e[j], h_at(t, 32u * c + j)); }
        }
    }
    red[lid] = acc;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if (lane < s) { red[lid] = df_add(red[lid], red[lid + s]); }
        workgroupBarrier();
    }
    var bv = 0.0;
    var bi = 0xffffffffu;
    if (lane == 0u && row < p.n_vocab) {
        bv = df_to_f32(red[lid]);
        bi = row;
        logits[p.out_offset + t * p.out_stride + row] = bv;
    }
    let best = best_index(lid, bv, bi);
    if (lid == 0u) { partial[t * ((p.n_vocab + WG / LANES - 1u) / (WG / LANES)) + wid.x] = best; }
}
