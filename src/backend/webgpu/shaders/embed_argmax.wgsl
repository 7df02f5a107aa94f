// embed_argmax: argmax_final.wgsl and embed.wgsl in one dispatch, for greedy decoding on the device:
// the previous step's argmax_exact (or the int8 head's exact tail) left one (value, index) pair per
// workgroup; every workgroup here reduces all of them to the token (largest value, lowest index on
// ties), workgroup 0 writes it to ids[0] (what the host reads back), and each embeds its part of
// that token's row. One dispatch
// boundary less per token than argmax_final followed by embed, and the same bits.
//
//   token_embd: [n_embd, n_vocab]   partial: [n_chunks] vec2<u32> (value bits, index), from pair
//   p.chunks_offset   ids: [1] i32
//   x: [n_embd] f32   norm_stats: with STATS_OUT, x's block sums of squares (lib/sum_squares.wgsl)
// Bindings: 0 token_embd (read), 1 partial (read), 2 ids (read_write), 3 x (read_write),
// 4 norm_stats (read_write), 5 params (uniform)
// Dispatch: (ceil(n_embd / WG), 1, 1); one thread per output element.

// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/embed_row.wgsl"

@group(0) @binding(0) var<storage, read> table: array<u32>;
@group(0) @binding(1) var<storage, read> partial: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> ids: array<i32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
    // argmax_final's reduction, in every workgroup.
    var bv = 0.0;
    var bi = 0xffffffffu;
    for (var c = lid; c < p.n_chunks; c += WG) {
        let e = partial[p.chunks_offset + c];
        if (beats(bitcast<f32>(e.x), e.y, bv, bi)) {
            bv = bitcast<f32>(e.x);
            bi = e.y;
        }
    }
    let id = i32(best_index(lid, bv, bi).y);
    if (wid.x == 0u && lid == 0u) { ids[p.ids_offset] = id; }
    embed_store(lid, gid.x, 0u, embed_value(id, gid.x));
}
