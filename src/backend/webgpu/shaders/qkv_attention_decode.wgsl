requires packed_4x8_integer_dot_product;

// qkv_attention_decode: qkv_rope_decode.wgsl and attention.wgsl for ONE token as one dispatch, one
// workgroup per query head. Attention of head h needs only q of head h and the new K / V rows of its
// KV head, so workgroup h computes those three heads' rows itself (the fused norm prologue of
// lib/act_stage.wgsl, then the rows of lib/ternary_decode.wgsl), applies RoPE, keeps q and the new K /
// V words in workgroup memory and runs attention (lib/attention_core.wgsl) with the current
// position's K / V rows taken from there and older positions from the cache. The workgroups of one
// KV head compute the same K / V rows (the same bits: the same code); the first of them appends them
// to the cache. Same numerics as the two kernels, so the same bits; one dispatch boundary less per
// layer, and attention's loads start while the projections run.
//
//   wq: codes [N][K/64] vec4<u32> | scales [N] | output scales [N], N = (n_head + 2 n_head_kv) hd
//   src: x [K] f32 bits   src_scale: attn_norm weights [K] f32   rope: [pos][n_rot/2] (cos, sin)
//   k_cache, v_cache: as qkv_rope.wgsl   out: [n_head hd] f32 (attention's output)
// Bindings: 0 wq, 1 src, 2 src_scale, 3 rope (read); 4 k_cache, 5 v_cache, 6 out (read_write);
//           7 params (uniform)
// Dispatch: (n_head, 1, 1). Passes of ROWS = WG / LANES slots (lib/qkv_store.wgsl's slot order;
// ROWS divides head_dim): head h's q slots, then its KV head's k slots, then v slots; thread u <
// ROWS / 4 finishes slots 4u .. 4u + 3 of a pass. Pass i + AHEAD's weight rows are loaded while
// pass i is summed.

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/act_stage.wgsl"
// #include "lib/ternary_decode.wgsl"
// #include "lib/decode_io.wgsl"
// #include "lib/qkv_store.wgsl"
// #include "lib/attention_core.wgsl"

override WG: u32 = 512u;      // a power of two: attention's threads, ROWS * LANES
override LANES: u32 = 4u;     // a power of two, >= K / 640
override K: u32 = 2560u;      // n_embd, a multiple of 64, <= 32 WG
override NORM: bool = true;   // (always: the norm is fused)
override K_F16: bool = true;
override V_F16: bool = true;
override CHUNK: u32 = 256u;
override HD_MAX: u32 = 256u;
override HD: u32 = 128u;       // head_dim
override S: u32 = 8u;          // attention.wgsl's tiling
override WPT: u32 = 8u;
override TILE: u32 = 4160u;
override TILED: bool = true;
override KPART: u32 = 512u;
override SC_MAX: u32 = 1024u;
override AHEAD: u32 = 2u;      // passes whose weight rows are in flight (1 or 2)

