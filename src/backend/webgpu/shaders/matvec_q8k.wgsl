// matvec_q8k: matvec_q8.wgsl for the K-quants (Q4_K, Q6_K), whose activations are Q8_K blocks:
// the input's norm (rms_norm.wgsl's numerics) and Q8_K blocks (quantize_q8_k.wgsl's: m the first
// value of largest |h|, iscale = -127 / m, q = min(127, round-half-even(iscale h)), d = 1 / iscale)
// staged in workgroup memory by every workgroup, the terms of matmul.wgsl's kquant_terms (per row and
// 256-value block 8 lane sums, lane = value index mod 8, times d_w d_a, and Q4_K's min term), one
// invocation per (row, block, lane), then a row's terms added in matmul.wgsl's order; GLU's gate in
// the epilogue. Bit for bit the CPU reference's chain (rms_norm, quantize_row_q8_k_acts,
// dot_q4_k_q8_k / dot_q6_k_q8_k, matmul_glu).
//
//   w: GpuMatrix words: Q4_K [N][K/256][36] (the file's blocks) | Q6_K [N][K/256][52] (ql, qh, int8
//      scales)   ws: [N][K/256] f32 (Q6_K's d)   x: [K, T] f32   nw: [K] f32 (NORM)   y: [N, T] f32
// Bindings: 0 w, 1 ws, 2 x, 3 nw (read); 4 y (read_write); 5 params (uniform)
// Dispatch: (ceil(n_rows / ROWS), T, 1).

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"

override WG: u32 = 256u;     // a power of two, >= 8 NB (a staging invocation per 32 values); NORM: K <= 32 WG
override ROWS: u32 = 8u;
override MROWS: u32 = 8u;    // ROWS, or 2 ROWS with GLU
override NB: u32 = 8u;       // K / 256
override WTYPE: u32 = 5u;    // 5 q4_k, 6 q6_k
override NORM: bool = false;
override GLU: bool = false;
override ACCUMULATE: bool = false;

