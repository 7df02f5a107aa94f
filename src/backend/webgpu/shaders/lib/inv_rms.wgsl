// 1 / sqrt(mean(x^2) + eps) of one row, shared by rms_norm.wgsl and rms_norm_quant.wgsl: squares
// rounded to f32 (as the CPU), summed in double-float, the mean and the root correctly rounded, so
// the factor equals the CPU's bit for bit. Called by every invocation of a workgroup (it has
// barriers). The including kernel declares `override WG`, the binding `x` and a uniform `p` with
// `k` (elements), `eps` and `rn_zero`.

var<workgroup> red_sum: array<vec2<f32>, WG>;

fn inv_rms(lid: u32, xo: u32) -> f32 {
    var acc = vec2<f32>(0.0, 0.0);
    for (var i = lid; i < p.k; i += WG) {
        let v = x[xo + i];
        acc = df_add_f(acc, mul_rn(v, v));  // the square rounded, as the CPU
    }
    red_sum[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { red_sum[lid] = df_add(red_sum[lid], red_sum[lid + s]); }
        workgroupBarrier();
    }
    let mean = df_div_f(red_sum[0], f32(p.k));
    return div_rn(1.0, sqrt_rn(mean + p.eps));
}
