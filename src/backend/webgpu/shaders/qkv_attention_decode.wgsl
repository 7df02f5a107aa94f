requires packed_4x8_integer_dot_product;

// qkv_attention_decode: qkv_rope_decode.wgsl and attention.wgsl for ONE token in one dispatch, with
// the numerics of both (their libraries), so one dispatch boundary per layer less.
//
// Attention of query head h needs only its own q rows and its KV head's k and v rows: 3 HD / ROWS
// qkv workgroups (CONTRIB). Each counts itself in a counter of every query head it feeds (one for a
// q workgroup, once its rows are out; the G query heads of its KV head for a k or v workgroup, as it
// starts); the workgroup whose count completes a head's resets that counter and computes the head's
// attention, polling the words it needs. Every word polled comes from a workgroup that has counted,
// so has started, and so gets written: no poll waits for a workgroup that may not have started, and
// any scheduling order is safe.
//
// WGSL has no device-scope fence, so q and the new K / V row words cross workgroups in
// lib/dataflow.wgsl's tagged words (flow_put / flow_get: a reader polls until the tag is the
// dispatch's); the counter only says who goes on. The attending workgroup writes the new K / V row
// words into the cache itself (the same bits the qkv workgroup stores there for later steps) and
// reads them back after a storage barrier, so attention's loads see them. Workgroups are numbered so
// that the k and v rows come first (they feed G heads each), which makes a q workgroup the likely
// last contributor; a workgroup that completes several heads attends them one after another.
//
//   wq, src, src_scale, rope, k_cache, v_cache, norm_stats: as qkv_rope_decode.wgsl
//   out: [n_head hd] f32, the attention output (attention.wgsl's out for one token)
//   flow: lib/dataflow.wgsl words: q at value f_q, the new K / V row words at f_k / f_v (u32 values),
//         a counter per query head at word f_cnt + h (0 between dispatches)
//   pfw: a later kernel's weight to pull into L2 (lib/weight_prefetch.wgsl)
// Bindings: 0 wq, 1 src, 2 src_scale, 3 rope (read); 4 out, 5 k_cache, 6 v_cache, 7 norm_stats,
//           8 flow (read_write); 9 pfw (read); 10 params (uniform)
// Dispatch: (QKV_GROUPS, 1, 1).

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/dataflow.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/act_stage.wgsl"
// #include "lib/ternary_decode.wgsl"
// #include "lib/decode_io.wgsl"
// #include "lib/qkv_store.wgsl"
// #include "lib/qkv_decode.wgsl"
// #include "lib/weight_prefetch.wgsl"
// #include "lib/kv_prefetch.wgsl"
// #include "lib/position_sum.wgsl"
// #include "lib/attention_core.wgsl"

// qkv_rope_decode.wgsl's:
override WG: u32 = 256u;
override LANES: u32 = 16u;
override K: u32 = 2560u;
override NORM: bool = true;
override K_F16: bool = true;
override V_F16: bool = true;
override HD: u32 = 128u;
// attention.wgsl's (one query):
override CHUNK: u32 = 256u;
override HD_MAX: u32 = 128u;
override S: u32 = 8u;
override WPT: u32 = 8u;
override TILE: u32 = 2080u;
override TILED: bool = true;
override KPART: u32 = 256u;
override SC_MAX: u32 = 512u;
override STATS_OUT: bool = false;
// The grid: QKV_GROUPS workgroups of WG / LANES rows, the first Q_GROUPS of the slot order (q
// heads) dispatched last.
override QKV_GROUPS: u32 = 240u;
override Q_GROUPS: u32 = 160u;