struct Params {
    n_rows: u32,
    k: u32,
    eps: f32,
    x_offset: u32,
    x_stride: u32,
    nw_offset: u32,
    y_offset: u32,
    y_stride: u32,
    up_row: u32,
    activation: u32,
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> ws: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> nw: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> kcodes: array<u32, 64u * NB>;   // block b: words 64 b .. (four int8 codes each)
var<workgroup> kd: array<f32, NB>;
var<workgroup> part_amax: array<f32, 8u * NB>;  // per 32 values: the first largest |h| and its value
var<workgroup> part_m: array<f32, 8u * NB>;
var<workgroup> blk_iscale: array<f32, NB>;
var<workgroup> terms: array<f32, MROWS * (9u * NB + 1u)>;  // a row every 9 NB + 1

fn h_at(x0: u32, i: u32, inv: f32) -> f32 {
    if (!NORM) { return x[x0 + i]; }
    return (x[x0 + i] * nw[p.nw_offset + i]) * inv;
}

fn sbyte(word: u32, e: u32) -> i32 {
    return (bitcast<i32>(word << (24u - 8u * e))) >> 24u;
}

fn wbyte(at: u32, i: u32) -> u32 {
    return (w[at + i / 4u] >> (8u * (i % 4u))) & 0xffu;
}

fn kcode(b: u32, i: u32) -> i32 {
    return sbyte(kcodes[b * 64u + i / 4u], i % 4u);
}

// Invocation c < 8 NB: values 32 c .. 32 c + 31 (block c / 8): the first largest |h|, then, after
// the block's iscale is known, their codes.
fn stage_q8_k(lid: u32, x0: u32, inv: f32) {
    for (var c = lid; c < 8u * NB; c += WG) {
        var amax = 0.0;
        var m    = 0.0;
        for (var j = 0u; j < 32u; j++) {
            let v = h_at(x0, 32u * c + j, inv);
            if (abs(v) > amax) {
                amax = abs(v);
                m    = v;
            }
        }
        part_amax[c] = amax;
        part_m[c]    = m;
    }
    workgroupBarrier();
    for (var b = lid; b < NB; b += WG) {
        var amax = 0.0;
        var m    = 0.0;
        for (var c = 8u * b; c < 8u * b + 8u; c++) {
            if (part_amax[c] > amax) {
                amax = part_amax[c];
                m    = part_m[c];
            }
        }
        let iscale    = select(div_rn(-127.0, m), 0.0, amax == 0.0);
        blk_iscale[b] = iscale;
        kd[b]         = select(div_rn(1.0, iscale), 0.0, amax == 0.0);
    }
    workgroupBarrier();
    for (var c = lid; c < 8u * NB; c += WG) {
        let iscale = blk_iscale[c / 8u];
        for (var q = 0u; q < 8u; q++) {
            var word = 0u;
            for (var e = 0u; e < 4u; e++) {
                let code = min(127, i32(round(mul_rn(iscale, h_at(x0, 32u * c + 4u * q + e, inv)))));
                word |= (bitcast<u32>(code) & 0xffu) << (8u * e);
            }
            kcodes[8u * c + q] = word;
        }
    }
}

// Term l (0..7: lane sum l times d_w d_a; 8: the min term) of weight row `row`, block b, into at.
fn lane_term(row: u32, b: u32, l: u32, at: u32) {
    let ad = kd[b];
    var aux = 0;
    if (WTYPE == 5u) {
        let wo = (row * NB + b) * 36u;
        let dd = unpack2x16float(w[wo]);  // d, dmin
        var scs: array<i32, 8>;
        var mns: array<i32, 8>;
        for (var j = 0u; j < 8u; j++) {
            if (j < 4u) {
                scs[j] = i32(wbyte(wo + 1u, j) & 63u);
                mns[j] = i32(wbyte(wo + 1u, j + 4u) & 63u);
            } else {
                scs[j] = i32((wbyte(wo + 1u, j + 4u) & 0xfu) | ((wbyte(wo + 1u, j - 4u) >> 6u) << 4u));
                mns[j] = i32((wbyte(wo + 1u, j + 4u) >> 4u) | ((wbyte(wo + 1u, j) >> 6u) << 4u));
            }
        }
        for (var j = 0u; j < 8u; j++) {
            for (var i = l; i < 32u; i += 8u) {
                let byte = wbyte(wo + 4u, (j / 2u) * 32u + i);
                let code = i32(select(byte & 0xfu, byte >> 4u, (j & 1u) == 1u));
                aux += scs[j] * (kcode(b, j * 32u + i) * code);
            }
        }
        terms[at + l] = (dd.x * ad) * f32(aux);
        if (l == 0u) {
            var sumi = 0;
            for (var g = 0u; g < 16u; g++) {
                var bs = 0;
                for (var i = 0u; i < 16u; i++) { bs += kcode(b, g * 16u + i); }
                sumi += bs * mns[g / 2u];
            }
            terms[at + 8u] = (dd.y * ad) * f32(sumi);
        }
        return;
    }
    // Q6_K: ql words 0..31, qh words 32..47, int8 scales words 48..51.
    let wo = (row * NB + b) * 52u;
    for (var i = l; i < 256u; i += 8u) {
        let half = i / 128u;
        let q4   = (i % 128u) / 32u;
        let li   = i % 32u;
        let lo   = wbyte(wo, half * 64u + li + select(0u, 32u, (q4 & 1u) == 1u));
        let hi   = (wbyte(wo + 32u, half * 32u + li) >> (2u * q4)) & 3u;
        let v    = i32(select(lo & 0xfu, lo >> 4u, q4 >= 2u) | (hi << 4u)) - 32;
        let sc   = sbyte(w[wo + 48u + (i / 16u) / 4u], (i / 16u) % 4u);
        aux += sc * (kcode(b, i) * v);
    }
    terms[at + l] = (ws[row * NB + b] * ad) * f32(aux);
    if (l == 0u) { terms[at + 8u] = 0.0; }
}

fn weight_row(r0: u32, m: u32) -> u32 {
    if (GLU && m >= ROWS) { return p.up_row + r0 + m - ROWS; }
    return r0 + m;
}

// matmul.wgsl's K-quant sum: lane sums block after block, the min terms subtracted from the total,
// then the lanes added to it in order.
fn row_sum(m: u32) -> f32 {
    let base = m * (9u * NB + 1u);
    var sums: array<f32, 8>;
    for (var l = 0u; l < 8u; l++) { sums[l] = 0.0; }
    var s = 0.0;
    for (var b = 0u; b < NB; b++) {
        for (var l = 0u; l < 8u; l++) { sums[l] = sums[l] + terms[base + b * 9u + l]; }
        s = s - terms[base + b * 9u + 8u];
    }
    for (var l = 0u; l < 8u; l++) { s = s + sums[l]; }
    return s;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.y;
    let x0 = p.x_offset + t * p.x_stride;
    var inv = 1.0;
    if (NORM) { inv = inv_rms(lid, x0); }
    stage_q8_k(lid, x0, inv);
    workgroupBarrier();

    let r0    = wid.x * ROWS;
    let lanes = WG / MROWS;
    let m     = lid / lanes;
    if (m < MROWS && r0 + select(m, m - ROWS, GLU && m >= ROWS) < p.n_rows) {
        let row = weight_row(r0, m);
        for (var task = lid % lanes; task < 8u * NB; task += lanes) {
            lane_term(row, task / 8u, task % 8u, m * (9u * NB + 1u) + (task / 8u) * 9u);
        }
    }
    workgroupBarrier();

    let r = r0 + lid;
    if (lid >= ROWS || r >= p.n_rows) { return; }
    let o = p.y_offset + t * p.y_stride + r;
    if (GLU) {
        y[o] = ffn_gate(row_sum(lid), row_sum(ROWS + lid), p.activation);
    } else if (ACCUMULATE) {
        y[o] = y[o] + row_sum(lid);
    } else {
        y[o] = row_sum(lid);
    }
}
