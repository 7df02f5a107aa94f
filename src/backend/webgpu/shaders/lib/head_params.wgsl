// The uniform of the decode LM heads (lm_head_f16_decode.wgsl, lm_head_i8_argmax.wgsl), filled by
// webgpu_decode.cpp's HeadParams (the same fields in the same order).
struct Params {
    n_vocab: u32,
    x_offset: u32,        // f32 index of x[0]
    out_offset: u32,      // f32 index of logits[0]
    k: u32,               // = K (for lib/inv_rms.wgsl)
    eps: f32,             // NORM only
    partial_offset: u32,  // vec2 index of partial[0]
    thr_slot: u32,        // lm_head_i8_argmax.wgsl EXACT_TAIL: its threshold slot (0 or 1)
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}