struct Params {
    eps: f32,
    src_offset: u32,
    scale_offset: u32,
    scales_offset: u32,   // u32 index of the row scales in wq
    oscales_offset: u32,  // u32 index of the output scales in wq
    head_dim: u32,
    n_rot: u32,
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,            // position of the token
    k_offset: u32,        // element index of the layer's k_cache[0, 0] (v likewise)
    v_offset: u32,
    n_embd_kv: u32,
    stats_in: u32,        // f32 index in norm_stats of x's block sums (STATS_IN)
    stats_out: u32,       // f32 index in norm_stats where the output's block sums go (STATS_OUT)
    out_offset: u32,      // f32 index of out[0]
    scale: f32,           // 1 / sqrt(head_dim)
    tag: u32,             // lib/dataflow.wgsl: this dispatch's tag (1..65535)
    n_tickets: u32,       // (lib/dataflow.wgsl's tickets: unused here)
    k_row: u32,           // u32 index of the position's K row (all KV heads) in k_cache
    v_row: u32,
    f_q: u32,             // flow value slots of q, the K row words and the V row words
    f_k: u32,
    f_v: u32,
    f_cnt: u32,           // flow word of query head 0's counter
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read> src_scale: array<f32>;
@group(0) @binding(3) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(8) var<storage, read_write> flow: array<atomic<u32>>;
@group(0) @binding(9) var<storage, read> pfw: array<u32>;
@group(0) @binding(10) var<uniform> p: Params;

var<private> prefetched: u32;               // kv_prefetch's words, kept until the kernel's end
var<workgroup> cur_q: array<f32, HD_MAX>;   // the attended head's q
var<workgroup> heads_done: atomic<u32>;     // bit i: this workgroup completed its i-th head
var<workgroup> heads_mask: u32;

// lib/qkv_store.wgsl: q and the new K / V row words go to flow (K / V also to the cache).
fn store_q(tok: u32, i: u32, v: f32) { flow_put(p.f_q + i, v); }

fn kv_word_stored(is_k: bool, w: u32, word: u32) {
    if (is_k) {
        flow_put_u32(p.f_k + (w - p.k_row), word);
    } else {
        flow_put_u32(p.f_v + (w - p.v_row), word);
    }
}

// lib/qkv_decode.wgsl's hooks: the loads go out after the weight loads and are used only at the end
// of main, after attention (qkv_decode_rows must not wait for them).
fn kv_prefetch(lid: u32, g: u32) -> u32 { return kv_cache_prefetch(lid, g); }
fn kv_prefetch_use(pf: u32) { prefetched = pf; }

// lib/attention_core.wgsl: q from cur_q, the cache (its current row rewritten by attend_head).
fn att_q(t: u32, i: u32) -> f32 { return cur_q[i % HD]; }
fn att_k(w: u32) -> u32 { return k_cache[w]; }
fn att_v(w: u32) -> u32 { return v_cache[w]; }
fn att_out(t: u32, i: u32, v: f32) { out[p.out_offset + i] = v; }

// attention.wgsl's norm statistics of the output (STATS_OUT): the block of 32 elements that 16
// neighbouring invocations stored, summed in the halving order.
fn att_done(lid: u32, i: u32, o: vec2<f32>, wrote: bool) {
    if (!STATS_OUT) { return; }
    let s = team_halving_sum(lid, mul_rn(o.x, o.x), 16u) + team_halving_sum(lid, mul_rn(o.y, o.y), 16u);
    if (wrote && lid % 16u == 0u) { norm_stats[p.stats_out + i / NORM_BLOCK] = s; }
}

// Attention of query head h by this workgroup, every one of whose contributors has counted itself.
fn attend_head(lid: u32, h: u32) {
    let kvh = h / (p.n_head / p.n_head_kv);
    for (var d = lid; d < HD; d += WG) { cur_q[d] = flow_get(p.f_q + h * HD + d); }
    let kw = select(HD, HD / 2u, K_F16);  // u32 words of one KV head's row (V likewise)
    let vw = select(HD, HD / 2u, V_F16);
    for (var i = lid; i < kw; i += WG) { k_cache[p.k_row + kvh * kw + i] = flow_get_u32(p.f_k + kvh * kw + i); }
    for (var i = lid; i < vw; i += WG) { v_cache[p.v_row + kvh * vw + i] = flow_get_u32(p.f_v + kvh * vw + i); }
    storageBarrier();    // the row words are visible to this workgroup's loads of the cache
    workgroupBarrier();  // and cur_q to every invocation
    attend(lid, h, 0u);
}

// The counter of query head `first + lid` (lid < n_fed) gets this workgroup's count; true when it
// completed it (then the counter is reset for the next dispatch).
fn count_in(lid: u32, first: u32, n_fed: u32, contrib: u32) -> bool {
    if (lid >= n_fed) { return false; }
    let c = p.f_cnt + first + lid;
    if (atomicAdd(&flow[c], 1u) + 1u == contrib) {
        atomicStore(&flow[c], 0u);
        return true;
    }
    return false;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (lid == 0u) { atomicStore(&heads_done, 0u); }
    let g = (wid.x + Q_GROUPS) % QKV_GROUPS;  // k and v rows first

    // The query heads this workgroup feeds: its own (q rows), or the G of its KV head (k, v rows).
    let rows    = WG / LANES;
    let head    = g * rows / HD;
    let group   = p.n_head / p.n_head_kv;
    let contrib = 3u * (HD / rows);
    let is_kv   = head >= p.n_head;
    var first   = head;
    var n_fed   = 1u;
    if (is_kv) {
        first = ((head - p.n_head) % p.n_head_kv) * group;
        n_fed = group;
    }
    // A k or v workgroup counts itself as it starts (its words may come later: whoever attends
    // polls them, and a workgroup that has counted has started, so the poll ends), so that the last
    // count, the one that picks the attending workgroup, is nearly always a q workgroup's: a k or v
    // workgroup that completed its G heads would attend them one after another (G times the
    // latency; H100 tg128 536 tokens/s when every workgroup counted at its end).
    var completed = false;
    if (is_kv) { completed = count_in(lid, first, n_fed, contrib); }

    qkv_decode_rows(lid, g, LANES, K, p.scales_offset, p.oscales_offset);
    workgroupBarrier();  // every invocation's flow words are out before the workgroup counts itself
    if (!is_kv) { completed = count_in(lid, first, n_fed, contrib); }
    if (completed) { atomicOr(&heads_done, 1u << lid); }
    workgroupBarrier();
    if (lid == 0u) { heads_mask = atomicLoad(&heads_done); }
    let done = workgroupUniformLoad(&heads_mask);
    for (var i = 0u; i < n_fed; i++) {
        if ((done & (1u << i)) != 0u) {
            attend_head(lid, first + i);
            workgroupBarrier();  // workgroup memory is reused by the next head
        }
    }
    if ((prefetched & p.rn_zero) != 0u) { norm_stats[0] = bitcast<f32>(prefetched); }
}