struct Params {
    eps: f32,
    src_offset: u32,      // f32 index of x[0]
    scale_offset: u32,    // f32 index of the norm weights
    scales_offset: u32,   // u32 index of the row scales in wq
    oscales_offset: u32,  // u32 index of the output scales in wq
    head_dim: u32,
    n_rot: u32,
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,            // position of the token
    n_embd_kv: u32,       // cache elements per position
    k_offset: u32,        // element index of k_cache[0, 0]
    v_offset: u32,
    out_offset: u32,      // f32 index of out[0]
    scale: f32,           // 1 / sqrt(head_dim)
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read> src_scale: array<f32>;
@group(0) @binding(3) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> cur_q: array<f32, HD>;   // q of head h after RoPE
var<workgroup> cur_k: array<u32, HD>;   // the new K row of the KV head, as cache words
var<workgroup> cur_v: array<u32, HD>;
var<workgroup> lane_sums_b: array<i32, WG>;  // lane partials of odd passes (even: lane_sums)
var<private> cur_k_word: u32;  // u32 index in k_cache of the new K row's first word
var<private> cur_v_word: u32;
var<private> writes_cache: bool;

// lib/qkv_store.wgsl's hooks.
fn store_q(tok: u32, i: u32, v: f32) { cur_q[i % p.head_dim] = v; }
fn kv_to_cache() -> bool { return writes_cache; }
fn kv_word_stored(is_k: bool, w: u32, word: u32) {
    if (is_k) {
        cur_k[w - cur_k_word] = word;
    } else {
        cur_v[w - cur_v_word] = word;
    }
}

// lib/attention_core.wgsl's hooks: the current position's rows from workgroup memory.
fn att_q(t: u32, i: u32) -> f32 { return cur_q[i % p.head_dim]; }
fn att_k(w: u32) -> u32 {
    let r = w - cur_k_word;
    if (r < select(HD, HD / 2u, K_F16)) { return cur_k[r]; }
    return k_cache[w];
}
fn att_v(w: u32) -> u32 {
    let r = w - cur_v_word;
    if (r < select(HD, HD / 2u, V_F16)) { return cur_v[r]; }
    return v_cache[w];
}
fn att_out(t: u32, i: u32, v: f32) { out[p.out_offset + i] = v; }

// The qkv head (q heads, then k heads, then v heads) and first slot of pass i of workgroup h.
fn pass_head(i: u32, h: u32, kvh: u32) -> u32 {
    let which = i / (p.head_dim / (WG / LANES));
    if (which == 0u) { return h; }
    if (which == 1u) { return p.n_head + kvh; }
    return p.n_head + p.n_head_kv + kvh;
}
fn pass_slot0(i: u32) -> u32 {
    let rows = WG / LANES;
    return (i % (p.head_dim / rows)) * rows;
}

// Weight words of this thread's row in pass i (nothing past the last pass).
fn pass_row(i: u32, n_pass: u32, lid: u32, h: u32, kvh: u32) -> RowWords {
    var w: RowWords;
    if (i < n_pass) {
        let row = pass_head(i, h, kvh) * p.head_dim + slot_dim(pass_slot0(i) + lid / LANES);
        w = prefetch_row(row, lid % LANES, LANES, K);
    }
    return w;
}

// What finishing thread u (< ROWS / 4) needs after pass i's dots: its four rows' scales, RoPE pairs.
struct Finish {
    sc: array<vec2<f32>, 4>,
    cs: vec4<f32>,
}
fn pass_finish(i: u32, n_pass: u32, lid: u32, h: u32, kvh: u32) -> Finish {
    var f: Finish;
    if (i < n_pass && lid < WG / LANES / 4u) {
        let head = pass_head(i, h, kvh);
        let j    = pass_slot0(i) + 4u * lid;
        for (var e = 0u; e < 4u; e++) { f.sc[e] = row_scales(head * p.head_dim + slot_dim(j + e)); }
        f.cs = rope_of_unit(head, j, p.pos0);
    }
    return f;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let h      = wid.x;
    let hd     = p.head_dim;
    let group  = p.n_head / p.n_head_kv;
    let kvh    = h / group;
    let rows   = WG / LANES;
    let n_pass = 3u * (hd / rows);
    let e_row  = p.pos0 * p.n_embd_kv + kvh * hd;  // cache element index of the new rows
    cur_k_word   = select(p.k_offset + e_row, (p.k_offset + e_row) / 2u, K_F16);
    cur_v_word   = select(p.v_offset + e_row, (p.v_offset + e_row) / 2u, V_F16);
    writes_cache = h % group == 0u;

    // x and the norm weights first (the norm is the longer chain), then the first passes' rows.
    let xin = stage_load(lid, K);
    var w0  = pass_row(0u, n_pass, lid, h, kvh);
    var w1: RowWords;
    if (AHEAD >= 2u) { w1 = pass_row(1u, n_pass, lid, h, kvh); }
    var f0 = pass_finish(0u, n_pass, lid, h, kvh);
    let as_ = stage_activations_from(lid, K, xin);

    for (var i = 0u; i < n_pass; i++) {
        let w = w0;
        let f = f0;
        if (AHEAD >= 2u) {
            w0 = w1;
            w1 = pass_row(i + 2u, n_pass, lid, h, kvh);
        } else {
            w0 = pass_row(i + 1u, n_pass, lid, h, kvh);
        }
        f0 = pass_finish(i + 1u, n_pass, lid, h, kvh);
        // Lane partials in one of two arrays by parity: a pass's barrier orders its writes after
        // every read of the pass before the last.
        let partial = row_dot(w, lid % LANES, LANES, K);
        if (i % 2u == 0u) { lane_sums[lid] = partial; } else { lane_sums_b[lid] = partial; }
        workgroupBarrier();
        if (lid < rows / 4u) {
            var v: array<f32, 4>;
            for (var e = 0u; e < 4u; e++) {
                var dot = 0;
                let r0  = (4u * lid + e) * LANES;
                if (i % 2u == 0u) {
                    for (var l = 0u; l < LANES; l++) { dot += lane_sums[r0 + l]; }
                } else {
                    for (var l = 0u; l < LANES; l++) { dot += lane_sums_b[r0 + l]; }
                }
                v[e] = row_product_scaled(dot, as_, f.sc[e]);
            }
            store_qkv_unit_rope(pass_head(i, h, kvh), pass_slot0(i) + 4u * lid, 0u, p.pos0, v, f.cs);
        }
    }
    workgroupBarrier();  // cur_q, cur_k, cur_v complete
    attend(lid, h, 0u);
}
