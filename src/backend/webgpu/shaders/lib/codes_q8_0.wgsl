// GpuLinear's 2-bit codes (value + 1) against one token's Q8_0 blocks staged in workgroup memory,
// shared by matvec_q8.wgsl (WTYPE 7) and matvec_q1_qkv.wgsl, so both compute cpu::dot_lowbit_q8_0's
// sumi the same way: sum (code - 1) a = sum code a - sum a, the block's code sum `asum[b]` taken once.
// The including kernel declares `override WG`, `override NB`, `override QPT`, the workgroup arrays
// `acodes: array<vec4<u32>, 2 NB>` (block b's 32 int8 codes in acodes[2b], acodes[2b + 1]) and
// `asum: array<i32, NB>`, and includes lib/quarters_q8_0.wgsl (QuarterQ8) and lib/wg_reduce.wgsl.

// With Q8_TOTAL_SG (SG32: 32-wide subgroups): each block's code sum into asum by two shuffles among
// its four quarters' invocations (consecutive, in one subgroup; integer sums, any order), no barrier
// or part_sum pass. Every invocation calls it.
@diagnostic(off, subgroup_uniformity)
fn block_csums(lid: u32, qs: array<QuarterQ8, Q8_MAX_QPT>) {
    for (var u = 0u; u < QPT; u++) {
        let g = lid + u * WG;
        var c = vec2<i32>(qs[u].csum, 0);
        c = c + sg_shuffle_xor_i(c, 1u);
        c = c + sg_shuffle_xor_i(c, 2u);
        if (g < 4u * NB && g % 4u == 0u) { asum[g / 4u] = c.x; }
    }
}

// sum over block b of (code - 1) * a for two code words (elements 32 b .. 32 b + 31).
fn codes_sumi(c0: u32, c1: u32, b: u32) -> i32 {
    let a0 = acodes[2u * b];
    let a1 = acodes[2u * b + 1u];
    var sumi = -asum[b];
    for (var s = 0u; s < 4u; s++) {
        sumi += dot4_i8((c0 >> (2u * s)) & 0x03030303u, a0[s]) + dot4_i8((c1 >> (2u * s)) & 0x03030303u, a1[s]);
    }
    return sumi;
}
