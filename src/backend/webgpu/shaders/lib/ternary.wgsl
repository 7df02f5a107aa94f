// The GPU layout of ternary weights (docs: src/backend/webgpu/webgpu_weights.h) and its dot product
// with int8 activations.
//
// One u32 holds 16 consecutive elements e0..e15 of a row as 2-bit codes (code = value + 1, so
// -1 -> 0, 0 -> 1, +1 -> 2, and Q2_0's +2 -> 3), interleaved so that one shift and one mask give
// four consecutive elements, one per byte:
//
//     byte 3          byte 2          byte 1          byte 0
//     e15 e11 e7 e3 | e14 e10 e6 e2 | e13 e9 e5 e1  | e12 e8 e4 e0     (bits 7:6 5:4 3:2 1:0)
//
//   (w >> 2s) & 0x03030303 = codes of e(4s) .. e(4s+3) in bytes 0..3, s = 0..3
//
// A word pairs with 4 activation words (16 int8): dot = sum_s dot4_i8(signed(codes_s), act_s).

// Per-byte code - 1 as signed bytes, without borrows between bytes: (c + 0x7f) ^ 0x80.
fn ternary_signed(codes: u32) -> u32 {
    return ((codes | 0x80808080u) - 0x01010101u) ^ 0x80808080u;
}

// The decode kernels' form (lib/ternary_decode.wgsl): sum(value * a) = sum(code * a) - sum(a), the
// codes (0..3) being non-negative signed bytes as they are. Codes e(4s)..e(4s+3) sit in bits 2s+1:2s
// of each byte, so masking without the shift gives 4^s * code, still a non-negative signed byte for
// s < 3: codes_dot16 returns the four partial dots with those factors in, (s0 + s3, 4 s1, 16 s2),
// which the caller accumulates apart and scales down once (exact: the sums stay multiples). Per
// weight word: 1 shift, 4 masks and 4 dot4s, plus 4 dot4s with ones for sum(a) (act_sum16; the
// fused decode prologue takes sum(a) once instead, lib/act_stage.wgsl ASUM_ONCE), where
// ternary_dot16 takes 3 shifts, 4 masks, 4 dot4s and 3 byte-wise ops per dot4 for code - 1.
fn codes_dot16(w: u32, a: vec4<u32>) -> vec3<i32> {
    return vec3<i32>(dot4_i8(w & 0x03030303u, a.x) + dot4_i8((w >> 6u) & 0x03030303u, a.w),
                     dot4_i8(w & 0x0c0c0c0cu, a.y), dot4_i8(w & 0x30303030u, a.z));
}

fn act_sum16(a: vec4<u32>) -> i32 {
    return dot4_i8(0x01010101u, a.x) + dot4_i8(0x01010101u, a.y) + dot4_i8(0x01010101u, a.z)
         + dot4_i8(0x01010101u, a.w);
}

// Integer dot product of one weight word (16 elements) with 16 int8 activations a.x .. a.w.
fn ternary_dot16(w: u32, a: vec4<u32>) -> i32 {
    return dot4_i8(ternary_signed(w & 0x03030303u), a.x)
         + dot4_i8(ternary_signed((w >> 2u) & 0x03030303u), a.y)
         + dot4_i8(ternary_signed((w >> 4u) & 0x03030303u), a.z)
         + dot4_i8(ternary_signed((w >> 6u) & 0x03030303u), a.w);
}
