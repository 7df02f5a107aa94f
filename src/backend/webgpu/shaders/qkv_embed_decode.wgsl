requires packed_4x8_integer_dot_product;

// qkv_embed_decode: embed_argmax.wgsl and the first layer's qkv_rope_decode.wgsl in one dispatch,
// for greedy decoding on the device. The previous step's head left one (value bits, index) pair per
// workgroup; every workgroup reduces them to the token (embed_argmax's reduction: largest value,
// lowest index on ties), and its fused norm prologue stages that token's row of the F16 embedding
// table in place of x (lib/decode_io.wgsl, EMBED_IN), so the qkv rows, RoPE and the cache append
// are qkv_rope_decode's, bit for bit. Workgroup 0 also writes the token to ids (what the host reads
// back) and the row to x (the residual stream that the o-projection adds to). One dispatch boundary
// less per token than embed_argmax followed by qkv_rope_decode.
//
//   as qkv_rope_decode.wgsl, with src = the embedding table [n_vocab][K] f16 (two per u32 word)
//   partial: [N_CHUNKS] vec2<u32> from pair CHUNKS_AT   ids: [.] i32   x_out: [K / 4] vec4<f32>
// Bindings: 0-8 as qkv_rope_decode.wgsl (lib/qkv_decode_kernel.wgsl); 9 partial (read); 10 ids,
// 11 x_out (read_write); 12 params (uniform)
// Dispatch: as qkv_rope_decode.wgsl.

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
// #include "lib/best_index.wgsl"

@group(0) @binding(9) var<storage, read> partial: array<vec2<u32>>;
@group(0) @binding(10) var<storage, read_write> ids: array<i32>;
@group(0) @binding(11) var<storage, read_write> x_out: array<vec4<f32>>;
@group(0) @binding(12) var<uniform> p: Params;  // (lib/qkv_decode_kernel.wgsl)

override N_CHUNKS: u32 = 1u;   // the pairs the head left (constants: the reduction starts at once)
override CHUNKS_AT: u32 = 0u;  // vec2 index of the first

// Whether each workgroup first touches its weight rows (one word per 64 bytes), so that they come
// from DRAM while the token is found: the rows' own loads wait for the token's row (X_FIRST).
override W_TOUCH: bool = true;
// Whether the reduction goes through subgroup shuffles where subgroups are 32 wide (one barrier)
// rather than best_index's tree (eight): the same token either way (largest value, lowest index on
// ties, a total order).
override BEST_SG: bool = true;

var<workgroup> sg_best: array<vec2<u32>, WG / 32u>;

// The token: the best of the head's pairs, in every invocation.
fn token_of_pairs(lid: u32) -> u32 {
    var bv = 0.0;
    var bi = 0xffffffffu;
    for (var c = lid; c < N_CHUNKS; c += WG) {
        let e = partial[CHUNKS_AT + c];
        if (beats(bitcast<f32>(e.x), e.y, bv, bi)) {
            bv = bitcast<f32>(e.x);
            bi = e.y;
        }
    }
    if (!(BEST_SG && WG_REDUCE_SG && SG32)) { return best_index(lid, bv, bi).y; }
    for (var m = 1u; m < 32u; m <<= 1u) {
        let ov = sg_shuffle_xor(bv, m);
        let oi = u32(sg_shuffle_xor_i(vec2<i32>(i32(bi), 0), m).x);
        if (beats(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    if (lid % 32u == 0u) { sg_best[lid / 32u] = vec2<u32>(bitcast<u32>(bv), bi); }
    workgroupBarrier();
    bv = 0.0;
    bi = 0xffffffffu;
    for (var s = 0u; s < WG / 32u; s++) {
        let e = sg_best[s];
        if (beats(bitcast<f32>(e.x), e.y, bv, bi)) {
            bv = bitcast<f32>(e.x);
            bi = e.y;
        }
    }
    return bi;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    var touched = 0u;
    if (W_TOUCH) {  // (the rows of qkv_decode_rows: slot lid / LANES of the workgroup's head)
        let slot0 = wid.x * (WG / LANES);
        let row   = (slot0 / HD) * HD + slot_dim(slot0 % HD + lid / LANES);
        let n     = K / 64u;  // vec4 per row
        for (var i = (lid % LANES) * 4u; i < n; i += LANES * 4u) { touched ^= wq[row * n + i].x; }
    }
    embed_id = token_of_pairs(lid);
    if (wid.x == 0u) {
        if (lid == 0u) { ids[p.ids_offset] = i32(embed_id); }
        for (var j = lid; j < K / 4u; j += WG) { x_out[p.x_offset + j] = embed_x4(j); }
    }
    qkv_decode_rows(lid, wid.x, LANES, K, p.scales_offset, p.oscales_offset);
    if ((touched & p.rn_zero) != 0u) { norm_stats[0] = bitcast<f32>(touched); }  // (never: keeps the loads)
}
