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

// The chunk's weights as dequantize_row gives them, 4 at a time from one word: values 4 s .. 4 s +
// 3 of the chunk's first half (second = false: Q8_0 word s of a, Q4_0 the low nibbles of a's word s,
// Q6_K ql word s of a and qh word s of e with dsc.x) or of its second (Q8_0 b, Q4_0 the high nibbles
// of a, Q6_K b and f with dsc.y). Named words and constant shifts, no indexing: an earlier form
// indexed the chunk's vec4s per value, which the compiler may keep in memory when it does not unroll.
fn weights4(lo: u32, hi: u32, second: bool, k: u32, d: f32, dsc: vec2<f32>) -> vec4<f32> {
    if (WTYPE == 3u) {
        return vec4<f32>(mul_rn(f32(sbyte(lo, 0u)), d), mul_rn(f32(sbyte(lo, 1u)), d), mul_rn(f32(sbyte(lo, 2u)), d),
                         mul_rn(f32(sbyte(lo, 3u)), d));
    }
    if (WTYPE == 4u) {
        let n = select(lo & 0x0f0f0f0fu, (lo >> 4u) & 0x0f0f0f0fu, second);
        return vec4<f32>(mul_rn(f32(i32(n & 0xffu) - 8), d), mul_rn(f32(i32((n >> 8u) & 0xffu) - 8), d),
                         mul_rn(f32(i32((n >> 16u) & 0xffu) - 8), d), mul_rn(f32(i32(n >> 24u) - 8), d));
    }
    // Q6_K: q = (the nibble k selects) | (qh bits 2k, 2k + 1) << 4, per byte (no carries), minus 32.
    let q  = select(lo & 0x0f0f0f0fu, (lo >> 4u) & 0x0f0f0f0fu, k >= 2u) | (((hi >> (2u * k)) & 0x03030303u) << 4u);
    let ds = select(dsc.x, dsc.y, second);
    return vec4<f32>(mul_rn(ds, f32(i32(q & 0xffu) - 32)), mul_rn(ds, f32(i32((q >> 8u) & 0xffu) - 32)),
                     mul_rn(ds, f32(i32((q >> 16u) & 0xffu) - 32)), mul_rn(ds, f32(i32(q >> 24u) - 32)));
}

// Q6_K: the chunk's two sub-block scales d * sc (exact in f32).
fn chunk_dsc(cw: ChunkWords, c: u32) -> vec2<f32> {
    if (WTYPE != 6u) { return vec2<f32>(0.0, 0.0); }
    let k = c % 4u;
    return vec2<f32>(mul_rn(cw.d, f32(sbyte(cw.scw, (2u * k) % 4u))), mul_rn(cw.d, f32(sbyte(cw.scw, (2u * k) % 4u + 1u))));
}

// acc + w . h[hb .. hb + 3] in double-float, value by value.
fn dot4_df(acc_in: vec2<f32>, w: vec4<f32>, hb: u32, t: u32) -> vec2<f32> {
    var acc = df_fma(acc_in, w.x, h_val(t, hb));
    acc = df_fma(acc, w.y, h_val(t, hb + 1u));
    acc = df_fma(acc, w.z, h_val(t, hb + 2u));
    return df_fma(acc, w.w, h_val(t, hb + 3u));
}

// acc.x + w . h[hb ..] in f32 (fma), acc.y + |w| . |h| (the bound pass).
fn dot4_bound(acc_in: vec2<f32>, w: vec4<f32>, hb: u32, t: u32) -> vec2<f32> {
    let hv = vec4<f32>(h_val(t, hb), h_val(t, hb + 1u), h_val(t, hb + 2u), h_val(t, hb + 3u));
    var acc = acc_in;
    acc = vec2<f32>(fma(w.x, hv.x, acc.x), fma(abs(w.x), abs(hv.x), acc.y));
    acc = vec2<f32>(fma(w.y, hv.y, acc.x), fma(abs(w.y), abs(hv.y), acc.y));
    acc = vec2<f32>(fma(w.z, hv.z, acc.x), fma(abs(w.z), abs(hv.z), acc.y));
    return vec2<f32>(fma(w.w, hv.w, acc.x), fma(abs(w.w), abs(hv.w), acc.y));
}

// acc + the products of chunk c (its words cw; its 32 weights dequantized as dequantize_row does)
// with h, in double-float, value by value (values 0 .. 31 in order).
fn chunk_dot(acc_in: vec2<f32>, cw: ChunkWords, c: u32, t: u32) -> vec2<f32> {
    let k   = c % 4u;
    let dsc = chunk_dsc(cw, c);
    let b2  = select(cw.b, cw.a, WTYPE == 4u);  // the second half's words (Q4_0: a's high nibbles)
    let hb  = 32u * c;
    var acc = dot4_df(acc_in, weights4(cw.a.x, cw.e.x, false, k, cw.d, dsc), hb, t);
    acc = dot4_df(acc, weights4(cw.a.y, cw.e.y, false, k, cw.d, dsc), hb + 4u, t);
    acc = dot4_df(acc, weights4(cw.a.z, cw.e.z, false, k, cw.d, dsc), hb + 8u, t);
    acc = dot4_df(acc, weights4(cw.a.w, cw.e.w, false, k, cw.d, dsc), hb + 12u, t);
    acc = dot4_df(acc, weights4(b2.x, cw.f.x, true, k, cw.d, dsc), hb + 16u, t);
    acc = dot4_df(acc, weights4(b2.y, cw.f.y, true, k, cw.d, dsc), hb + 20u, t);
    acc = dot4_df(acc, weights4(b2.z, cw.f.z, true, k, cw.d, dsc), hb + 24u, t);
    return dot4_df(acc, weights4(b2.w, cw.f.w, true, k, cw.d, dsc), hb + 28u, t);
}

// The bound pass's form (lm_head_q.wgsl ARGMAX_ONLY): acc.x + the products in f32 (fma), acc.y +
// their magnitudes, the same weights as chunk_dot.
fn chunk_bound(acc_in: vec2<f32>, cw: ChunkWords, c: u32, t: u32) -> vec2<f32> {
    let k   = c % 4u;
    let dsc = chunk_dsc(cw, c);
    let b2  = select(cw.b, cw.a, WTYPE == 4u);
    let hb  = 32u * c;
    var acc = dot4_bound(acc_in, weights4(cw.a.x, cw.e.x, false, k, cw.d, dsc), hb, t);
    acc = dot4_bound(acc, weights4(cw.a.y, cw.e.y, false, k, cw.d, dsc), hb + 4u, t);
    acc = dot4_bound(acc, weights4(cw.a.z, cw.e.z, false, k, cw.d, dsc), hb + 8u, t);
    acc = dot4_bound(acc, weights4(cw.a.w, cw.e.w, false, k, cw.d, dsc), hb + 12u, t);
    acc = dot4_bound(acc, weights4(b2.x, cw.f.x, true, k, cw.d, dsc), hb + 16u, t);
    acc = dot4_bound(acc, weights4(b2.y, cw.f.y, true, k, cw.d, dsc), hb + 20u, t);
    acc = dot4_bound(acc, weights4(b2.z, cw.f.z, true, k, cw.d, dsc), hb + 24u, t);
    return dot4_bound(acc, weights4(b2.w, cw.f.w, true, k, cw.d, dsc), hb + 28u, t);
}
