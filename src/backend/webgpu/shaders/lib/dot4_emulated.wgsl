// Dot product of two packed 4 x i8 words without the packed_4x8_integer_dot_product language
// feature (the "_nodp4" kernel variants): sign-extend each byte and multiply-add.
fn dot4_i8(a: u32, b: u32) -> i32 {
    let va = vec4<i32>(bitcast<i32>(a << 24u), bitcast<i32>(a << 16u), bitcast<i32>(a << 8u), bitcast<i32>(a)) >> vec4<u32>(24u);
    let vb = vec4<i32>(bitcast<i32>(b << 24u), bitcast<i32>(b << 16u), bitcast<i32>(b << 8u), bitcast<i32>(b)) >> vec4<u32>(24u);
    return dot(va, vb);
}
