// One 32-value chunk of an LM head kept in its file's blocks (Q8_0, Q4_0, Q6_K in GpuMatrix's
// layout), shared by lm_head_q.wgsl and head_q_exact.wgsl so that both compute a row's exact logit
// with the same bits. The including kernel declares `override CPR` (chunks per row, K / 32),
// `override WTYPE` (3 q8_0, 4 q4_0, 6 q6_k), the bindings `w` (array<vec4<u32>>) and `ws`
// (array<f32>), `fn h_val(t: u32, i: u32) -> f32` (element i of token t's input), and includes
// lib/numerics.wgsl.

fn sbyte(word: u32, e: u32) -> i32 {
    return (bitcast<i32>(word << (24u - 8u * e))) >> 24u;
}

// acc + the products of chunk c of `row` (its 32 weights dequantized as dequantize_row does) with h,
// in double-float. The chunk's words are loaded as vec4s first.
fn chunk_dot(acc_in: vec2<f32>, row: u32, c: u32, t: u32) -> vec2<f32> {
    var acc = acc_in;
    if (WTYPE == 3u) {
        let d  = ws[row * CPR + c];
        let wv = array<vec4<u32>, 2>(w[2u * (row * CPR + c)], w[2u * (row * CPR + c) + 1u]);
        for (var j = 0u; j < 32u; j++) {
            acc = df_fma(acc, mul_rn(f32(sbyte(wv[j / 16u][(j / 4u) % 4u], j % 4u)), d), h_val(t, 32u * c + j));
        }
        return acc;
    }
    if (WTYPE == 4u) {
        let d  = ws[row * CPR + c];
        let wv = w[row * CPR + c];
        for (var j = 0u; j < 16u; j++) {
            let byte = (wv[j / 4u] >> (8u * (j % 4u))) & 0xffu;
            acc = df_fma(acc, mul_rn(f32(i32(byte & 0xfu) - 8), d), h_val(t, 32u * c + j));
        }
        for (var j = 0u; j < 16u; j++) {
            let byte = (wv[j / 4u] >> (8u * (j % 4u))) & 0xffu;
            acc = df_fma(acc, mul_rn(f32(i32(byte >> 4u) - 8), d), h_val(t, 32u * c + 16u + j));
        }
        return acc;
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
    let ql   = array<vec4<u32>, 2>(w[wo + 4u * half + 2u * (k & 1u)], w[wo + 4u * half + 2u * (k & 1u) + 1u]);
    let qh   = array<vec4<u32>, 2>(w[wo + 8u + 2u * half], w[wo + 8u + 2u * half + 1u]);
    let scw  = w[wo + 12u][2u * half + k / 2u];
    let dsc  = vec2<f32>(mul_rn(d, f32(sbyte(scw, (2u * k) % 4u))), mul_rn(d, f32(sbyte(scw, (2u * k) % 4u + 1u))));
    for (var l = 0u; l < 32u; l++) {
        let lo = (ql[l / 16u][(l / 4u) % 4u] >> (8u * (l % 4u))) & 0xffu;
        let hi = (qh[l / 16u][(l / 4u) % 4u] >> (8u * (l % 4u) + 2u * k)) & 3u;
        let q  = i32(select(lo & 0xfu, lo >> 4u, k >= 2u) | (hi << 4u)) - 32;
        acc = df_fma(acc, mul_rn(dsc[l / 16u], f32(q)), h_val(t, 32u * c + l));
    }
    return acc;
}

// The ARGMAX_ONLY pass's sums, four values at a time: h's values i .. i + 3.
fn h4(t: u32, i: u32) -> vec4<f32> {
    return vec4<f32>(h_val(t, i), h_val(t, i + 1u), h_val(t, i + 2u), h_val(t, i + 3u));
}

// The 4 signed bytes of a word, as f32.
fn i8x4(word: u32) -> vec4<f32> {
    let v = bitcast<i32>(word);
    return vec4<f32>(f32(extractBits(v, 0u, 8u)), f32(extractBits(v, 8u, 8u)), f32(extractBits(v, 16u, 8u)),
                     f32(extractBits(v, 24u, 8u)));
}

// The 4 unsigned bytes of a word, as f32.
fn u8x4(word: u32) -> vec4<f32> {
    return vec4<f32>(f32(word & 0xffu), f32((word >> 8u) & 0xffu), f32((word >> 16u) & 0xffu), f32(word >> 24u));
}

// acc + (code . h, |code| . |h|) for four codes q at h's values i .. i + 3.
fn sum4(acc: vec2<f32>, q: vec4<f32>, hv: vec4<f32>) -> vec2<f32> {
    return vec2<f32>(acc.x + dot(q, hv), acc.y + dot(abs(q), abs(hv)));
}

// acc + (the chunk's products summed in f32, the sum of their magnitudes): per half of 16 values
// the codes times h (dot products of four), then times the half's scale. Each product passes through
// at most 17 roundings here (and Q6_K's exact product d * sc * code one more), within the K + 4 of
// lm_head_q.wgsl's bound.
fn chunk_bound(acc: vec2<f32>, row: u32, c: u32, t: u32) -> vec2<f32> {
    let i0 = 32u * c;
    var s0 = vec2<f32>(0.0);  // values 0..15
    var s1 = vec2<f32>(0.0);  // values 16..31
    var d0 = 0.0;
    var d1 = 0.0;
    if (WTYPE == 3u) {
        d0 = ws[row * CPR + c];
        d1 = d0;
        let w0 = w[2u * (row * CPR + c)];
        let w1 = w[2u * (row * CPR + c) + 1u];
        s0 = sum4(s0, i8x4(w0.x), h4(t, i0));
        s0 = sum4(s0, i8x4(w0.y), h4(t, i0 + 4u));
        s0 = sum4(s0, i8x4(w0.z), h4(t, i0 + 8u));
        s0 = sum4(s0, i8x4(w0.w), h4(t, i0 + 12u));
        s1 = sum4(s1, i8x4(w1.x), h4(t, i0 + 16u));
        s1 = sum4(s1, i8x4(w1.y), h4(t, i0 + 20u));
        s1 = sum4(s1, i8x4(w1.z), h4(t, i0 + 24u));
        s1 = sum4(s1, i8x4(w1.w), h4(t, i0 + 28u));
    } else if (WTYPE == 4u) {
        // byte j of the 16 holds value j (low nibble) and j + 16 (high nibble)
        d0 = ws[row * CPR + c];
        d1 = d0;
        let wv = w[row * CPR + c];
        let m8 = vec4<f32>(8.0);
        s0 = sum4(s0, u8x4(wv.x & 0x0f0f0f0fu) - m8, h4(t, i0));
        s0 = sum4(s0, u8x4(wv.y & 0x0f0f0f0fu) - m8, h4(t, i0 + 4u));
        s0 = sum4(s0, u8x4(wv.z & 0x0f0f0f0fu) - m8, h4(t, i0 + 8u));
        s0 = sum4(s0, u8x4(wv.w & 0x0f0f0f0fu) - m8, h4(t, i0 + 12u));
        s1 = sum4(s1, u8x4((wv.x >> 4u) & 0x0f0f0f0fu) - m8, h4(t, i0 + 16u));
        s1 = sum4(s1, u8x4((wv.y >> 4u) & 0x0f0f0f0fu) - m8, h4(t, i0 + 20u));
        s1 = sum4(s1, u8x4((wv.z >> 4u) & 0x0f0f0f0fu) - m8, h4(t, i0 + 24u));
        s1 = sum4(s1, u8x4((wv.w >> 4u) & 0x0f0f0f0fu) - m8, h4(t, i0 + 28u));
    } else {
        // Q6_K, as chunk_dot: code l = (the ql nibble | the qh bits << 4) - 32, four per word.
        let nbk   = CPR / 8u;
        let b     = c / 8u;
        let half  = (c % 8u) / 4u;
        let k     = c % 4u;
        let wo    = (row * nbk + b) * 13u;
        let d     = ws[row * nbk + b];
        let ql0   = w[wo + 4u * half + 2u * (k & 1u)];
        let ql1   = w[wo + 4u * half + 2u * (k & 1u) + 1u];
        let qh0   = w[wo + 8u + 2u * half];
        let qh1   = w[wo + 8u + 2u * half + 1u];
        let scw   = w[wo + 12u][2u * half + k / 2u];
        d0 = mul_rn(d, f32(sbyte(scw, (2u * k) % 4u)));
        d1 = mul_rn(d, f32(sbyte(scw, (2u * k) % 4u + 1u)));
        let nsh   = select(0u, 4u, k >= 2u);
        let hsh   = 2u * k;
        let m32   = vec4<f32>(32.0);
        s0 = sum4(s0, u8x4(((ql0.x >> nsh) & 0x0f0f0f0fu) | (((qh0.x >> hsh) & 0x03030303u) << 4u)) - m32, h4(t, i0));
        s0 = sum4(s0, u8x4(((ql0.y >> nsh) & 0x0f0f0f0fu) | (((qh0.y >> hsh) & 0x03030303u) << 4u)) - m32, h4(t, i0 + 4u));
        s0 = sum4(s0, u8x4(((ql0.z >> nsh) & 0x0f0f0f0fu) | (((qh0.z >> hsh) & 0x03030303u) << 4u)) - m32, h4(t, i0 + 8u));
        s0 = sum4(s0, u8x4(((ql0.w >> nsh) & 0x0f0f0f0fu) | (((qh0.w >> hsh) & 0x03030303u) << 4u)) - m32, h4(t, i0 + 12u));
        s1 = sum4(s1, u8x4(((ql1.x >> nsh) & 0x0f0f0f0fu) | (((qh1.x >> hsh) & 0x03030303u) << 4u)) - m32, h4(t, i0 + 16u));
        s1 = sum4(s1, u8x4(((ql1.y >> nsh) & 0x0f0f0f0fu) | (((qh1.y >> hsh) & 0x03030303u) << 4u)) - m32, h4(t, i0 + 20u));
        s1 = sum4(s1, u8x4(((ql1.z >> nsh) & 0x0f0f0f0fu) | (((qh1.z >> hsh) & 0x03030303u) << 4u)) - m32, h4(t, i0 + 24u));
        s1 = sum4(s1, u8x4(((ql1.w >> nsh) & 0x0f0f0f0fu) | (((qh1.w >> hsh) & 0x03030303u) << 4u)) - m32, h4(t, i0 + 28u));
    }
    return vec2<f32>(acc.x + d0 * s0.x + d1 * s1.x, acc.y + abs(d0) * s0.y + abs(d1) * s1.y);
}
