requires packed_4x8_integer_dot_product;

// qkv_attention_decode: norm_qkv_rope_kv_append followed by attention, for ONE token (decode), in
// one dispatch: one workgroup per query head h computes, from x, the rows of q for head h and of
// k and v for its KV head (the fused norm prologue of lib/act_stage.wgsl, the dot products of
// lib/ternary_decode.wgsl, the epilogue and RoPE of lib/qkv_store.wgsl), then attends with them
// (lib/attention_core.wgsl). So q never goes through memory and the dispatch boundary between the
// two kernels is gone; the price is that the G query heads of a KV head each compute its k and v
// (for 2B4T 384 rows per workgroup instead of 128; the extra rows come from L2). Numerics are
// qkv_rope_decode.wgsl's and attention.wgsl's, bit for bit: the same library code, in the same
// order.
//
// The workgroup's rows are visited in passes of R = WG / LANES rows (q's slots, then k's, then
// v's, each in lib/qkv_store.wgsl's slot order); the weight loads of three passes are in flight at
// once (the first three with the prologue's loads), each pass's lane sums go to slot_dots, and
// invocation u < 3 HD / 4 finishes slots 4u .. 4u + 3 at the end. The first query head of each KV
// head writes the new K / V rows to the cache; every workgroup keeps them in workgroup memory,
// where attention reads the current position (older positions come from the cache).
//
// Two things that cost a load's whole round trip each time, found on an H200 (a first version ran
// at 547 instead of 782 tokens/s, and slower still deeper into the context): a register array
// filled by loads under a run-time branch, or copied from one that was, waits for those loads where
// the branch joins (the copy needs their values). So the passes' words are loaded straight into
// three variables in a loop unrolled by three, and attention's K / V reads are branch-free
// (att_k: both loads issued, one picked).
//
//   wq: codes [N][K/64] vec4<u32> | scales [N] | output scales [N], N = (n_head + 2 n_head_kv) hd
//   src: x [K] f32 bits   src_scale: attn_norm [K] f32   rope: [pos][n_rot/2] (cos, sin) f32
//   k_cache, v_cache: as qkv_rope.wgsl   out: [n_head hd] f32 (the attention output)
//   norm_stats: x's block sums of squares (STATS_IN), the output's (STATS_OUT)
// Bindings: 0 wq, 1 src, 2 src_scale, 3 rope (read); 4 k_cache, 5 v_cache, 6 out, 7 norm_stats
//           (read_write); 8 params (uniform)
// Dispatch: (n_head, 1, 1).

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/act_stage.wgsl"
// #include "lib/ternary_decode.wgsl"
// #include "lib/decode_io.wgsl"
// #include "lib/qkv_store.wgsl"
// #include "lib/position_sum.wgsl"
// #include "lib/attention_core.wgsl"

override WG: u32 = 512u;      // a power of two, >= K / 32 and >= HD / 2
override LANES: u32 = 8u;     // lanes per weight row: R = WG / LANES rows per pass, a multiple of 4 dividing HD
override K: u32 = 2560u;      // x's width (n_embd), a multiple of 64
override NORM: bool = true;   // (lib/act_stage.wgsl: always the fused prologue here)
override K_F16: bool = true;
override V_F16: bool = true;
override HD: u32 = 128u;      // head_dim (= p.head_dim)
override N_HEAD: u32 = 20u;   // (= p.n_head, p.n_head_kv: constants, so the weight rows need no uniform read)
override N_HEAD_KV: u32 = 5u;
// Attention's (lib/attention_core.wgsl, attention.wgsl):
override CHUNK: u32 = 256u;
override HD_MAX: u32 = 128u;
override S: u32 = 8u;
override WPT: u32 = 8u;
override TILE: u32 = 4160u;
override TILED: bool = true;
override KPART: u32 = 512u;
override SC_MAX: u32 = 1024u;
override STATS_OUT: bool = false;

