// The softmax normalizer of `heads` query-head rows (row0 + j, j < heads) from the softmax kernel's
// block sums, in cpu::sum_positions's order: threads (j, superblock) add a superblock's block sums in
// order, then thread j the superblocks in order. For attention_split_pv; the including kernel declares `bsum` ([row][bsum_ld] f32), `override SPR`
// (WG / heads: superblock sums per pass) and `var<workgroup> sup_s: array<f32, WG>`. Every thread of
// the workgroup calls it (it has barriers); thread j < heads gets row j's total.
fn normalizer_total(lid: u32, heads: u32, row0: u32, bsum_ld: u32, nb: u32, nsb: u32) -> f32 {
    var total = 0.0;
    for (var sb0 = 0u; sb0 < nsb; sb0 += SPR) {
        let j  = lid / SPR;
        let sb = sb0 + lid % SPR;
        var s  = 0.0;
        if (j < heads && sb < nsb) {
            for (var b = 16u * sb; b < min(16u * sb + 16u, nb); b++) { s = s + bsum[(row0 + j) * bsum_ld + b]; }
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
