// One token's Q8_0-block activations in an `acts` buffer (act_q8_0.wgsl writes them; so do
// attention.wgsl with Q8_OUT, for the o-projection, and matvec_q8_acts.wgsl with QOUT, for the down
// projection; matvec_q8_acts.wgsl reads them): u32 words from the
// token's first, for nb blocks: the codes of block b at 8 b .. 8 b + 7 (element 4w + e in byte e of
// word w), then the blocks' f16 d as f32 bits from act_dq(nb), padded to a whole vec4.
fn act_dq(nb: u32) -> u32 { return 8u * nb; }
fn act_words(nb: u32) -> u32 { return 8u * nb + (nb + 3u) / 4u * 4u; }

// A block's scale and its inverse from its max |h| (quantize_q8_0.wgsl's, ggml's
// quantize_row_q8_0_ref): d = amax / 127 correctly rounded, id = 1 / d (0 for d = 0). The block
// keeps round_f16(d); the codes are round_away(h * id). (The including kernel includes
// lib/numerics.wgsl.)
fn q8_0_d(amax: f32) -> f32 { return div_rn(amax, 127.0); }
fn q8_0_id(d: f32) -> f32 { return select(0.0, div_rn(1.0, d), d != 0.0); }
fn q8_0_code(h: f32, id: f32) -> u32 { return bitcast<u32>(i32(round_away(mul_rn(h, id)))) & 0xffu; }

// roundf (quantize_q8_0.wgsl's round_away).
fn round_away(v: f32) -> f32 {
    let t = trunc(v);
    return select(t, t + sign(v), abs(v - t) >= 0.5);
}
