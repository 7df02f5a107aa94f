// The LM head's input staged in workgroup memory and its exact row sums, shared by
// lm_head_f16_decode.wgsl, argmax_exact.wgsl and (head_input_words) lm_head_i8_argmax.wgsl, so the
// exact logits of the first two are the same bits. The including kernel includes lib/inv_rms.wgsl,
// lib/sum_squares.wgsl and lib/wg_reduce.wgsl and declares `override K` (at most 16 WG), `override NORM`, `override WG`,
// `override ROUND_IN: bool` (h rounded to f16: a pipeline constant, so the form not taken is compiled
// out of the exact sums' loops), the bindings `x` and `nw` (f32), and a uniform `p` with x_offset, k, eps.

var<workgroup> hs: array<vec4<f32>, K / 4u>;  // (allocated only where a kernel uses it)
var<private> head_inv: f32;  // head_input_words' norm factor

// Word i of h from word i of x and of the norm weights, once head_inv is known.
fn head_word(xv: vec4<f32>, wv: vec4<f32>) -> vec4<f32> {
    var v = xv;
    if (NORM) { v = (v * wv) * head_inv; }
    if (ROUND_IN) { v = vec4<f32>(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w)); }
    return v;
}

// Word i (elements 4i .. 4i + 3) of x and of the norm weights.
fn head_x_word(i: u32) -> vec4<f32> {
    let o = p.x_offset + 4u * i;
    return vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
}
fn head_nw_word(i: u32) -> vec4<f32> {
    return vec4<f32>(nw[4u * i], nw[4u * i + 1u], nw[4u * i + 2u], nw[4u * i + 3u]);
}

// Word i of h loaded again from x and nw (after head_input_words in this invocation): the same bits.
fn head_word_at(i: u32) -> vec4<f32> {
    var w = vec4<f32>(0.0);
    if (NORM) { w = head_nw_word(i); }
    return head_word(head_x_word(i), w);
}

// This invocation's words lid + u WG (u < 4) of x and of the norm weights (zero past K, and the
// norm weights zero without NORM): the loads the head prologues issue first.
struct HeadWords {
    xs: array<vec4<f32>, 4>,
    ws: array<vec4<f32>, 4>,
}
fn head_x_nw_words(lid: u32) -> HeadWords {
    var w: HeadWords;
    for (var u = 0u; u < 4u; u++) {
        let i = lid + u * WG;
        if (i < K / 4u) {
            w.xs[u] = head_x_word(i);
            if (NORM) { w.ws[u] = head_nw_word(i); }
        }
    }
    return w;
}

// This invocation's words lid + u WG (u < 4) of h = rms_norm(x) * nw (NORM) or x, rounded to f16
// with ROUND_IN. The loads of x and nw are issued first; the norm factor is inv_rms's bits: from
// these words in registers with SG32 (sum_squares_words_sg), else by inv_rms (which reads x again, a
// block of 32 per invocation). Every invocation calls it (barriers).
fn head_input_words(lid: u32) -> array<vec4<f32>, 4> {
    let words = head_x_nw_words(lid);
    var xs    = words.xs;
    let ws    = words.ws;
    var inv = 1.0;
    if (NORM) {
        if (WG_REDUCE_SG && SG32) {
            var sq: array<vec4<f32>, 8>;  // slots 4..7 stay zero, as do absent words
            for (var u = 0u; u < 4u; u++) { sq[u] = squares4(xs[u]); }
            inv = inv_rms_of(sum_squares_words_sg(lid, sq, (K / 4u + WG - 1u) / WG, (K + NORM_BLOCK - 1u) / NORM_BLOCK));
        } else {
            inv = inv_rms(lid, p.x_offset);  // (its block loads of x hit the cache)
        }
    }
    head_inv = inv;
    for (var u = 0u; u < 4u; u++) { xs[u] = head_word(xs[u], ws[u]); }
    return xs;
}

// hs = h (head_input_words). Every invocation calls it (barriers).
fn stage_head_input(lid: u32) {
    let h = head_input_words(lid);
    for (var u = 0u; u < 4u; u++) {
        let i = lid + u * WG;
        if (i < K / 4u) { hs[i] = h[u]; }
    }
    workgroupBarrier();
}

// acc + e.x h.x + e.y h.y in double-float (with ROUND_IN the products of two f16 values are exact in f32).
fn head_pair_exact(acc: vec2<f32>, e: vec2<f32>, h: vec2<f32>) -> vec2<f32> {
    if (ROUND_IN) {
        return df_add_f(df_add_f(acc, e.x * h.x), e.y * h.y);
    }
    return df_fma(df_fma(acc, e.x, h.x), e.y, h.y);
}
