requires packed_4x8_integer_dot_product;

// qkv_attention_decode: qkv_rope_decode.wgsl and attention.wgsl's one-query short form in ONE
// dispatch (one token, positions up to the short form's), so that a decoded layer pays one dispatch
// boundary fewer (~2.1 us of GPU time each on an H200). No row is computed twice: every qkv row is
// dotted once, by the same code as qkv_rope_decode (lib/qkv_decode.wgsl), and attention is
// attention.wgsl's (lib/attention_core.wgsl), so the results are those two kernels' bits.
//
// Roles, by rank (below): ranks below KV_GROUPS + N_HEAD never wait for anything:
//   [0, KV_GROUPS)                      k and v rows, KV_LANES lanes each: RoPE, the cache, and the
//                                       words of the new row to flow K / V (lib/dataflow.wgsl); they
//                                       also pull the cache rows attention reads into L2
//   [KV_GROUPS, + N_HEAD)               slots [0, HD / 2) of query head h (LANES lanes per row) to flow Q
//   [KV_GROUPS + N_HEAD, + 2 N_HEAD)    slots [HD / 2, HD) of head h, kept in workgroup memory; then
//                                       head h's attention, with the other half of q from flow Q and
//                                       the new K / V row from flow K / V (polled together into
//                                       workgroup memory first), older rows from the cache
//   from KV_GROUPS + 2 N_HEAD           pull pfw (the gate+up weight) into L2, as attention.wgsl's
//                                       prefetch workgroups do
// An attending workgroup only waits for workgroups of lower rank, which never wait. The rank is the
// workgroup id where the GPU starts workgroups in id order (GPUs do, though WebGPU does not promise
// it), so that everything an attending workgroup waits for has started; with TICKETS (software
// adapters, whose thread pools may run a later id first) it is a ticket, the order in which the
// workgroups really started (lib/dataflow.wgsl), which costs an atomic round trip before any load.
// A poll gives up after lib/dataflow.wgsl's FLOW_MAX_POLLS reads and sets the error flag, which the
// host checks.
//
//   wq, src, src_scale, rope: as qkv_rope_decode.wgsl   k_cache, v_cache: as attention.wgsl
//   out: [n_head hd] f32 (attention's output)   flow: lib/dataflow.wgsl (value slots at p.f_q,
//   p.f_k, p.f_v)   pfw: a weight to pull into L2 (any buffer when PF_WORDS is 0)
// Bindings: 0 wq, 1 src, 2 src_scale, 3 rope (read); 4 k_cache, 5 v_cache, 6 norm_stats, 7 out,
//           8 flow (read_write); 9 pfw (read); 10 params (uniform)
// Dispatch: (KV_GROUPS + 2 N_HEAD + prefetch workgroups, 1, 1).

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
// #include "lib/position_sum.wgsl"
// #include "lib/attention_core.wgsl"

override WG: u32 = 256u;
override LANES: u32 = 4u;       // lanes per q row: WG / LANES = HD / 2 rows per q workgroup
override KV_LANES: u32 = 16u;   // lanes per k / v row
override KV_GROUPS: u32 = 80u;  // 2 n_head_kv HD / (WG / KV_LANES)
override N_HEAD: u32 = 20u;
override K: u32 = 2560u;
override NORM: bool = true;
override K_F16: bool = true;
override V_F16: bool = true;
override HD: u32 = 128u;        // head_dim
// attention.wgsl's (the host sets them as it does there)
override CHUNK: u32 = 256u;
override HD_MAX: u32 = 256u;
override S: u32 = 8u;
override WPT: u32 = 8u;
override TILE: u32 = 2080u;
override TILED: bool = true;
override KPART: u32 = 256u;
override SC_MAX: u32 = 2048u;
override STATS_OUT: bool = false;
// The prefetch workgroups (attention.wgsl's PF_* for one buffer).
override PF_WORDS: u32 = 0u;
override PF_LOADS: u32 = 5u;
const PF_STRIDE: u32 = 16u;  // (the host's k_prefetch_stride_words)
override TICKETS: bool = false;
// A timing aid (results are wrong when set; $TERN_WEBGPU_CONST=QA_STOP=n): the attending workgroups
// end once their q rows are done (1), or once the other half and the new row are fetched (2).
override QA_STOP: u32 = 0u;
// qkv_rope_decode.wgsl's cache-row prefetch, by the k / v workgroups.
override KV_PREFETCH: bool = true;
override KV_PF_STRIDE: u32 = 16u;

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
    k_offset: u32,        // element index of k_cache[0, 0]
    v_offset: u32,
    n_embd_kv: u32,       // cache elements per position
    stats_in: u32,        // x's block sums of squares (STATS_IN)
    stats_out: u32,       // the output's block sums of squares (STATS_OUT)
    out_offset: u32,      // f32 index of out[0]
    scale: f32,           // 1 / sqrt(head_dim)
    tag: u32,             // lib/dataflow.wgsl: this dispatch's tag
    n_tickets: u32,       // the dispatch's workgroups (TICKETS)
    k_row: u32,           // u32 index in k_cache of position pos0's row (every KV head)
    v_row: u32,
    f_q: u32,             // flow value slots: q (n_head hd values), the new K and V rows' words
    f_k: u32,
    f_v: u32,
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;  // (lib/decode_io.wgsl's words)
@group(0) @binding(2) var<storage, read> src_scale: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<storage, read_write> flow: array<atomic<u32>>;
@group(0) @binding(9) var<storage, read> pfw: array<u32>;
@group(0) @binding(10) var<uniform> p: Params;

