// matmul: y = W x for the non-ternary linear weights (Backend::matmul), as the CPU reference
// computes it (src/backend/cpu/cpu_matmul.h), bit for bit:
//   F32 / F16 / BF16  each block of 32 products (each rounded) summed in order, then the block
//                     sums in the halving order (cpu::dot_f32_blocks);
//   Q8_0              per block sumi (exact in i32) * (d_w * d_a), summed block after block;
//   Q4_0              per block (sumi * d_w) * d_a, summed block after block (ggml's generic order).
// A workgroup computes ROWS rows of one token: its threads compute the (row, block) terms into
// workgroup memory, then one thread per row adds them in the reference's order.
//
//   w: f32 [N][K] | f16 / bf16 [N][K/2] words | Q8_0 [N][K/32][8] words | Q4_0 [N][K/32][4] words
//   ws: [N][K/32] f32 (the blocks' f16 d as f32; Q types)   x: [K, T] f32 (float types)
//   codes: [T][K/32][8] u32, dq: [T][K/32] f32 (Q types: quantize_q8_0.wgsl)   y: [N, T] f32
// Bindings: 0 w, 1 ws, 2 x, 3 codes, 4 dq (read); 5 y (read_write); 6 params (uniform)
// Dispatch: (ceil(N / ROWS), T, 1).

// #include "lib/numerics.wgsl"

override WG: u32 = 64u;
override ROWS: u32 = 4u;
override NB: u32 = 64u;         // K / 32
override WTYPE: u32 = 0u;       // 0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0
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
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> terms: array<f32, ROWS * NB>;

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
        if (row < p.n_rows) { terms[i] = block_term(row, i % NB, t); }
    }
    workgroupBarrier();
    let row = row0 + lid;
    if (lid >= ROWS || row >= p.n_rows) { return; }
    let base = lid * NB;
    var s    = 0.0;
    if (WTYPE <= 2u) {
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