struct Params {
    eps: f32,
    src_offset: u32,      // f32 index of x[0]
    scale_offset: u32,    // f32 index of attn_norm[0]
    scales_offset: u32,   // u32 index of the row scales in wq
    oscales_offset: u32,  // u32 index of the output scales in wq
    head_dim: u32,
    n_rot: u32,
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,            // position of the token
    n_embd_kv: u32,
    k_offset: u32,        // element index of k_cache[0, 0] (v likewise)
    v_offset: u32,
    scale: f32,           // 1 / sqrt(head_dim)
    k_row: u32,           // u32 index of the current position's K row (all KV heads) in k_cache
    v_row: u32,
    k_safe_row: u32,      // u32 index of a K row that nothing writes in this dispatch (V likewise)
    v_safe_row: u32,
    out_offset: u32,      // f32 index of out[0]
    stats_in: u32,        // f32 index in norm_stats of x's block sums (STATS_IN)
    stats_out: u32,       // f32 index in norm_stats where the output's block sums go (STATS_OUT)
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read> src_scale: array<f32>;
@group(0) @binding(3) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;
@group(0) @binding(7) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

override R: u32 = WG / LANES;        // rows per pass
override N_PASS: u32 = 3u * HD / R;  // passes: q's, k's and v's slots

var<workgroup> slot_dots: array<i32, 3u * HD>;  // [q slots | k slots | v slots]
var<workgroup> cur_q: array<f32, HD>;           // this head's q
var<workgroup> cur_k: array<u32, HD>;           // the current position's K / V row words of the KV head
var<workgroup> cur_v: array<u32, HD>;

var<private> cur_k_word: u32;   // u32 index in k_cache of the KV head's current K row (V likewise)
var<private> cur_v_word: u32;
var<private> safe_k_word: u32;  // the same columns of a row nothing writes in this dispatch
var<private> safe_v_word: u32;

override KW: u32 = select(HD, HD / 2u, K_F16);  // u32 words of one head's K row (V likewise)
override VW: u32 = select(HD, HD / 2u, V_F16);

// lib/qkv_store.wgsl: q stays here, the new K / V words also go to workgroup memory.
fn store_q(tok: u32, i: u32, v: f32) { cur_q[i % HD] = v; }

fn kv_word_stored(is_k: bool, w: u32, word: u32) {
    if (is_k) {
        cur_k[w - cur_k_word] = word;
    } else {
        cur_v[w - cur_v_word] = word;
    }
}

// lib/attention_core.wgsl: q and the current position's rows from workgroup memory. Branch-free:
// the cache word is always loaded (from the safe row in place of the current one, which the first
// query head of the KV head may be writing) and the workgroup's copy picked where it applies.
fn att_q(t: u32, i: u32) -> f32 { return cur_q[i % HD]; }

fn att_k(w: u32) -> u32 {
    let r   = w - cur_k_word;
    let cur = r < KW;
    let g   = k_cache[select(w, safe_k_word + r, cur)];
    return select(g, cur_k[min(r, KW - 1u)], cur);
}

fn att_v(w: u32) -> u32 {
    let r   = w - cur_v_word;
    let cur = r < VW;
    let g   = v_cache[select(w, safe_v_word + r, cur)];
    return select(g, cur_v[min(r, VW - 1u)], cur);
}

fn att_out(t: u32, i: u32, v: f32) { out[p.out_offset + i] = v; }

// As attention.wgsl: the output's block sums of squares for the o-projection's norm.
fn att_done(lid: u32, i: u32, o: vec2<f32>, wrote: bool) {
    if (!STATS_OUT) { return; }
    let s = team_halving_sum(lid, mul_rn(o.x, o.x), 16u) + team_halving_sum(lid, mul_rn(o.y, o.y), 16u);
    if (wrote && lid % 16u == 0u) { norm_stats[p.stats_out + i / NORM_BLOCK] = s; }
}

// The weight head (in wq's order: q heads, k heads, v heads) of part 0 (q), 1 (k) or 2 (v).
fn part_head(part: u32, h: u32) -> u32 {
    let kvh = h / (N_HEAD / N_HEAD_KV);
    return select(select(N_HEAD + N_HEAD_KV + kvh, N_HEAD + kvh, part == 1u), h, part == 0u);
}

// The weight row of slot c of the workgroup's 3 HD slots.
fn slot_row(c: u32, h: u32) -> u32 {
    return part_head(c / HD, h) * HD + slot_dim(c % HD);
}

// This invocation's words of pass ps (its team's row, lane l's vec4s).
fn prefetch_pass(ps: u32, lid: u32, h: u32) -> RowWords {
    return prefetch_row(slot_row(ps * R + lid / LANES, h), lid % LANES, LANES, K);
}

// Pass ps's row dots from every lane's partial into slot_dots (every invocation calls it: barriers).
fn pass_dots(lid: u32, ps: u32, partial: i32) {
    let d = reduce_rows(lid, partial, LANES);
    if (lid < R) { slot_dots[ps * R + lid] = d; }
    workgroupBarrier();  // lane_sums is reused by the next pass
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let h    = wid.x;
    let kvh  = h / (N_HEAD / N_HEAD_KV);
    let lane = lid % LANES;
    kv_cache_writer = h % (N_HEAD / N_HEAD_KV) == 0u;
    cur_k_word  = p.k_row + kvh * KW;
    cur_v_word  = p.v_row + kvh * VW;
    safe_k_word = p.k_safe_row + kvh * KW;
    safe_v_word = p.v_safe_row + kvh * VW;

    // The prologue's loads, then the first three passes' weights (as qkv_decode_rows: x first).
    let xin = stage_load(lid, K);
    var w0 = prefetch_pass(0u, lid, h);
    var w1 = prefetch_pass(1u, lid, h);
    var w2 = prefetch_pass(2u, lid, h);
    // The finishing invocations' scales and RoPE pairs, loaded with the weights.
    let c = 4u * lid;  // the first slot invocation lid finishes (lid < 3 HD / 4)
    var sc: array<vec2<f32>, 4>;
    var cs: vec4<f32>;
    if (lid < 3u * HD / 4u) {
        for (var e = 0u; e < 4u; e++) { sc[e] = row_scales_at(slot_row(c + e, h), p.scales_offset, p.oscales_offset); }
        cs = rope_of_unit(part_head(c / HD, h), c % HD, p.pos0);
    }
    let as_ = stage_activations_from(lid, K, xin);

    // The passes, three at a time (N_PASS is a multiple of 3): each variable's words are dotted,
    // then it takes the loads of the pass three ahead (clamped to the last: past the end they are
    // loaded again and not used, so that no load sits under a branch).
    for (var ps = 0u; ps < N_PASS; ps += 3u) {
        let d0 = row_dot(w0, lane, LANES, K);
        w0 = prefetch_pass(min(ps + 3u, N_PASS - 1u), lid, h);
        pass_dots(lid, ps, d0);
        let d1 = row_dot(w1, lane, LANES, K);
        w1 = prefetch_pass(min(ps + 4u, N_PASS - 1u), lid, h);
        pass_dots(lid, ps + 1u, d1);
        let d2 = row_dot(w2, lane, LANES, K);
        w2 = prefetch_pass(min(ps + 5u, N_PASS - 1u), lid, h);
        pass_dots(lid, ps + 2u, d2);
    }

    if (lid < 3u * HD / 4u) {
        var v: array<f32, 4>;
        for (var e = 0u; e < 4u; e++) { v[e] = row_product_scaled(slot_dots[c + e], as_, sc[e]); }
        store_qkv_unit_rope(part_head(c / HD, h), c % HD, 0u, p.pos0, v, cs);
    }
    workgroupBarrier();  // cur_q, cur_k, cur_v are complete
    attend(lid, h, 0u);
}
