// matmul: y = W x for the non-ternary linear weights (Backend::matmul), as the CPU reference
// computes it (src/backend/cpu/cpu_matmul.h), bit for bit:
//   F32 / F16 / BF16  each block of 32 products (each rounded) summed in order, then the block
//                     sums in the halving order (cpu::dot_f32_blocks);
//   Q8_0              per block sumi (exact in i32) * (d_w * d_a), summed block after block;
//   Q4_0              per block (sumi * d_w) * d_a, summed block after block (ggml's generic order);
//   Q4_K / Q6_K       ggml's generic vec_dot_q4_K_q8_K / q6_K_q8_K: per 256-value block integer sums
//                     in 8 lanes (element index mod 8), lane l's f32 sum += (d_w * d_a) * lane, Q4_K's
//                     (dmin * d_a) * sum(bsums * mins) subtracted from the total block by block, the
//                     lanes added to it in order at the end.
// A workgroup computes ROWS rows of one token: its threads compute the (row, block) terms into
// workgroup memory (PER f32 each: 1, or 8 lanes + the min term for K-quants), then one thread per
// row adds them in the reference's order.
//
//   w: f32 [N][K] | f16 / bf16 [N][K/2] words | Q8_0 [N][K/32][8] | Q4_0 [N][K/32][4] |
//      Q4_K [N][K/256][36] (the file's blocks) | Q6_K [N][K/256][52] (ql, qh, int8 scales)
//   ws: [N][NB] f32 (the blocks' f16 d as f32; Q8_0, Q4_0, Q6_K)   x: [K, T] f32 (float types)
//   codes: [T][K/32][8] u32, dq: [T][K/32] f32 (Q8_0, Q4_0: quantize_q8_0.wgsl)
//   kcodes: [T][K/256][64] u32, kd: [T][K/256] f32 (Q4_K, Q6_K: quantize_q8_k.wgsl)   y: [N, T] f32
// Bindings: 0 w, 1 ws, 2 x, 3 codes, 4 dq, 5 kcodes, 6 kd (read); 7 y (read_write); 8 params (uniform)
// Dispatch: (ceil(N / ROWS), T, 1).

// #include "lib/numerics.wgsl"

override WG: u32 = 64u;
override ROWS: u32 = 4u;
override NB: u32 = 64u;         // blocks per row: K / 32, or K / 256 for K-quants
override WTYPE: u32 = 0u;       // 0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0, 5 q4_k, 6 q6_k
override PER: u32 = 1u;        // f32 terms per (row, block): 1, or 9 for K-quants (the host sets it)
override ACCUMULATE: bool = false;

struct Params {
    n_rows: u32,
    x_offset: u32,  // f32 index of x[0, 0]
    x_stride: u32,  // f32 elements between tokens of x
    y_offset: u32,  // f32 index of y[0, 0]
    y_stride: u32,  // f32 elements between tokens of y
    rn_zero: u32,   // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> ws: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> codes: array<u32>;
@group(0) @binding(4) var<storage, read> dq: array<f32>;
@group(0) @binding(5) var<storage, read> kcodes: array<u32>;
@group(0) @binding(6) var<storage, read> kd: array<f32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> terms: array<f32, ROWS * NB * PER>;

fn weight_at(row: u32, e: u32) -> f32 {
    let k = NB * 32u;
    if (WTYPE == 0u) { return bitcast<f32>(w[row * k + e]); }
    let word = w[(row * k + e) / 2u];
    if (WTYPE == 1u) { return unpack2x16float(word)[e & 1u]; }
    return bitcast<f32>(select(word << 16u, word & 0xffff0000u, (e & 1u) == 1u));  // bf16
}

// Signed byte e (0..3) of a word.
fn sbyte(word: u32, e: u32) -> i32 {
    return (bitcast<i32>(word << (24u - 8u * e))) >> 24u;
}

// Unsigned byte i of the words from index `at` on.
fn wbyte(at: u32, i: u32) -> u32 {
    return (w[at + i / 4u] >> (8u * (i % 4u))) & 0xffu;
}

// Activation code i (0..255) of K-block b of token t.
fn kcode(t: u32, b: u32, i: u32) -> i32 {
    return sbyte(kcodes[(t * NB + b) * 64u + i / 4u], i % 4u);
}

// The 9 terms of a K-quant (row, block): lanes 0..7, then the min term, into terms[at ..].
fn kquant_terms(row: u32, b: u32, t: u32, at: u32) {
    var aux: array<i32, 8>;
    for (var l = 0u; l < 8u; l++) { aux[l] = 0; }
    let ad = kd[t * NB + b];
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
        var sumi = 0;
        for (var g = 0u; g < 16u; g++) {
            var bs = 0;
            for (var i = 0u; i < 16u; i++) { bs += kcode(t, b, g * 16u + i); }
            sumi += bs * mns[g / 2u];
        }
        for (var j = 0u; j < 8u; j++) {
            for (var l = 0u; l < 32u; l++) {
                let byte = wbyte(wo + 4u, (j / 2u) * 32u + l);
                let code = i32(select(byte & 0xfu, byte >> 4u, (j & 1u) == 1u));
                aux[l % 8u] += scs[j] * (kcode(t, b, j * 32u + l) * code);
            }
        }
        let d = dd.x * ad;
        for (var l = 0u; l < 8u; l++) { terms[at + l] = d * f32(aux[l]); }
        terms[at + 8u] = (dd.y * ad) * f32(sumi);
        return;
    }
    // Q6_K: ql words 0..31, qh words 32..47, int8 scales words 48..51.
    let wo = (row * NB + b) * 52u;
    for (var i = 0u; i < 256u; i++) {
        let half = i / 128u;
        let q4   = (i % 128u) / 32u;
        let l    = i % 32u;
        let lo   = wbyte(wo, half * 64u + l + select(0u, 32u, (q4 & 1u) == 1u));
        let hi   = (wbyte(wo + 32u, half * 32u + l) >> (2u * q4)) & 3u;
        let v    = i32(select(lo & 0xfu, lo >> 4u, q4 >= 2u) | (hi << 4u)) - 32;
        let sc   = sbyte(w[wo + 48u + (i / 16u) / 4u], (i / 16u) % 4u);
        aux[i % 8u] += sc * (kcode(t, b, i) * v);
    }
    let d = ws[row * NB + b] * ad;
    for (var l = 0u; l < 8u; l++) { terms[at + l] = d * f32(aux[l]); }
    terms[at + 8u] = 0.0;
}

