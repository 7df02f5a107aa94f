// Sums of squares of x held as vec4 words, in the halving order (cpu::sum_squares), for the kernels
// that load x that way (lib/act_stage.wgsl, lib/head_input.wgsl). The including kernel includes
// lib/numerics.wgsl and lib/wg_reduce.wgsl and declares `override WG`.

// The halving sum, across the workgroup, of the squares sq[u] of this invocation's vec4 words
// lid + u WG (zero where absent; a kernel with fewer than 8 slots passes zeros for the rest): per
// lane a tree over u (element distances 16 WG, 8 WG, 4 WG), the tree across invocations (2 WG .. 4),
// then the lanes (0 + 2) + (1 + 3): cpu::sum_squares's order over the elements zero-padded to 32 WG.
fn sum_squares_words(lid: u32, sq: array<vec4<f32>, 8>) -> f32 {
    let t = ((sq[0] + sq[4]) + (sq[2] + sq[6])) + ((sq[1] + sq[5]) + (sq[3] + sq[7]));
    let s = wg_halving_sum4(lid, t);
    return (s.x + s.z) + (s.y + s.w);
}

// A vec4 of x's squares, each rounded on its own (never fused into the sums that follow).
fn squares4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(mul_rn(v.x, v.x), mul_rn(v.y, v.y), mul_rn(v.z, v.z), mul_rn(v.w, v.w));
}
