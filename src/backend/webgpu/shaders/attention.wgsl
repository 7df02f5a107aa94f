// attention: causal GQA attention of T queries at positions pos0 + t over the KV cache positions
// [0, pos0 + t], in the CPU reference's order of operations (CpuBackend::attention), bit for bit:
// scores q·k in cpu::dot_blocked16's order, * scale, max, exp_fixed (cpu::exp_fixed's operations),
// sum in cpu::sum_positions's order, p = e * (1 / sum), p rounded to f16 when V is f16, out =
// sum_p p v in cpu::sum_positions's order. q is rounded to f16 first when K is f16.
//
//   q: [n_head hd, T] f32   k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32 (u32 words)
//   out: [n_head hd, T] f32
//   norm_stats: the output's block sums of squares with STATS_OUT (one query; f32 bits), or its
//     Q8_0 blocks with Q8_OUT (one query; lib/acts_q8_0.wgsl's layout, from word 0)
// Bindings: 0 q (read), 1 k_cache (read), 2 v_cache (read), 3 out (read_write), 4 norm_stats
// (read_write), 5..8 pf0..pf3 (read: weights to pull into L2, below; any buffer when PF_FROM is
// unset), 9 params (uniform)
// Dispatch: (n_head + prefetch workgroups, T, 1). One workgroup per (head, token):
//   scores: up to SC_MAX positions (decode), in tiles of WG / S positions, S threads
//     per position, one block of 16 dimensions each; the K rows go straight into the threads'
//     registers and a row's block sums are gathered by shuffles where its S threads share a
//     subgroup (lib/attention_core.wgsl: k_regs), else they are staged in workgroup memory
//     (coalesced); beyond, thread i computes positions i, i + WG, ... itself. Up to SC_MAX
//     positions the scores, then exp(score - max), stay in workgroup memory; beyond that they are
//     recomputed in each pass, so any context length works (the host gives one query over more
//     positions than that to the prompt kernels, which spread it over many workgroups). Max is a tree reduction;
//     the sum takes CHUNK positions at a time, one thread per block of 32 positions, then the
//     blocks in order;
//   P·V: thread (c, g) owns dimension pair c (one u32 of an f16 row, or two f32) for the blocks
//     g, g + GROUPS, ... of each chunk (GROUPS = WG / (head_dim / 2), 32 positions per block, CHUNK
//     probabilities staged at a time); thread c then adds the chunk's block sums in order.
//   One query over few positions (ATT_SHORT, its own pipeline): the short form, the same sums with
//     every K and V word loaded before q and the probabilities passed by shuffles
//     (lib/attention_core.wgsl: attend_short).
// With f16 K (V) the products q·k (p·v) are exact in f32 (11-bit significands); with an f32 cache
// they are rounded as the CPU rounds them (mul_rn).

// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/position_sum.wgsl"
// #include "lib/attention_core.wgsl"
// #include "lib/acts_q8_0.wgsl"

override WG: u32 = 256u;      // a power of two, >= head_dim / 2
override K_F16: bool = true;
override V_F16: bool = true;
override CHUNK: u32 = 256u;     // probabilities staged at a time, a multiple of 32 (position blocks)
override HD_MAX: u32 = 256u;
override HD: u32 = 128u;       // head_dim, a multiple of 4 up to HD_MAX
override S: u32 = 8u;          // threads per position in the tiled scores (a power of two dividing WG, >= the row's blocks)
override WPT: u32 = 8u;        // K words per thread: one block of 16 dimensions (8 f16 words, 16 f32)
override TILE: u32 = 2080u;    // (WG / S) * (words per K row + 1)
override TILED: bool = true;   // the tiled scores exist (decode); off, the tile arrays shrink to 1
override KPART: u32 = 256u;    // WG when TILED, else 1
override SC_MAX: u32 = 2048u;
// One query (decode): the output's block sums of squares (lib/sum_squares.wgsl) go to norm_stats for
// the o-projection's norm (the host sets it when head_dim is a multiple of 32).
override STATS_OUT: bool = false;
// One query (decode) of a family model whose o-projection takes Q8_0 blocks (Q4_0 / Q8_0): the
// output's blocks (ACT_NB per token) go to norm_stats for matvec_q8_acts.wgsl, as act_q8_0.wgsl
// would make them (the host sets it when head_dim is a multiple of 32; not with STATS_OUT).
override Q8_OUT: bool = false;
override ACT_NB: u32 = 1u;  // Q8_OUT: blocks of the whole output (n_head head_dim / 32)

