// The exact logit of one row of an F16 LM head: its double-float sum over h, in the order
// argmax_exact.wgsl and lm_head_i8_argmax.wgsl's EXACT_TAIL share, so both give the same bits. The
// including kernel includes lib/numerics.wgsl, lib/wg_reduce.wgsl and lib/head_input.wgsl and
// declares `override K`, `override WG`, `override TABLE_F32` and the binding `head` (the F16 table as
// array<vec4<u32>>: 8 halves per word, rows of K / 8 words; TABLE_F32: an f32 table, the f32 copy of
// a Q8_0 / Q4_0 / Q6_K head, 4 values per word, rows of K / 4 words, summed as exact_word_f32 does).

// With h staged in workgroup memory (hs). Every invocation calls it (barriers).
fn exact_row(lid: u32, row: u32) -> f32 {
    var a = vec2<f32>(0.0, 0.0);
    if (TABLE_F32) {
        for (var i = lid; i < K / 4u; i += WG) { a = exact_word_f32(a, head[row * (K / 4u) + i], hs[i]); }
        return exact_total(lid, a);
    }
    let words = K / 8u;
    for (var i = lid; i < words; i += WG) {
        a = exact_word(a, head[row * words + i], hs[2u * i], hs[2u * i + 1u]);
    }
    return exact_total(lid, a);
}

// With h's words loaded again from x and the norm weights (head_word_at, after head_input_words in
// this invocation): no workgroup memory for h (lm_head_i8_argmax.wgsl). Every invocation calls it
// (barriers).
fn exact_row_reloading_h(lid: u32, row: u32) -> f32 {
    var a = vec2<f32>(0.0, 0.0);
    if (TABLE_F32) {
        for (var i = lid; i < K / 4u; i += WG) { a = exact_word_f32(a, head[row * (K / 4u) + i], head_word_at(i)); }
        return exact_total(lid, a);
    }
    let words = K / 8u;
    for (var i = lid; i < words; i += WG) {
        a = exact_word(a, head[row * words + i], head_word_at(2u * i), head_word_at(2u * i + 1u));
    }
    return exact_total(lid, a);
}

// acc + the 8 products of table word w (8 halves) and h's two words ha, hb, in order.
fn exact_word(acc: vec2<f32>, w: vec4<u32>, ha: vec4<f32>, hb: vec4<f32>) -> vec2<f32> {
    var a = head_pair_exact(acc, unpack2x16float(w.x), ha.xy);
    a = head_pair_exact(a, unpack2x16float(w.y), ha.zw);
    a = head_pair_exact(a, unpack2x16float(w.z), hb.xy);
    return head_pair_exact(a, unpack2x16float(w.w), hb.zw);
}

// acc + the 4 products of f32 table word w and h's word hw, in order, each product exact (fma):
// an f32 weight times an f16 input is not exact in f32, so no ROUND_IN shortcut. The CPU's exact
// head sums the same f32 products in double: both round the sum to f32 once.
fn exact_word_f32(acc: vec2<f32>, w: vec4<u32>, hw: vec4<f32>) -> vec2<f32> {
    let e = bitcast<vec4<f32>>(w);
    return df_fma(df_fma(df_fma(df_fma(acc, e.x, hw.x), e.y, hw.y), e.z, hw.z), e.w, hw.w);
}

fn exact_total(lid: u32, a: vec2<f32>) -> f32 {
    let v = df_to_f32(wg_df_sum(lid, a));
    workgroupBarrier();  // (the next row's wg_df_sum writes its slots again)
    return v;
}
