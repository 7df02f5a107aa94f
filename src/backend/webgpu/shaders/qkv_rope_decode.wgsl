requires packed_4x8_integer_dot_product;

// qkv_rope_decode: qkv_rope.wgsl for ONE token (decode): [q; k; v] = Wqkv a, RoPE on q and k, q to
// q_out, k and v appended to the cache at position pos0; the activations given or computed by the
// fused norm prologue (lib/act_stage.wgsl) as in bitlinear_decode.wgsl. One scale group per row.
//
//   wq: codes [N][K/64] vec4<u32> | scales [N] | output scales [N], N = (n_head + 2 n_head_kv) hd
//   rope: [pos][n_rot/2] (cos, sin) f32   q_out: [n_head hd] f32   k_cache, v_cache: as qkv_rope.wgsl
// Bindings: 0 wq, 1 src, 2 src_scale, 3 rope (read); 4 q_out, 5 k_cache, 6 v_cache, 7 norm_stats
//           (x's block sums of squares with STATS_IN, lib/act_stage.wgsl) (read_write); 8 pfw (read: a
//           weight to pull into L2, lib/weight_prefetch.wgsl); 9 params (uniform)
// Dispatch: (N / ROWS, 1, 1), ROWS = WG / LANES slots of one head (a multiple of 4 dividing
// head_dim); slots as in lib/qkv_store.wgsl; thread u < ROWS / 4 finishes slots 4u .. 4u + 3.

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/act_stage.wgsl"
// #include "lib/ternary_decode.wgsl"
// #include "lib/decode_io.wgsl"
// #include "lib/qkv_store.wgsl"
// #include "lib/qkv_decode.wgsl"
// #include "lib/weight_prefetch.wgsl"
// #include "lib/qkv_decode_kernel.wgsl"

@group(0) @binding(9) var<uniform> p: Params;  // (lib/qkv_decode_kernel.wgsl)

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    qkv_decode_rows(lid, wid.x, LANES, K, p.scales_offset, p.oscales_offset);
}