struct Params {
    head_dim: u32,
    n_head: u32,
    n_head_kv: u32,
    n_tokens: u32,
    pos0: u32,
    n_embd_kv: u32,   // cache elements per position
    q_offset: u32,    // f32 index of q[0, 0]
    q_stride: u32,
    out_offset: u32,  // f32 index of out[0, 0]
    out_stride: u32,
    k_offset: u32,    // element index of k_cache[0, 0]
    v_offset: u32,    // element index of v_cache[0, 0]
    scale: f32,       // 1 / sqrt(head_dim)
    stats_out: u32,   // f32 index in norm_stats of the output's block sums (STATS_OUT)
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;  // (u32 words: att_k)
@group(0) @binding(2) var<storage, read> v_cache: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> norm_stats: array<u32>;
@group(0) @binding(5) var<storage, read> pf0: array<u32>;
@group(0) @binding(6) var<storage, read> pf1: array<u32>;
@group(0) @binding(7) var<storage, read> pf2: array<u32>;
@group(0) @binding(8) var<storage, read> pf3: array<u32>;
@group(0) @binding(9) var<uniform> p: Params;

// Weight prefetch (one query, decode): while the n_head workgroups attend, the rest of the GPU and
// its DRAM are idle, and the layer's next matmuls stream their weights from DRAM (a token's ~850 MB
// pass through the 50 MB L2 between two visits of a layer). Workgroups from PF_FROM on (= n_head)
// therefore load one word per 64 bytes (PF_STRIDE words) of up to four weights (pf0..pf3, PF_WORDSi
// u32 words each; the host binds the o-projection's, gate+up's, the down projection's and the next
// layer's qkv weight), so that those kernels find them in L2. A workgroup covers PF_LOADS * WG
// such words of one buffer, each invocation PF_LOADS at a stride of WG * PF_STRIDE words (a warp's
// load spans 2 KB). The words are "used" by a store that never happens (p.rn_zero is 0), so that the
// compiler keeps the loads; the workgroup ends once they are back, which must come before the
// attending workgroups end (else the next kernel waits for them: a chain of multiply-adds before
// the loads made tokens slower, H200 tg128 906.2-907.0 tokens/s with 200 against 908.7-910.6).
// Nothing changes in any result. The host binds one weight today (gate+up's for BitNet) and q in
// the other slots. This four-buffer form is kept, rather than one binding and a constant bound,
// because the one-buffer kernel was measurably slower and we have not found why (code generation):
// H200 tg128 968.1-972.8 tokens/s against 994.1-999.7 (tools/device/webgpu_ab.sh, three alternating
// rounds, docs/perf-log.md).
override PF_FROM: u32 = 0xffffffffu;  // first prefetching workgroup; unset: none
override PF_LOADS: u32 = 8u;
const PF_STRIDE: u32 = 16u;  // (a constant: the host counts the workgroups with it, k_prefetch_stride_words)
override PF_WORDS0: u32 = 0u;
override PF_WORDS1: u32 = 0u;
override PF_WORDS2: u32 = 0u;
override PF_WORDS3: u32 = 0u;

fn pf_word(b: u32, i: u32) -> u32 {
    switch (b) {
        case 0u: { return pf0[i]; }
        case 1u: { return pf1[i]; }
        case 2u: { return pf2[i]; }
        default: { return pf3[i]; }
    }
}

// Workgroups for a buffer of `words` words (each covers WG * PF_LOADS * PF_STRIDE words).
fn pf_groups(words: u32) -> u32 {
    let span = WG * PF_LOADS * PF_STRIDE;
    return (words + span - 1u) / span;
}

fn prefetch_weights(lid: u32, g: u32) {
    let counts = array<u32, 4>(pf_groups(PF_WORDS0), pf_groups(PF_WORDS1), pf_groups(PF_WORDS2), pf_groups(PF_WORDS3));
    let words  = array<u32, 4>(PF_WORDS0, PF_WORDS1, PF_WORDS2, PF_WORDS3);
    var b  = 0u;
    var gb = g;  // the workgroup's index among buffer b's
    for (; b < 3u && gb >= counts[b]; b++) { gb -= counts[b]; }
    if (gb >= counts[b]) { return; }
    var acc = 0u;
    let first = (gb * WG * PF_LOADS + lid) * PF_STRIDE;
    for (var u = 0u; u < PF_LOADS; u++) {
        let i = first + u * WG * PF_STRIDE;
        if (i < words[b]) { acc ^= pf_word(b, i); }
    }
    if ((acc & p.rn_zero) != 0u) { norm_stats[0] = acc; }
}

// q's offset as a pipeline constant where the host sets it (one query only, t = 0;
// lib/attention_core.wgsl's ATT_UNSET: the uniform's).
override Q_AT: u32 = ATT_UNSET;
fn att_q(t: u32, i: u32) -> f32 {
    if (Q_AT != ATT_UNSET) { return q[Q_AT + i]; }
    return q[p.q_offset + t * p.q_stride + i];
}
fn att_k(w: u32) -> u32 { return k_cache[w / 4u][w % 4u]; }
fn att_k4(i: u32) -> vec4<u32> { return k_cache[i]; }
fn att_v(w: u32) -> u32 { return v_cache[w]; }
fn att_out(t: u32, i: u32, v: f32) { out[p.out_offset + t * p.out_stride + i] = v; }

// The block of 32 output elements that 16 neighbouring invocations stored (pairs 2j, 2j + 1): their
// squares in the halving order (per component at element distances 16 .. 2, then the two
// components), written by the first of the 16. Every invocation calls it (barriers without SG32).
// With Q8_OUT instead the block's Q8_0 form (act_q8_0.wgsl's expressions, so its bits): the max
// |o| over the 16, d and 1 / d, and each invocation's two codes; the even invocation of a pair
// writes their code word (elements 4w .. 4w + 3, bytes 0..3), the first of the 16 the block's d.
fn att_done(lid: u32, i: u32, o: vec2<f32>, wrote: bool) {
    if (Q8_OUT) {
        let d  = q8_0_d(team_max(lid, max(abs(o.x), abs(o.y)), 16u));
        let id = q8_0_id(d);
        // (the two codes as an f32 of at most 16 bits: exact, so the partner gets the same bits)
        let mine  = q8_0_code(o.x, id) | (q8_0_code(o.y, id) << 8u);
        let other = u32(team_partner(lid, f32(mine)));
        if (wrote && lid % 2u == 0u) { norm_stats[8u * (i / 32u) + (i % 32u) / 4u] = mine | (other << 16u); }
        if (wrote && lid % 16u == 0u) { norm_stats[act_dq(ACT_NB) + i / 32u] = bitcast<u32>(round_f16(d)); }
        return;
    }
    if (!STATS_OUT) { return; }
    let s = team_halving_sum(lid, mul_rn(o.x, o.x), 16u) + team_halving_sum(lid, mul_rn(o.y, o.y), 16u);
    if (wrote && lid % 16u == 0u) { norm_stats[p.stats_out + i / NORM_BLOCK] = bitcast<u32>(s); }
}

// The max over aligned teams of `width` invocations (a power of two, at most 32), in every member;
// every invocation calls it (it may have barriers). (A max: any order gives the same bits.)
@diagnostic(off, subgroup_uniformity)
fn team_max(lid: u32, v: f32, width: u32) -> f32 {
    if (WG_REDUCE_SG && SG32) {
        var a = v;
        for (var d = width / 2u; d > 0u; d >>= 1u) { a = max(a, sg_shuffle_xor(a, d)); }
        return a;
    }
    workgroupBarrier();
    wg_red_h[lid] = v;
    workgroupBarrier();
    for (var d = width / 2u; d > 0u; d >>= 1u) {
        if (lid % width < d) { wg_red_h[lid] = max(wg_red_h[lid], wg_red_h[lid + d]); }
        workgroupBarrier();
    }
    return wg_red_h[lid - lid % width];
}

// The value of invocation lid ^ 1 (every invocation calls it; it may have barriers).
@diagnostic(off, subgroup_uniformity)
fn team_partner(lid: u32, v: f32) -> f32 {
    if (WG_REDUCE_SG && SG32) { return sg_shuffle_xor(v, 1u); }
    workgroupBarrier();
    wg_red_h[lid] = v;
    workgroupBarrier();
    return wg_red_h[lid ^ 1u];
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (wid.x >= PF_FROM) {
        prefetch_weights(lid, wid.x - PF_FROM);
        return;
    }
    attend(lid, wid.x, wid.y);
}