const ROLE_KV: u32 = 0u;
const ROLE_Q_PUT: u32 = 1u;
const ROLE_Q_ATTEND: u32 = 2u;
var<private> role: u32;
var<private> kv_group: u32;  // ROLE_KV: the workgroup's index among the k / v workgroups

var<workgroup> cur_q: array<f32, HD_MAX>;  // the attending workgroup's q (by dimension)
var<workgroup> cur_k: array<u32, HD_MAX>;  // its KV head's new K / V row words
var<workgroup> cur_v: array<u32, HD_MAX>;
var<private> cur_k_word: u32;              // u32 index in k_cache of that K row (likewise V)
var<private> cur_v_word: u32;

// lib/qkv_store.wgsl's stores and hooks.
fn k_cache_store(w: u32, word: u32) { k_cache[w / 4u][w % 4u] = word; }
fn v_cache_store(w: u32, word: u32) { v_cache[w] = word; }

fn store_q(tok: u32, i: u32, v: f32) {
    if (role == ROLE_Q_ATTEND) {
        cur_q[i % HD] = v;
    } else {
        flow_put(p.f_q + i, v);
    }
}

fn kv_word_stored(is_k: bool, w: u32, word: u32) {
    if (is_k) {
        flow_put_u32(p.f_k + (w - p.k_row), word);
    } else {
        flow_put_u32(p.f_v + (w - p.v_row), word);
    }
}

// lib/qkv_decode.wgsl's prefetch hooks: the k / v workgroups pull the cache rows [0, pos0) that
// attention reads into L2 (qkv_rope_decode.wgsl's KV_PREFETCH, spread over them alone).
fn kv_prefetch(lid: u32, g: u32) -> u32 {
    var acc = 0u;
    if (!KV_PREFETCH || role != ROLE_KV) { return acc; }
    let kw = select(p.n_embd_kv, p.n_embd_kv / 2u, K_F16);  // u32 words per cache row
    let vw = select(p.n_embd_kv, p.n_embd_kv / 2u, V_F16);
    let i  = (kv_group * WG + lid) * KV_PF_STRIDE;
    if (i < p.pos0 * kw) {
        let w = select(p.k_offset, p.k_offset / 2u, K_F16) + i;
        acc ^= k_cache[w / 4u][w % 4u];
    }
    if (i < p.pos0 * vw) { acc ^= v_cache[select(p.v_offset, p.v_offset / 2u, V_F16) + i]; }
    return acc;
}

fn weight_prefetch_at(spot: u32, lid: u32, g: u32) -> u32 { return 0u; }

// The loaded words are "used" by a store that never happens (p.rn_zero is 0).
fn kv_prefetch_use(pf: u32) {
    if (KV_PREFETCH && (pf & p.rn_zero) != 0u) { norm_stats[0] = bitcast<f32>(pf); }
}

