// 1 / sqrt(mean(x^2) + eps) of one row, shared by rms_norm.wgsl, rms_norm_quant.wgsl and
// lib/head_input.wgsl: squares rounded to f32 (as the CPU), summed in the block-halving order
// (cpu::sum_squares, lib/sum_squares.wgsl), the mean and the root correctly rounded, so the factor
// equals the CPU's bit for bit. Called by every invocation of a workgroup (barriers). The including
// kernel includes lib/sum_squares.wgsl and declares `override WG`, the binding `x` and a uniform `p`
// with `k` (elements, at most 32 WG: the host picks WG), `eps` and `rn_zero`.

fn inv_rms(lid: u32, xo: u32) -> f32 {
    return inv_rms_of(sum_squares_x(lid, xo));
}

// The sum of the squares of x[xo .. xo + p.k): invocation i sums block i (elements 32 i .. 32 i + 31,
// zero past k, all loads issued first) in registers (block_sum_words), then the workgroup adds the
// blocks.
fn sum_squares_x(lid: u32, xo: u32) -> f32 {
    var s = 0.0;
    if (lid < (p.k + NORM_BLOCK - 1u) / NORM_BLOCK) {
        var w: array<vec4<f32>, 8>;
        for (var e = 0u; e < 32u; e++) {
            let i = NORM_BLOCK * lid + e;
            if (i < p.k) { w[e / 4u][e % 4u] = x[xo + i]; }
        }
        for (var r = 0u; r < 8u; r++) { w[r] = squares4(w[r]); }
        s = block_sum_words(w);
    }
    return blocks_total(lid, s);
}

// The factor from the sum of the p.k squares (lib/sum_squares.wgsl).
fn inv_rms_of(sum: f32) -> f32 {
    return inv_rms_from(sum, p.k, p.eps);
}
