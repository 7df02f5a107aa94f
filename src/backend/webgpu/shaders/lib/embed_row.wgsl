// The body of the embed kernels (embed.wgsl, embed_argmax.wgsl): element c of token `id`'s row of
// the table, read as u32 words (two f16 per word with TABLE_F16, exact through unpack2x16float; one
// f32 otherwise); an id outside the vocabulary gives zeros. Then, with STATS_OUT, the block sums of
// squares of x for the first layer's norm (lib/sum_squares.wgsl's norm statistics). The including
// kernel declares `override TABLE_F16`, `override STATS_OUT`, `table`, `x`, `norm_stats` and a uniform
// `p` with n_embd, n_vocab, table_offset, x_offset, x_stride and stats_out.

fn embed_value(id: i32, c: u32) -> f32 {
    if (c >= p.n_embd || id < 0 || u32(id) >= p.n_vocab) { return 0.0; }
    let e = u32(id) * p.n_embd + c;
    if (TABLE_F16) { return unpack2x16float(table[p.table_offset + e / 2u])[e & 1u]; }
    return bitcast<f32>(table[p.table_offset + e]);
}

// x[c, t] = v, and its block's sum of squares (every invocation calls it: the team sum may have
// barriers).
fn embed_store(lid: u32, c: u32, t: u32, v: f32) {
    if (c < p.n_embd) { x[p.x_offset + t * p.x_stride + c] = v; }
    if (STATS_OUT) {
        let s = team_halving_sum(lid, mul_rn(v, v), NORM_BLOCK);
        if (c < p.n_embd && c % NORM_BLOCK == 0u) { norm_stats[p.stats_out + c / NORM_BLOCK] = s; }
    }
}
