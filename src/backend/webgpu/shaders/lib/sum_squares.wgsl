// The norms' sum of squares in the block-halving order (cpu::sum_squares): the squares of each
// block of 32 consecutive elements in the halving order, then the block sums in the halving order.
// For the kernels that reduce a whole vector (lib/inv_rms.wgsl, lib/act_stage.wgsl), and for the
// decode kernels that leave the next kernel their outputs' block sums (the norm statistics:
// team_halving_sum) or read them (lib/act_stage.wgsl). The including kernel includes
// lib/numerics.wgsl and lib/wg_reduce.wgsl and declares `override WG` (a power of two, >= 32).

const NORM_BLOCK: u32 = 32u;  // cpu::k_norm_block

var<workgroup> wg_red_h: array<f32, WG>;

// The total of nb <= WG block sums, invocation i holding block i (zero past nb), in the halving
// order across the workgroup (zero padding to WG blocks gives the same bits: the sums are not
// negative): at distances WG/2, WG/4, ..., 1, invocation i < d adds invocation i + d's value onto its
// own, level by level in workgroup memory. Every invocation must call it (barriers); all get it.
fn blocks_total(lid: u32, v: f32) -> f32 {
    workgroupBarrier();  // a previous use of wg_red_h is over
    if (lid >= WG / 2u) { wg_red_h[lid - WG / 2u] = v; }
    workgroupBarrier();
    if (lid < WG / 2u) { wg_red_h[lid] = v + wg_red_h[lid]; }
    workgroupBarrier();
    for (var s = WG / 4u; s > 0u; s >>= 1u) {
        if (lid < s) { wg_red_h[lid] = wg_red_h[lid] + wg_red_h[lid + s]; }
        workgroupBarrier();
    }
    return wg_red_h[0];
}

// The halving sum over aligned teams of `width` invocations (a power of two, at most 32): at
// distances width/2 .. 1 within the team. Every invocation must call it, with the same width (it
// may have barriers), and every member of a team gets the team's sum. With SG32 a butterfly of
// shuffles (SG32, lib/wg_reduce.wgsl): the lane with the bit set adds its partner's value to its
// own, b + a where the halving order has a + b, the same bits.
@diagnostic(off, subgroup_uniformity)
fn team_halving_sum(lid: u32, v: f32, width: u32) -> f32 {
    if (WG_REDUCE_SG && SG32) {
        var a = v;
        for (var d = width / 2u; d > 0u; d >>= 1u) { a = a + sg_shuffle_xor(a, d); }
        return a;
    }
    workgroupBarrier();
    wg_red_h[lid] = v;
    workgroupBarrier();
    for (var d = width / 2u; d > 0u; d >>= 1u) {
        if (lid % width < d) { wg_red_h[lid] = wg_red_h[lid] + wg_red_h[lid + d]; }
        workgroupBarrier();
    }
    return wg_red_h[lid - lid % width];
}

// The halving sum of one block's 32 squares held as 8 vec4 words (elements 4r .. 4r + 3 in word r):
// words r and r + 4, then r and r + 2, then 0 and 1, then the components (x + z) + (y + w).
fn block_sum_words(w: array<vec4<f32>, 8>) -> f32 {
    let t = ((w[0] + w[4]) + (w[2] + w[6])) + ((w[1] + w[5]) + (w[3] + w[7]));
    return (t.x + t.z) + (t.y + t.w);
}

// The total of nb <= 256 block sums held by each 32-invocation team as lane l: blocks l, l + 32, ...
// (t[i] = block l + 32 i, zero past nb): the halving levels at distances of 32 blocks and more in
// registers, then across the team. Every invocation must call it; all get the total.
fn blocks_total_team(lid: u32, t_in: array<f32, 8>) -> f32 {
    var t = t_in;
    for (var h = 4u; h > 0u; h >>= 1u) {
        for (var i = 0u; i < h; i++) { t[i] = t[i] + t[i + h]; }
    }
    return team_halving_sum(lid, t[0], 32u);
}

// With SG32: the total of the squares sq[u] of this invocation's vec4 words lid + u WG (u < n_u,
// zero where absent) of a vector of nb blocks (nb <= WG). Block b is words 8b .. 8b + 7, held by
// invocations 8c .. 8c + 7 at one u: three butterfly levels of shuffles (words r and r ^ 4, ^ 2,
// ^ 1: block_sum_words' tree), then one barrier and blocks_total_team. Every invocation calls it.
fn sum_squares_words_sg(lid: u32, sq: array<vec4<f32>, 8>, n_u: u32, nb: u32) -> f32 {
    workgroupBarrier();  // a previous use of wg_red_h is over
    publish_block_sums_sg(lid, sq, n_u);
    workgroupBarrier();
    return block_sums_total_sg(lid, nb);
}

// sum_squares_words_sg's halves, for a kernel that shares the barrier between them with other work
// (lm_head_i8_argmax.wgsl): the block sums into wg_red_h (its previous use must be over), and,
// after a barrier, their total.
fn publish_block_sums_sg(lid: u32, sq: array<vec4<f32>, 8>, n_u: u32) {
    for (var u = 0u; u < 8u; u++) {
        if (u < n_u) {
            var v = sq[u];
            for (var d = 4u; d > 0u; d >>= 1u) {
                v = v + vec4<f32>(sg_shuffle_xor(v.x, d), sg_shuffle_xor(v.y, d), sg_shuffle_xor(v.z, d),
                                  sg_shuffle_xor(v.w, d));
            }
            if (lid % 8u == 0u) { wg_red_h[lid / 8u + u * (WG / 8u)] = (v.x + v.z) + (v.y + v.w); }
        }
    }
}

fn block_sums_total_sg(lid: u32, nb: u32) -> f32 {
    var t: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        let b = lid % 32u + 32u * i;
        if (b < nb) { t[i] = wg_red_h[b]; }
    }
    return blocks_total_team(lid, t);
}

// The norm factor 1 / sqrt(sum / k + eps) from the sum of k squares, each step rounded once (the
// CPU's rms_norm_row).
fn inv_rms_from(sum: f32, k: u32, eps: f32) -> f32 {
    return inv_root_rn(div_rn(sum, f32(k)) + eps);
}

// A vec4 of x's squares, each rounded on its own (never fused into the sums that follow).
fn squares4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(mul_rn(v.x, v.x), mul_rn(v.y, v.y), mul_rn(v.z, v.z), mul_rn(v.w, v.w));
}
