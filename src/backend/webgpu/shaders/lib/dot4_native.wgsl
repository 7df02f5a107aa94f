// Dot product of two packed 4 x i8 words with the WGSL builtin (packed_4x8_integer_dot_product:
// DP4A on GPUs that have it). The kernel that includes this must start with
// `requires packed_4x8_integer_dot_product;`.
fn dot4_i8(a: u32, b: u32) -> i32 {
    return dot4I8Packed(a, b);
}
