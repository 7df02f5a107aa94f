// Balanced row groups for the decode matmuls (ROW_GROUPS > 0): the output rows are dealt to the
// workgroups as quarter blocks, so that every compute unit gets the same share of the dots.
//
// With whole blocks of 32 rows per workgroup (the norm statistics need them), 2B4T's gate+up ran
// 216 workgroups on 132 units, two on 84 of them, and its dots (integer-pipe bound: masks and dot4s)
// took twice as long there as on the others; the o-projection and down projection ran 80, leaving
// 52 units idle. A quarter block is the 8 rows 32 b + k + 4 j (j = 0..7) of block b, k = 0..3:
// quarter q = 4 b + k. ROW_GROUPS quarters go to the ROW_WGS workgroups (one per compute unit) in
// runs whose lengths differ by one at most; local row r of a workgroup is row j = r % 8 of its
// quarter r / 8.
//
// The norm statistics then come in quarters: the halving order of a block's 32 squares adds elements
// i and i + 16, i + 8, i + 4 first (lib/sum_squares.wgsl block_sum_words), which stay in one quarter,
// and last the quarters' sums as (s0 + s2) + (s1 + s3). So a producer writes each quarter's sum
// (an 8-lane halving sum) at 4 b + k, and the consumer (STATS_Q, lib/decode_io.wgsl) adds the four:
// the same bits as the whole block's sum.
// The including kernel declares `override WG`, `norm_stats` and a uniform p with stats_out.

override ROW_GROUPS: u32 = 0u;  // quarters in all (rows / 8); 0: workgroup w takes rows w * rows ..
override ROW_WGS: u32 = 1u;     // the dispatch's workgroups (ROW_GROUPS > 0)

// Local row r of workgroup w (r < rows per workgroup): the matrix row, or 0xffffffff where the
// workgroup's run of quarters ends before it.
fn group_row(w: u32, r: u32, rows_per_wg: u32) -> u32 {
    if (ROW_GROUPS == 0u) { return w * rows_per_wg + r; }
    let q = (w * ROW_GROUPS) / ROW_WGS + r / 8u;
    if (q >= ((w + 1u) * ROW_GROUPS) / ROW_WGS) { return 0xffffffffu; }
    return 32u * (q / 4u) + q % 4u + 4u * (r % 8u);
}

// The producers' statistics for output row `row` whose value out_v this invocation wrote (0 where
// none): whole blocks (lib/decode_io.wgsl put_block_sums), or with ROW_GROUPS the quarter's sum,
// invocations r % 8 of an aligned 8 holding its rows j. Every invocation calls it (barriers without
// SG32).
fn put_row_sums(lid: u32, row: u32, out_v: f32, wrote: bool) {
    if (ROW_GROUPS == 0u) {
        put_block_sums(lid, row, out_v, wrote);
        return;
    }
    let s = team_halving_sum(lid, mul_rn(out_v, out_v), 8u);
    if (wrote && lid % 8u == 0u) { norm_stats[p.stats_out + 4u * (row / 32u) + row % 4u] = s; }
}
