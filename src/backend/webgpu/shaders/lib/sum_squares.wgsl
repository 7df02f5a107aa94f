// The halving order (cpu::halving_sum) across a workgroup, and sums of squares of x held as vec4
// words in it (cpu::sum_squares), for the norm prologues (lib/act_stage.wgsl, lib/head_input.wgsl)
// and lib/inv_rms.wgsl. The including kernel includes lib/numerics.wgsl and declares `override WG`
// (a power of two, >= 2) and a uniform `p` with `eps`.

var<workgroup> wg_red_h4: array<vec4<f32>, WG / 2u>;

// The halving sum across the workgroup, per component: at distances WG/2, WG/4, ..., 1,
// invocation i < d adds invocation i + d's value onto its own, level by level in workgroup memory
// (the upper half stores and the lower half adds its own value, so WG / 2 slots do). Every
// invocation must call it, and all get the result. A subgroup form (the distances of a subgroup's
// width and more in registers after two barriers, then a butterfly of vec4 shuffles, high distance
// first) gave the same bits and was slower: H200 tg128 567.3-567.9 tokens/s against 585.1-585.4
// (alternating runs), so both shader variants use this one.
fn wg_halving_sum4(lid: u32, v: vec4<f32>) -> vec4<f32> {
    if (lid >= WG / 2u) { wg_red_h4[lid - WG / 2u] = v; }
    workgroupBarrier();
    if (lid < WG / 2u) { wg_red_h4[lid] = v + wg_red_h4[lid]; }
    workgroupBarrier();
    for (var s = WG / 4u; s > 0u; s >>= 1u) {
        if (lid < s) { wg_red_h4[lid] = wg_red_h4[lid] + wg_red_h4[lid + s]; }
        workgroupBarrier();
    }
    return wg_red_h4[0];
}

// The halving sum, across the workgroup, of the squares sq[u] of this invocation's vec4 words
// lid + u WG (zero where absent; a kernel with fewer than 8 slots passes zeros for the rest): per
// lane a tree over u (element distances 16 WG, 8 WG, 4 WG), the tree across invocations (2 WG .. 4),
// then the lanes (0 + 2) + (1 + 3): cpu::sum_squares's order over the elements zero-padded to 32 WG.
fn sum_squares_words(lid: u32, sq: array<vec4<f32>, 8>) -> f32 {
    let t = ((sq[0] + sq[4]) + (sq[2] + sq[6])) + ((sq[1] + sq[5]) + (sq[3] + sq[7]));
    let s = wg_halving_sum4(lid, t);
    return (s.x + s.z) + (s.y + s.w);
}

// The norm factor 1 / sqrt(sum / k + eps) from the sum of k squares, each step rounded once (the
// CPU's rms_norm_row).
fn inv_rms_from(sum: f32, k: u32) -> f32 {
    return div_rn(1.0, sqrt_rn(div_rn(sum, f32(k)) + p.eps));
}

// A vec4 of x's squares, each rounded on its own (never fused into the sums that follow).
fn squares4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(mul_rn(v.x, v.x), mul_rn(v.y, v.y), mul_rn(v.z, v.z), mul_rn(v.w, v.w));
}
