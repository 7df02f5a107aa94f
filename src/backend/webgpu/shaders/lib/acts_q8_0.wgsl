// One token's Q8_0-block activations in an `acts` buffer (act_q8_0.wgsl writes them;
// matvec_q8_acts.wgsl reads them and, with QOUT, writes the down projection's): u32 words from the
// token's first, for nb blocks: the codes of block b at 8 b .. 8 b + 7 (element 4w + e in byte e of
// word w), the blocks' f16 d as f32 bits from act_dq(nb), their code sums (i32) from act_sums(nb);
// the last two padded to whole vec4s, so that every part starts on a vec4.
fn act_pad4(nb: u32) -> u32 { return (nb + 3u) / 4u * 4u; }
fn act_dq(nb: u32) -> u32 { return 8u * nb; }
fn act_sums(nb: u32) -> u32 { return 8u * nb + act_pad4(nb); }
fn act_words(nb: u32) -> u32 { return 8u * nb + 2u * act_pad4(nb); }
