// embed: x[:, t] = token_embd[ids[t]] as f32. The table is read as u32 words: two f16 per word
// (TABLE_F16; exact with unpack2x16float) or one f32 (other file types are dequantized to f32 at
// load). Token ids come from a GPU buffer, so the previous step's argmax can feed this one. An id
// outside the vocabulary gives a zero row (the host checks ids before writing them).
//
//   token_embd: [n_embd, n_vocab]   ids: [T] i32   x: [n_embd, T] f32
//   norm_stats: with STATS_OUT (one token), x's block sums of squares for the first layer's norm
//   (lib/sum_squares.wgsl)
// Bindings: 0 token_embd (read), 1 ids (read), 2 x (read_write), 3 norm_stats (read_write),
// 4 params (uniform)
// Dispatch: (ceil(n_embd / WG), T, 1); one thread per output element.

// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/embed_row.wgsl"

@group(0) @binding(0) var<storage, read> table: array<u32>;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    embed_store(lid, gid.x, gid.y, embed_value(ids[p.ids_offset + gid.y], gid.x));
}
