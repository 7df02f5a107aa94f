// The LM head's input staged in workgroup memory and its exact row sums, shared by
// lm_head_f16_decode.wgsl and argmax_exact.wgsl (so the exact logits of both are the same bits).
// The including kernel declares `override K`, `override NORM`, `override WG`, the bindings `x` and
// `nw` (f32), and a uniform `p` with x_offset, round_input, k, eps (lib/inv_rms.wgsl).

var<workgroup> hs: array<vec4<f32>, K / 4u>;

// hs = h = rms_norm(x) * nw (NORM) or x, rounded to f16 with p.round_input. Every invocation calls
// it (barriers).
fn stage_head_input(lid: u32) {
    var inv = 1.0;
    if (NORM) { inv = inv_rms(lid, p.x_offset); }  // as the CPU, bit for bit
    for (var i = lid; i < K / 4u; i += WG) {
        let o = p.x_offset + 4u * i;
        var v = vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
        if (NORM) { v = (v * inv) * vec4<f32>(nw[4u * i], nw[4u * i + 1u], nw[4u * i + 2u], nw[4u * i + 3u]); }
        if (p.round_input != 0u) { v = vec4<f32>(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w)); }
        hs[i] = v;
    }
    workgroupBarrier();
}

// acc + e.x h.x + e.y h.y in double-float (the products of two f16 values are exact in f32).
fn head_pair_exact(acc: vec2<f32>, e: vec2<f32>, h: vec2<f32>, round_in: bool) -> vec2<f32> {
    if (round_in) {
        return df_add_f(df_add_f(acc, e.x * h.x), e.y * h.y);
    }
    return df_fma(df_fma(acc, e.x, h.x), e.y, h.y);
}
