// The body of the embed kernels (embed.wgsl, embed_argmax.wgsl): element c of token `id`'s row of
// the table, read as u32 words (two f16 per word with TABLE_F16, exact through unpack2x16float; one
// f32 otherwise); an id outside the vocabulary gives zeros. Then, with STATS_OUT, the block sums of
// squares of x for the first layer's norm (lib/sum_squares.wgsl's norm statistics). The including
// kernel declares the bindings `table`, `x`, `norm_stats` and the uniform `p` (Params, below).

override WG: u32 = 256u;  // a power of two, >= 32
override TABLE_F16: bool = true;
override STATS_OUT: bool = false;

// The uniform of both kernels: embed.wgsl's host struct stops after stats_out (the rest of the slot
// is zeros).
struct Params {
    n_embd: u32,
    n_vocab: u32,
    table_offset: u32,   // u32 index of row 0
    ids_offset: u32,     // i32 index of ids[0]
    x_offset: u32,       // f32 index of x[0, 0]
    x_stride: u32,
    stats_out: u32,      // f32 index in norm_stats (STATS_OUT)
    n_chunks: u32,       // embed_argmax.wgsl: the (value, index) pairs in partial
    chunks_offset: u32,  // embed_argmax.wgsl: vec2 index of the first
    rn_zero: u32,        // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

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
