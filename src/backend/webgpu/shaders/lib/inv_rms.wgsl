// 1 / sqrt(mean(x^2) + eps) of one row, shared by rms_norm.wgsl, rms_norm_quant.wgsl and
// lib/head_input.wgsl: squares rounded to f32 (as the CPU), summed in the halving order
// (cpu::sum_squares), the mean and the root correctly rounded, so the factor equals the CPU's bit for
// bit. Called by every invocation of a workgroup (wg_halving_sum4 has barriers). The including kernel
// includes lib/sum_squares.wgsl and declares `override WG`, the binding `x` and a uniform `p` with `k`
// (elements, at most 32 WG: the host picks WG), `eps` and `rn_zero`.

fn inv_rms(lid: u32, xo: u32) -> f32 {
    // This invocation's elements lid + u WG, u < 32 (zero past k), all loads issued before any sum,
    // then reduced as a halving tree over u (element distances 16 WG .. WG), then across invocations.
    var sq: array<f32, 32>;
    for (var u = 0u; u < 32u; u++) {
        let i = lid + u * WG;
        if (i < p.k) { sq[u] = x[xo + i]; }
    }
    for (var u = 0u; u < 32u; u++) { sq[u] = mul_rn(sq[u], sq[u]); }  // squares rounded, as the CPU
    for (var h = 16u; h > 0u; h >>= 1u) {
        for (var u = 0u; u < h; u++) { sq[u] = sq[u] + sq[u + h]; }
    }
    return inv_rms_of(wg_halving_sum4(lid, vec4<f32>(sq[0], 0.0, 0.0, 0.0)).x);
}

// The factor from the sum of the p.k squares (lib/sum_squares.wgsl).
fn inv_rms_of(sum: f32) -> f32 {
    return inv_rms_from(sum, p.k);
}