fn block_term(row: u32, b: u32, t: u32) -> f32 {
    if (WTYPE <= 2u) {
        let xo = p.x_offset + t * p.x_stride + b * 32u;
        var s  = 0.0;
        for (var j = 0u; j < 32u; j++) { s = s + mul_rn(weight_at(row, b * 32u + j), x[xo + j]); }
        return s;
    }
    let ao   = (t * NB + b) * 8u;
    var sumi = 0;
    if (WTYPE == 3u) {
        let wo = (row * NB + b) * 8u;
        for (var i = 0u; i < 8u; i++) {
            let ww = w[wo + i];
            let aw = codes[ao + i];
            for (var e = 0u; e < 4u; e++) { sumi += sbyte(ww, e) * sbyte(aw, e); }
        }
        return f32(sumi) * (ws[row * NB + b] * dq[t * NB + b]);
    }
    // Q4_0: byte j of the 16 holds element j (low nibble) and j + 16 (high nibble).
    let wo = (row * NB + b) * 4u;
    for (var i = 0u; i < 4u; i++) {
        let ww = w[wo + i];
        let lo = codes[ao + i];       // activation elements 4i .. 4i + 3
        let hi = codes[ao + 4u + i];  // activation elements 16 + 4i ..
        for (var e = 0u; e < 4u; e++) {
            let byte = (ww >> (8u * e)) & 0xffu;
            sumi += (i32(byte & 0xfu) - 8) * sbyte(lo, e) + (i32(byte >> 4u) - 8) * sbyte(hi, e);
        }
    }
    return (f32(sumi) * ws[row * NB + b]) * dq[t * NB + b];
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let row0 = wid.x * ROWS;
    let t    = wid.y;
    for (var i = lid; i < ROWS * NB; i += WG) {
        let row = row0 + i / NB;
        if (row < p.n_rows) {
            if (WTYPE >= 5u) { kquant_terms(row, i % NB, t, i * PER); } else { terms[i] = block_term(row, i % NB, t); }
        }
    }
    workgroupBarrier();
    let row = row0 + lid;
    if (lid >= ROWS || row >= p.n_rows) { return; }
    let base = lid * NB * PER;
    var s    = 0.0;
    if (WTYPE >= 5u) {
        var sums: array<f32, 8>;
        for (var l = 0u; l < 8u; l++) { sums[l] = 0.0; }
        for (var b = 0u; b < NB; b++) {
            for (var l = 0u; l < 8u; l++) { sums[l] = sums[l] + terms[base + b * 9u + l]; }
            s = s - terms[base + b * 9u + 8u];
        }
        for (var l = 0u; l < 8u; l++) { s = s + sums[l]; }
    } else if (WTYPE <= 2u) {
        // The halving order over the block sums, zero-padded to a power of two P (as the CPU adds the
        // zeros too): level h adds t[i + h] (0 past NB) onto t[i] for i < h; h <= P/2 < NB.
        var pw = 1u;
        while (pw < NB) { pw *= 2u; }
        for (var h = pw / 2u; h >= 1u; h /= 2u) {
            for (var i = 0u; i < h; i++) {
                terms[base + i] = terms[base + i] + select(0.0, terms[base + min(i + h, NB - 1u)], i + h < NB);
            }
        }
        s = terms[base];
    } else {
        for (var b = 0u; b < NB; b++) { s = s + terms[base + b]; }
    }
    let o = p.y_offset + t * p.y_stride + row;
    if (ACCUMULATE) { y[o] = y[o] + s; } else { y[o] = s; }
}
