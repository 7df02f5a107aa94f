// 1 / sqrt(mean(x^2) + eps) of one row, shared by rms_norm.wgsl, rms_norm_quant.wgsl and
// lib/head_input.wgsl: squares rounded to f32 (as the CPU), summed in double-float (the order does
// not matter at that precision), the mean and the root correctly rounded, so the factor equals the
// CPU's bit for bit. Called by every invocation of a workgroup (wg_df_sum has barriers). The
// including kernel includes lib/wg_reduce.wgsl and declares `override WG`, the binding `x` and a
// uniform `p` with `k` (elements), `eps` and `rn_zero`.

fn inv_rms(lid: u32, xo: u32) -> f32 {
    // This invocation's first 16 elements are loaded before any is summed (one round trip, not
    // one per element: the loop bound is a uniform, so the loop is not unrolled).
    var xs: array<f32, 16>;
    for (var u = 0u; u < 16u; u++) {
        let i = lid + u * WG;
        if (i < p.k) { xs[u] = x[xo + i]; }
    }
    var acc = vec2<f32>(0.0, 0.0);
    for (var u = 0u; u < 16u; u++) {
        if (lid + u * WG < p.k) { acc = df_add_f(acc, mul_rn(xs[u], xs[u])); }  // squares rounded, as the CPU
    }
    for (var i = lid + 16u * WG; i < p.k; i += WG) {
        let v = x[xo + i];
        acc = df_add_f(acc, mul_rn(v, v));
    }
    return inv_rms_of(wg_df_sum(lid, acc));
}

// The factor from the double-float sum of the p.k squares.
fn inv_rms_of(sum: vec2<f32>) -> f32 {
    return div_rn(1.0, sqrt_rn(df_div_f(sum, f32(p.k)) + p.eps));
}