// The other half of head h's q (flow Q) and its KV head's new K / V row words (flow K / V) into
// workgroup memory, one value per invocation and round (their workgroups have lower ranks).
fn fetch_current(lid: u32, h: u32) {
    let kvh = h / att_group();
    let kw  = select(HD, HD / 2u, K_F16);  // u32 words of one head's K row (V likewise)
    let vw  = select(HD, HD / 2u, V_F16);
    cur_k_word = p.k_row + kvh * kw;
    cur_v_word = p.v_row + kvh * vw;
    for (var j = lid; j < HD / 2u + kw + vw; j += WG) {
        if (j < HD / 2u) {
            let d = slot_dim(j);  // slots [0, HD / 2) came from the other workgroup
            cur_q[d] = bitcast<f32>(flow_get_u32(p.f_q + h * HD + d));
        } else if (j < HD / 2u + kw) {
            let i = j - HD / 2u;
            cur_k[i] = flow_get_u32(p.f_k + kvh * kw + i);
        } else {
            let i = j - HD / 2u - kw;
            cur_v[i] = flow_get_u32(p.f_v + kvh * vw + i);
        }
    }
}

// lib/attention_core.wgsl: q and the current position's rows from workgroup memory, older rows
// from the cache.
fn att_q(t: u32, i: u32) -> f32 { return cur_q[i % HD]; }

fn att_k(w: u32) -> u32 {
    let r = w - cur_k_word;
    if (r < select(HD, HD / 2u, K_F16)) { return cur_k[min(r, HD_MAX - 1u)]; }
    return k_cache[w / 4u][w % 4u];
}

fn att_k4(i: u32) -> vec4<u32> {
    let r = 4u * i - cur_k_word;  // (the row starts on a whole vec4: the host checks)
    if (r < select(HD, HD / 2u, K_F16)) {
        let b = min(r, HD_MAX - 4u);
        return vec4<u32>(cur_k[b], cur_k[b + 1u], cur_k[b + 2u], cur_k[b + 3u]);
    }
    return k_cache[i];
}

fn att_v(w: u32) -> u32 {
    let r = w - cur_v_word;
    if (r < select(HD, HD / 2u, V_F16)) { return cur_v[min(r, HD_MAX - 1u)]; }
    return v_cache[w];
}

fn att_out(t: u32, i: u32, v: f32) { out[p.out_offset + i] = v; }

// As attention.wgsl's: the output's block sums of squares for the o-projection's norm.
fn att_done(lid: u32, i: u32, o: vec2<f32>, wrote: bool) {
    if (!STATS_OUT) { return; }
    let s = team_halving_sum(lid, mul_rn(o.x, o.x), 16u) + team_halving_sum(lid, mul_rn(o.y, o.y), 16u);
    if (wrote && lid % 16u == 0u) { norm_stats[p.stats_out + i / NORM_BLOCK] = s; }
}

// attention.wgsl's prefetch_weights for the one buffer pfw.
fn prefetch_weights(lid: u32, g: u32) {
    var acc = 0u;
    let first = (g * WG * PF_LOADS + lid) * PF_STRIDE;
    for (var u = 0u; u < PF_LOADS; u++) {
        let i = first + u * WG * PF_STRIDE;
        if (i < PF_WORDS) { acc ^= pfw[i]; }
    }
    if ((acc & p.rn_zero) != 0u) { norm_stats[0] = bitcast<f32>(acc); }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    var g = wid.x;
    if (TICKETS) { g = flow_ticket(lid); }
    if (g < KV_GROUPS) {
        role     = ROLE_KV;
        kv_group = g;
        // (qkv_decode_rows' workgroup index counts groups of WG / KV_LANES slots from the first q row.)
        qkv_decode_rows(lid, N_HEAD * HD / (WG / KV_LANES) + g, KV_LANES, K, p.scales_offset, p.oscales_offset);
        return;
    }
    let qg = g - KV_GROUPS;
    if (qg < 2u * N_HEAD) {
        let h    = qg % N_HEAD;
        let half = qg / N_HEAD;
        role = select(ROLE_Q_PUT, ROLE_Q_ATTEND, half == 1u);
        qkv_decode_rows(lid, 2u * h + half, LANES, K, p.scales_offset, p.oscales_offset);
        if (half == 1u && QA_STOP != 1u) {
            fetch_current(lid, h);
            workgroupBarrier();  // (cur_q, cur_k, cur_v)
            if (QA_STOP == 2u) {
                if (lid < HD) { out[p.out_offset + h * HD + lid] = cur_q[lid] + bitcast<f32>(cur_k[lid / 2u] ^ cur_v[lid / 2u]); }
                return;
            }
            attend(lid, h, 0u);
        }
        return;
    }
    prefetch_weights(lid, qg - 2u * N_HEAD);
}
