// What the prompt GEMMs share (ternary_gemm.wgsl, dot4; ternary_gemm_mma.wgsl, subgroup matrices):
// their parameters, the tile's rows and the signed-byte unpacking of code words (their epilogue's
// division in two parts, recip_part and div_by, is in lib/numerics.wgsl). The including kernel declares `BM` (weight rows per workgroup),
// `override GATE_UP` and the uniform `p: Params`, and includes lib/ternary.wgsl and
// lib/numerics.wgsl.

struct Params {
    n_out: u32,           // outputs: N (n_ff with GATE_UP, half the weight rows)
    k_words: u32,         // K / 16
    group_words: u32,     // words per scale group (a multiple of KW when N_GROUPS > 1)
    n_tokens: u32,        // T
    scales_offset: u32,   // u32 index of the group scales in `weights`
    oscales_offset: u32,  // u32 index of the output scales in `weights`
    act_offset: u32,      // u32 index of act_q[0, 0]
    act_stride: u32,      // u32 words between tokens of act_q (K / 4)
    ascale_offset: u32,   // f32 index of act_scale[0]
    y_offset: u32,        // f32 index of y[0, 0]
    y_stride: u32,        // f32 elements between tokens of y
    last: u32,            // bitlinear: 1 = y += W a; GATE_UP: 0 = relu², 1 = silu
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

// Outputs per workgroup: BM rows, or BM / 2 gate/up pairs.
fn outs_per_tile() -> u32 {
    return select(BM, BM / 2u, GATE_UP);
}

// Weight row of tile row lr (tile starting at output out0); 0xffffffff past the last output. With
// GATE_UP tile row lr < BM / 2 is gate row out0 + lr and lr >= BM / 2 up row n_out + out0 + lr - BM / 2.
fn tile_row(out0: u32, lr: u32) -> u32 {
    let o = out0 + lr % outs_per_tile();
    if (o >= p.n_out) { return 0xffffffffu; }
    return o + (lr / outs_per_tile()) * p.n_out;
}

// `row`, or row 0 for the tile rows past the end (their outputs are computed but not stored).
fn valid_row(row: u32) -> u32 {
    return select(row, 0u, row == 0xffffffffu);
}

// The code word unpacked into four words of signed bytes (elements 4s .. 4s + 3 in word s).
fn signed_words(w: u32) -> vec4<u32> {
    return vec4<u32>(ternary_signed(w & 0x03030303u), ternary_signed((w >> 2u) & 0x03030303u),
                     ternary_signed((w >> 4u) & 0x03030303u), ternary_signed((w >> 6u) & 0x03030303u));
}
