// One token's Q8_0-block activations in an `acts` buffer (act_q8_0.wgsl writes them;
// matvec_q8_acts.wgsl reads them and, with QOUT, writes the down projection's): u32 words from the
// token's first, for nb blocks: the codes of block b at 8 b .. 8 b + 7 (element 4w + e in byte e of
// word w), then the blocks' f16 d as f32 bits from act_dq(nb), padded to a whole vec4.
fn act_dq(nb: u32) -> u32 { return 8u * nb; }
fn act_words(nb: u32) -> u32 { return 8u * nb + (nb + 3u) / 4u * 4u; }
