// The 32-value chunks of an LM head kept in its file's blocks (Q8_0, Q4_0, Q6_K in GpuMatrix's
// layout), shared by lm_head_q.wgsl and head_q_exact.wgsl so that both compute a row's exact logit
// with the same bits. The including kernel declares `override CPR` (chunks per row, K / 32),
// `override WTYPE` (3 q8_0, 4 q4_0, 6 q6_k), the bindings `w` (array<vec4<u32>>) and `ws`
// (array<f32>), `fn h_val(t: u32, i: u32) -> f32` (element i of token t's input), and includes
// lib/numerics.wgsl.

fn sbyte(word: u32, e: u32) -> i32 {
    return (bitcast<i32>(word << (24u - 8u * e))) >> 24u;
}

// A chunk's words, loaded together (named vec4s, no arrays): Q8_0 a, b (the 32 codes); Q4_0 a (the
// 32 nibbles); Q6_K a, b (its ql bytes), e, f (its qh bytes) and scw (the word of its int8 scales);
// d the block's scale.
struct ChunkWords {
    a: vec4<u32>,
    b: vec4<u32>,
    e: vec4<u32>,
    f: vec4<u32>,
    scw: u32,
    d: f32,
}

// Chunk c of `row`. Q6_K: block b = c / 8 (13 vec4: ql words 0..31, qh 32..47, int8 scales 48..51);
// chunk q = c % 8 holds values 128 half + 32 k + l, l < 32 (half = q / 4, k = q % 4): ql bytes 64 half
// + 32 (k & 1) + l (low nibbles for k < 2), qh bytes 32 half + l (bits 2k, 2k + 1), scales 8 half + 2k
// + l / 16.
fn chunk_words(row: u32, c: u32) -> ChunkWords {
    var cw: ChunkWords;
    if (WTYPE == 3u) {
        cw.a = w[2u * (row * CPR + c)];
        cw.b = w[2u * (row * CPR + c) + 1u];
        cw.d = ws[row * CPR + c];
    } else if (WTYPE == 4u) {
        cw.a = w[row * CPR + c];
        cw.d = ws[row * CPR + c];
    } else {
        let nbk  = CPR / 8u;
        let b    = c / 8u;
        let half = (c % 8u) / 4u;
        let k    = c % 4u;
        let wo   = (row * nbk + b) * 13u;
        cw.a   = w[wo + 4u * half + 2u * (k & 1u)];
        cw.b   = w[wo + 4u * half + 2u * (k & 1u) + 1u];
        cw.e   = w[wo + 8u + 2u * half];
        cw.f   = w[wo + 8u + 2u * half + 1u];
        cw.scw = w[wo + 12u][2u * half + k / 2u];
        cw.d   = ws[row * nbk + b];
    }
    return cw;
}

// acc + the products of chunk c (its words cw; its 32 weights dequantized as dequantize_row does)
// with h, in double-float, value by value.
fn chunk_dot(acc_in: vec2<f32>, cw: ChunkWords, c: u32, t: u32) -> vec2<f32> {
    var acc = acc_in;
    if (WTYPE == 3u) {
        for (var j = 0u; j < 32u; j++) {
            let word = select(cw.a, cw.b, j >= 16u)[(j / 4u) % 4u];
            acc = df_fma(acc, mul_rn(f32(sbyte(word, j % 4u)), cw.d), h_val(t, 32u * c + j));
        }
        return acc;
    }
    if (WTYPE == 4u) {
        for (var j = 0u; j < 16u; j++) {
            let byte = (cw.a[j / 4u] >> (8u * (j % 4u))) & 0xffu;
            acc = df_fma(acc, mul_rn(f32(i32(byte & 0xfu) - 8), cw.d), h_val(t, 32u * c + j));
        }
        for (var j = 0u; j < 16u; j++) {
            let byte = (cw.a[j / 4u] >> (8u * (j % 4u))) & 0xffu;
            acc = df_fma(acc, mul_rn(f32(i32(byte >> 4u) - 8), cw.d), h_val(t, 32u * c + 16u + j));
        }
        return acc;
    }
    let k   = c % 4u;
    let dsc = vec2<f32>(mul_rn(cw.d, f32(sbyte(cw.scw, (2u * k) % 4u))), mul_rn(cw.d, f32(sbyte(cw.scw, (2u * k) % 4u + 1u))));
    for (var l = 0u; l < 32u; l++) {
        let lo = (select(cw.a, cw.b, l >= 16u)[(l / 4u) % 4u] >> (8u * (l % 4u))) & 0xffu;
        let hi = (select(cw.e, cw.f, l >= 16u)[(l / 4u) % 4u] >> (8u * (l % 4u) + 2u * k)) & 3u;
        let q  = i32(select(lo & 0xfu, lo >> 4u, k >= 2u) | (hi << 4u)) - 32;
        acc = df_fma(acc, mul_rn(dsc[l / 16u], f32(q)), h_val(t, 32u * c + l));
    }
    return acc;
}

// The bound pass's form (lm_head_q.wgsl ARGMAX_ONLY): acc.x + the products in f32 (fma), acc.y +
// their magnitudes, the same weights as chunk_dot.
fn chunk_bound(acc_in: vec2<f32>, cw: ChunkWords, c: u32, t: u32) -> vec2<f32> {
    var acc = acc_in;
    if (WTYPE == 3u) {
        for (var j = 0u; j < 32u; j++) {
            let word = select(cw.a, cw.b, j >= 16u)[(j / 4u) % 4u];
            let wv   = f32(sbyte(word, j % 4u)) * cw.d;
            let hv   = h_val(t, 32u * c + j);
            acc = vec2<f32>(fma(wv, hv, acc.x), fma(abs(wv), abs(hv), acc.y));
        }
        return acc;
    }
    if (WTYPE == 4u) {
        for (var j = 0u; j < 32u; j++) {
            let byte = (cw.a[(j % 16u) / 4u] >> (8u * (j % 4u))) & 0xffu;
            let wv   = f32(i32(select(byte & 0xfu, byte >> 4u, j >= 16u)) - 8) * cw.d;
            let hv   = h_val(t, 32u * c + j);
            acc = vec2<f32>(fma(wv, hv, acc.x), fma(abs(wv), abs(hv), acc.y));
        }
        return acc;
    }
    let k   = c % 4u;
    let dsc = vec2<f32>(cw.d * f32(sbyte(cw.scw, (2u * k) % 4u)), cw.d * f32(sbyte(cw.scw, (2u * k) % 4u + 1u)));
    for (var l = 0u; l < 32u; l++) {
        let lo = (select(cw.a, cw.b, l >= 16u)[(l / 4u) % 4u] >> (8u * (l % 4u))) & 0xffu;
        let hi = (select(cw.e, cw.f, l >= 16u)[(l / 4u) % 4u] >> (8u * (l % 4u) + 2u * k)) & 3u;
        let q  = i32(select(lo & 0xfu, lo >> 4u, k >= 2u) | (hi << 4u)) - 32;
        let wv = dsc[l / 16u] * f32(q);
        let hv = h_val(t, 32u * c + l);
        acc = vec2<f32>(fma(wv, hv, acc.x), fma(abs(wv), abs(hv), acc.y));
    }
    return acc;
}
