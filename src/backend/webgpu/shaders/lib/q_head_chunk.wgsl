// One 32-value chunk of an LM head kept in its file's blocks (Q8_0, Q4_0, Q6_K in GpuMatrix's
// layout), shared by lm_head_q.wgsl and head_q_exact.wgsl so that both compute a row's exact logit
// with the same bits. The including kernel declares `override CPR` (chunks per row, K / 32),
// `override WTYPE` (3 q8_0, 4 q4_0, 6 q6_k), the bindings `w` (array<vec4<u32>>) and `ws`
// (array<f32>), `fn h_val(t: u32, i: u32) -> f32` (element i of token t's input), and includes
// lib/numerics.wgsl.

// A chunk's words as loaded (Q8_0: wv[0..1] the 32 codes; Q4_0: wv[0] the 32 nibbles; Q6_K:
// wv[0..1] the ql bytes, wv[2..3] the qh bytes) and the dequantization scales of its two halves of
// 16 values (dequantize_row's: d, or Q6_K's d * sc, exact in f32).
struct QChunk {
    wv: array<vec4<u32>, 4>,
    dsc: vec2<f32>,
    k: u32,  // Q6_K: the chunk's quarter of its 128-value half (which nibble, which qh bits)
}

fn sbyte(word: u32, e: u32) -> i32 {
    return (bitcast<i32>(word << (24u - 8u * e))) >> 24u;
}

// Chunk c of `row`, every word loaded as a vec4 at once.
fn load_chunk(row: u32, c: u32) -> QChunk {
    var ch: QChunk;
    if (WTYPE == 3u) {
        let d = ws[row * CPR + c];
        ch.wv[0] = w[2u * (row * CPR + c)];
        ch.wv[1] = w[2u * (row * CPR + c) + 1u];
        ch.dsc = vec2<f32>(d, d);
        return ch;
    }
    if (WTYPE == 4u) {
        let d = ws[row * CPR + c];
        ch.wv[0] = w[row * CPR + c];
        ch.dsc = vec2<f32>(d, d);
        return ch;
    }
    // Q6_K: block b = c / 8 (13 vec4: ql words 0..31, qh 32..47, int8 scales 48..51); chunk q = c % 8
    // holds values 128 half + 32 k + l, l < 32 (half = q / 4, k = q % 4): ql bytes 64 half + 32 (k & 1)
    // + l (low nibbles for k < 2), qh bytes 32 half + l (bits 2k, 2k + 1), scales 8 half + 2k + l / 16.
    let nbk  = CPR / 8u;
    let b    = c / 8u;
    let half = (c % 8u) / 4u;
    let k    = c % 4u;
    let wo   = (row * nbk + b) * 13u;
    let d    = ws[row * nbk + b];
    ch.wv[0] = w[wo + 4u * half + 2u * (k & 1u)];
    ch.wv[1] = w[wo + 4u * half + 2u * (k & 1u) + 1u];
    ch.wv[2] = w[wo + 8u + 2u * half];
    ch.wv[3] = w[wo + 8u + 2u * half + 1u];
    let scw  = w[wo + 12u][2u * half + k / 2u];
    ch.dsc   = vec2<f32>(mul_rn(d, f32(sbyte(scw, (2u * k) % 4u))), mul_rn(d, f32(sbyte(scw, (2u * k) % 4u + 1u))));
    ch.k     = k;
    return ch;
}

// The integer code of value j (0..31) of the chunk (its weight is code * dsc[j / 16]).
fn chunk_code(ch: QChunk, j: u32) -> i32 {
    if (WTYPE == 3u) { return sbyte(ch.wv[j / 16u][(j / 4u) % 4u], j % 4u); }
    if (WTYPE == 4u) {  // byte i of the 16 holds value i (low nibble) and i + 16 (high nibble)
        let byte = (ch.wv[0][(j % 16u) / 4u] >> (8u * (j % 4u))) & 0xffu;
        return i32(select(byte & 0xfu, byte >> 4u, j >= 16u)) - 8;
    }
    let lo = (ch.wv[j / 16u][(j / 4u) % 4u] >> (8u * (j % 4u))) & 0xffu;
    let hi = (ch.wv[2u + j / 16u][(j / 4u) % 4u] >> (8u * (j % 4u) + 2u * ch.k)) & 3u;
    return i32(select(lo & 0xfu, lo >> 4u, ch.k >= 2u) | (hi << 4u)) - 32;
}

// acc + the products of chunk c of `row` (its weights dequantized as dequantize_row does) with h, in
// double-float, value by value (the CPU sums in double).
fn chunk_dot(acc_in: vec2<f32>, row: u32, c: u32, t: u32) -> vec2<f32> {
    var acc  = acc_in;
    let ch   = load_chunk(row, c);
    for (var j = 0u; j < 32u; j++) {
        acc = df_fma(acc, mul_rn(ch.dsc[j / 16u], f32(chunk_code(ch, j))), h_val(t, 32u * c + j));
    }
    return acc;
}

// acc + (the chunk's products summed in f32, the sum of their magnitudes): per half of 16 values
// sum code * h, then times its scale. Each product passes through at most 17 roundings here (and
// Q6_K's exact product d * sc * code one more), within the K + 4 of lm_head_q.wgsl's bound.
fn chunk_bound(acc_in: vec2<f32>, row: u32, c: u32, t: u32) -> vec2<f32> {
    var acc = acc_in;
    let ch  = load_chunk(row, c);
    for (var half = 0u; half < 2u; half++) {
        var s = 0.0;
        var a = 0.0;
        for (var j = 16u * half; j < 16u * half + 16u; j++) {
            let q  = f32(chunk_code(ch, j));
            let hv = h_val(t, 32u * c + j);
            s = fma(q, hv, s);
            a = fma(abs(q), abs(hv), a);
        }
        acc = vec2<f32>(fma(ch.dsc[half], s, acc.x), fma(abs(ch.dsc[half]), a, acc.y));
    }
    return acc;
}
