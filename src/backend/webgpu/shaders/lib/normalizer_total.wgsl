// The softmax denominators of `heads` query-head rows (row0 + j, j < heads) over their superblocks,
// as the superblock combine takes them (rows of at most 512 positions since issue 52: one superblock): M_j = the largest superblock max m_c (sml, from
// attention_split_softmax.wgsl: each superblock's e are exp(s - m_c)), l_c = superblock c's block
// sums in order from 0 (superblock_l), a_c = exp_fixed(m_c - M_j) * l_c, and L_j = the a_c in
// order from 0: threads (j, superblock) take an a_c, then thread j adds them in order. For
// attention_split_pv; the including kernel declares `bsum` ([row][bsum_ld] f32), `sml`
// ([row][sml_ld][2] f32: m_c, l_c), `override SPR` (WG / heads: superblocks per pass),
// `var<workgroup> sup_s: array<f32, WG>` and `var<workgroup> max_s: array<f32, 16>`. Every thread
// of the workgroup calls it (it has barriers); then max_s[j] = M_j and thread j < heads gets L_j.

// Superblock c's sum of e of row `row` (its block sums from 0 in order; blocks past nb are absent).
fn superblock_l(row: u32, bsum_ld: u32, nb: u32, c: u32) -> f32 {
    var s = 0.0;
    for (var b = 16u * c; b < min(16u * c + 16u, nb); b++) { s = s + bsum[row * bsum_ld + b]; }
    return s;
}

fn normalizer_total(lid: u32, heads: u32, row0: u32, bsum_ld: u32, sml_ld: u32, nb: u32, nsb: u32) -> f32 {
    if (lid < heads) {
        let at = (row0 + lid) * sml_ld;
        var m  = sml[2u * at];
        for (var c = 1u; c < nsb; c++) { m = max(m, sml[2u * (at + c)]); }
        max_s[lid] = m;
    }
    workgroupBarrier();
    var total = 0.0;
    for (var sb0 = 0u; sb0 < nsb; sb0 += SPR) {
        let j  = lid / SPR;
        let sb = sb0 + lid % SPR;
        var s  = 0.0;
        if (j < heads && sb < nsb) {
            let m = sml[2u * ((row0 + j) * sml_ld + sb)];
            s = mul_rn(exp_fixed(m - max_s[j]), superblock_l(row0 + j, bsum_ld, nb, sb));
        }
        sup_s[lid] = s;
        workgroupBarrier();
        if (lid < heads) {
            for (var k = 0u; k < min(SPR, nsb - sb0); k++) { total = total + sup_s[lid * SPR + k]; }
        }
        workgroupBarrier();
    }
    return total;
}
