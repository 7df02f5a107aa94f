requires packed_4x8_integer_dot_product;

// lm_head_i8_embed: lm_head_i8_argmax.wgsl with EXACT_TAIL (greedy decoding's int8 head and its exact
// tail, the same code: lib/head_i8_body.wgsl) followed by what embed_argmax.wgsl would do in the next
// dispatch: the token (the workgroups' best, largest value and lowest index on ties), written to
// ids[p.ids_offset], and its row of the F16 table (the tied embedding: the head's own `head`
// binding) written to x, with x's block sums of squares (STATS_OUT) for the first layer's norm.
// One dispatch boundary less per token, and the same bits: the reduction is argmax_final's order
// (beats / best_index) and the row and sums are embed.wgsl's (embed_value, block_sum_words is
// team_halving_sum's halving order). x is the head's own input: every workgroup has read it before
// it counts itself done (the barrier in fold_embed), and only the last one writes it.
//
// The last workgroup: each workgroup, once its tail is done, publishes its best as four tagged
// words (16 data bits under the dispatch's tag p.fold_tag, so that a word still holding an older
// dispatch's value is told apart: WGSL's atomics are relaxed, so a word written before the count
// may still reach memory after it) and adds one to the count; the workgroup that brings the count
// to the number of workgroups reads every workgroup's words, polling a stale one until its tag is
// current, resets the count and embeds. The writers have all stored before counting, so the polls
// end; a poll that runs out (FOLD_POLLS reads: a bug) writes the id -1, which the host refuses.
//
//   exact_out: u32 [threshold slots 0, 1 | (value bits, index) x groups (lm_head_i8_argmax.wgsl's
//   pairs) | 4 tagged words x groups | the count]   ids: [*] i32   norm_stats: f32 (STATS_OUT)
// Bindings: 0 q8 (read), 1 info (read), 2 x (read_write), 3 nw (read), 4 logits (read_write),
//           5 partial (read_write), 6 head (read), 7 exact_out (read_write), 8 ids (read_write),
//           9 norm_stats (read_write), 10 params (uniform)
// Dispatch: as lm_head_i8_argmax.wgsl with EXACT_TAIL (ITERS, TEAM_SG); K a multiple of 32.

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/head_input.wgsl"
// #include "lib/head_exact_row.wgsl"
// #include "lib/head_params.wgsl"

// #include "lib/dot4_native.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"

// #include "lib/head_i8_body.wgsl"

@group(0) @binding(0) var<storage, read> q8: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> info: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read> nw: array<f32>;
@group(0) @binding(4) var<storage, read_write> logits: array<f32>;
@group(0) @binding(5) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> head: array<vec4<u32>>;  // the F16 table
@group(0) @binding(7) var<storage, read_write> exact_out: array<atomic<u32>>;
@group(0) @binding(8) var<storage, read_write> ids: array<i32>;
@group(0) @binding(9) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(10) var<uniform> p: Params;

override STATS_OUT: bool = false;
override FOLD_POLLS: u32 = 1048576u;  // reads of one stale word before giving up

var<workgroup> fold_last: u32;
var<workgroup> fold_failed: atomic<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    head_i8(lid, wid, groups);
    fold_embed(lid, wid.x);
}

fn tagged(v: u32) -> u32 {
    return (p.fold_tag << 16u) | (v & 0xffffu);
}

// Every invocation calls it (barriers).
fn fold_embed(lid: u32, wid: u32) {
    let words = 2u + 2u * n_groups;  // the tagged words' first index
    let count = 2u + 6u * n_groups;
    workgroupBarrier();  // (this workgroup's reads of x are done)
    if (lid == 0u) {
        let b = tail_best;
        atomicStore(&exact_out[words + 4u * wid], tagged(b.x >> 16u));
        atomicStore(&exact_out[words + 4u * wid + 1u], tagged(b.x));
        atomicStore(&exact_out[words + 4u * wid + 2u], tagged(b.y >> 16u));
        atomicStore(&exact_out[words + 4u * wid + 3u], tagged(b.y));
        fold_last = select(0u, 1u, atomicAdd(&exact_out[count], 1u) + 1u == n_groups);
        atomicStore(&fold_failed, 0u);
    }
    if (workgroupUniformLoad(&fold_last) == 0u) { return; }

    // The last workgroup: every workgroup's best (argmax_final's reduction).
    var bv = 0.0;
    var bi = 0xffffffffu;
    for (var w = lid; w < n_groups; w += WG) {
        let at = words + 4u * w;
        var v = vec4<u32>(atomicLoad(&exact_out[at]), atomicLoad(&exact_out[at + 1u]),
                          atomicLoad(&exact_out[at + 2u]), atomicLoad(&exact_out[at + 3u]));
        var polls = 0u;
        loop {
            let stale = (v >> vec4<u32>(16u)) != vec4<u32>(p.fold_tag);
            if (!any(stale)) { break; }
            if (polls == FOLD_POLLS) {
                atomicStore(&fold_failed, 1u);
                break;
            }
            polls++;
            if (stale.x) { v.x = atomicLoad(&exact_out[at]); }
            if (stale.y) { v.y = atomicLoad(&exact_out[at + 1u]); }
            if (stale.z) { v.z = atomicLoad(&exact_out[at + 2u]); }
            if (stale.w) { v.w = atomicLoad(&exact_out[at + 3u]); }
        }
        let d = v & vec4<u32>(0xffffu);
        let value = bitcast<f32>((d.x << 16u) | d.y);
        let index = (d.z << 16u) | d.w;
        if (beats(value, index, bv, bi)) {
            bv = value;
            bi = index;
        }
    }
    var id = i32(best_index(lid, bv, bi).y);  // (barriers: fold_failed is settled)
    if (atomicLoad(&fold_failed) != 0u) { id = -1; }
    if (lid == 0u) {
        ids[p.ids_offset] = id;
        atomicStore(&exact_out[count], 0u);  // for the next dispatch
    }

    // embed.wgsl's row and block sums: invocation b writes block b of 32 elements.
    let known = id >= 0 && u32(id) < p.n_vocab;
    for (var blk = lid; blk < K / NORM_BLOCK; blk += WG) {
        var e: array<vec4<f32>, 8>;  // elements 4r .. 4r + 3 of the block in e[r]; zeros for no id
        if (known) {
            let first = (u32(id) * K + blk * NORM_BLOCK) / 8u;  // the block's 4 words of 8 halves
            for (var j = 0u; j < 4u; j++) {
                let h = head[first + j];
                e[2u * j]      = vec4<f32>(unpack2x16float(h.x), unpack2x16float(h.y));
                e[2u * j + 1u] = vec4<f32>(unpack2x16float(h.z), unpack2x16float(h.w));
            }
        }
        let o = p.x_offset + blk * NORM_BLOCK;
        for (var r = 0u; r < 8u; r++) {
            x[o + 4u * r]      = e[r].x;
            x[o + 4u * r + 1u] = e[r].y;
            x[o + 4u * r + 2u] = e[r].z;
            x[o + 4u * r + 3u] = e[r].w;
        }
        if (STATS_OUT) {
            var sq: array<vec4<f32>, 8>;
            for (var r = 0u; r < 8u; r++) { sq[r] = squares4(e[r]); }
            norm_stats[p.stats_out + blk] = block_sum_words(sq);
        }
    }
}
