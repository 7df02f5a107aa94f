requires packed_4x8_integer_dot_product;

// layer_decode: one whole BitNet decoder layer for ONE token (decode) in one dispatch: the five
// decode kernels (qkv_rope_decode, attention, bitlinear_decode for the o-proj, gate_up_decode,
// bitlinear_decode for the down projection) as five phases of one grid, with their numerics
// unchanged (they share lib/act_stage.wgsl, lib/ternary_decode.wgsl, lib/qkv_store.wgsl and
// lib/attention_core.wgsl with those kernels). Values pass between phases through
// lib/dataflow.wgsl's tagged words, so a phase starts the moment its inputs exist instead of after
// a dispatch boundary (~2.1 us of GPU time on an H200), and a later phase's weight loads are issued while the
// phases before it still run.
//
// Phases, by ticket (the order workgroups started in; each waits only for lower tickets):
//   A  qkv + RoPE (qkv_rope_decode): x (plain, from the previous dispatch) -> attn_norm prologue
//      -> q to flow Q, k and v to the cache and to flow K / V
//   B  attention, one head per workgroup: q from Q, the current position's K and V rows from flow
//      (the cache holds the positions before it) -> flow ATT
//   N1 one workgroup: ATT -> attn_sub_norm + int8 quantization (rms_norm_quant) -> flow A1
//   C  o-proj: A1 -> x + W_o a -> flow XM
//   N2 one workgroup: XM -> ffn_norm + quantization -> flow A2
//   D  gate + up: A2 -> act(g) * u -> flow GU
//   N3 one workgroup: GU -> ffn_sub_norm + quantization -> flow A3
//   E  down: A3 -> XM + W_down a -> x (plain)
// The norms run once (N1..N3) rather than in every consumer's prologue: each of the hundreds of
// consumer workgroups then reads K / 4 activation words instead of K values, which matters because
// every flow read is a 4-byte atomic load served by L2 (on an H200 this took decode from 242 to 321
// tokens/s).
// E overwrites x after every reader of it in this dispatch (A's prologues, C's residuals) is done:
// E needs all of A3 <- GU <- A2 <- XM <- A1 <- ATT <- all of A.
//
//   wq_*: the four weights (webgpu_weights.h layout)   norms: [attn_norm | attn_sub_norm |
//   ffn_norm | ffn_sub_norm] f32   rope, k_cache, v_cache: as qkv_rope_decode.wgsl   x: [n_embd] f32
//   flow: lib/dataflow.wgsl, value slots at p.f_*
// Bindings: 0..3 wq_qkv, wq_o, wq_gu, wq_down, 4 norms, 5 rope (read); 6 k_cache, 7 v_cache, 8 x,
//           9 flow (read_write); 10 params (uniform)
// Dispatch: (n_tickets, 1, 1).

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/dataflow.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/act_stage.wgsl"
// #include "lib/ternary_decode.wgsl"
// #include "lib/qkv_store.wgsl"
// #include "lib/qkv_decode.wgsl"
// #include "lib/position_sum.wgsl"
// #include "lib/attention_core.wgsl"

override WG: u32 = 256u;      // every phase's workgroup (a power of two)
override K: u32 = 2560u;      // the widest input staged (max of n_embd, n_embd_q, n_ff)
// Each matmul phase's input width and lanes per row as constants, so that its loops unroll to the
// exact trip counts and hold only the registers they need (with run-time values every phase held
// the widest phase's arrays: 211 instead of 242 tokens/s on an H200).
override N_EMBD: u32 = 2560u;
override N_EMBD_Q: u32 = 2560u;
override N_FF: u32 = 2560u;
override LANES_QKV: u32 = 8u;
override LANES_O: u32 = 8u;
override LANES_GU: u32 = 8u;
override LANES_DOWN: u32 = 8u;
override NORM: bool = true;   // (lib/act_stage.wgsl: always the fused prologue here)
override K_F16: bool = true;
override V_F16: bool = true;
// Attention's (lib/attention_core.wgsl, attention.wgsl):
override CHUNK: u32 = 256u;
override HD_MAX: u32 = 128u;
override HD: u32 = 128u;
override S: u32 = 8u;
override WPT: u32 = 8u;
override TILE: u32 = 2080u;
override TILED: bool = true;
override KPART: u32 = 256u;
override SC_MAX: u32 = 256u;

struct Params {
    tag: u32,             // lib/dataflow.wgsl
    n_tickets: u32,
    a_end: u32,           // phase boundaries in tickets: A [0, a_end), B [a_end, b_end), N1 b_end,
    b_end: u32,           // C [b_end + 1, c_end), N2 c_end, D [c_end + 1, d_end), N3 d_end,
    c_end: u32,           // E [d_end + 1, n_tickets)
    d_end: u32,
    eps: f32,
    attn_norm: u32,       // f32 index of each norm in `norms`
    attn_sub_norm: u32,
    ffn_norm: u32,
    ffn_sub_norm: u32,
    qkv_scales: u32,      // u32 index of each weight's row scales / output scales
    qkv_oscales: u32,
    o_scales: u32,
    o_oscales: u32,
    gu_scales: u32,
    gu_oscales: u32,
    down_scales: u32,
    down_oscales: u32,
    x_offset: u32,        // f32 index of x[0]
    activation: u32,      // 0: relu², 1: silu
    head_dim: u32,        // lib/qkv_store.wgsl, lib/attention_core.wgsl
    n_rot: u32,
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,
    n_embd_kv: u32,
    k_offset: u32,        // element index of the layer's k_cache[0, 0] (v likewise)
    v_offset: u32,
    scale: f32,
    k_row: u32,           // u32 index of the current position's K row (all KV heads) in k_cache
    v_row: u32,
    f_q: u32,             // flow value slots
    f_k: u32,
    f_v: u32,
    f_att: u32,
    f_xm: u32,
    f_gu: u32,
    f_a1: u32,            // int8 activation words (K / 4) and then their scale
    f_a2: u32,
    f_a3: u32,
    done_qkv: u32,        // completion counter goals (lib/dataflow.wgsl): counters 0 .. 6 are
    done_att: u32,        // A, B, N1, C, N2, D, N3
    done_n1: u32,
    done_o: u32,
    done_n2: u32,
    done_gu: u32,
    done_n3: u32,
    blocks_o: u32,        // row blocks per workgroup of phases C, D, E
    blocks_gu: u32,
    blocks_down: u32,
    last_phase: u32,      // a timing aid: phases after this one (A = 0 .. E = 7) return at once
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> wq_qkv: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> wq_o: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> wq_gu: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> wq_down: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> norms: array<f32>;
@group(0) @binding(5) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(8) var<storage, read_write> x: array<f32>;
@group(0) @binding(9) var<storage, read_write> flow: array<atomic<u32>>;
@group(0) @binding(10) var<uniform> p: Params;

const PHASE_QKV: u32 = 0u;
const PHASE_O: u32 = 1u;
const PHASE_GU: u32 = 2u;
const PHASE_DOWN: u32 = 3u;
const PHASE_NORM: u32 = 4u;

var<private> phase: u32;        // which phase runs: picks the weight and the inputs
var<private> in_slot: u32;      // flow slot of the values a norm phase (N1..N3) stages
var<private> norm_at: u32;      // index of the phase's norm in `norms`
var<private> cur_k_word: u32;   // attention: u32 index of this head's current K row in k_cache
var<private> cur_v_word: u32;

var<workgroup> team_dots: array<i32, WG>;       // gate-up teams
var<workgroup> cur_q: array<f32, HD_MAX>;       // attention: this head's q
var<workgroup> cur_k: array<u32, HD_MAX>;       // attention: this head's current K / V row words
var<workgroup> cur_v: array<u32, HD_MAX>;

// lib/ternary_decode.wgsl: the phase's weight.
fn weight_vec4(i: u32) -> vec4<u32> {
    switch (phase) {
        case 0u: { return wq_qkv[i]; }
        case 1u: { return wq_o[i]; }
        case 2u: { return wq_gu[i]; }
        default: { return wq_down[i]; }
    }
}

// lib/act_stage.wgsl: x (plain, phase A) or a flow slot, and the phase's norm.
fn stage_x4(j: u32) -> vec4<f32> {
    if (phase == PHASE_QKV) {
        let o = p.x_offset + 4u * j;
        return vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
    }
    let v = in_slot + 4u * j;
    return vec4<f32>(flow_read(v), flow_read(v + 1u), flow_read(v + 2u), flow_read(v + 3u));
}

fn stage_nw4(j: u32) -> vec4<f32> {
    let n = norm_at + 4u * j;
    return vec4<f32>(norms[n], norms[n + 1u], norms[n + 2u], norms[n + 3u]);
}

fn stage_qword(j: u32) -> u32 { return 0u; }  // (the matmul phases stage with stage_flow_acts)
fn stage_qscale() -> f32 { return 1.0; }
fn stage_stats(b: u32) -> f32 { return 0.0; }  // (STATS_IN stays off: the phases sum x's squares)

// lib/qkv_store.wgsl: q and the new K / V row words go to flow (K / V also to the cache).
fn store_q(tok: u32, i: u32, v: f32) { flow_put(p.f_q + i, v); }

// lib/qkv_decode.wgsl's cache prefetch hooks: none here.
fn kv_prefetch(lid: u32, g: u32) -> u32 { return 0u; }
fn weight_prefetch_at(spot: u32, lid: u32, g: u32) -> u32 { return 0u; }
fn kv_prefetch_use(pf: u32) {}

fn kv_word_stored(is_k: bool, w: u32, word: u32) {
    if (is_k) {
        flow_put_u32(p.f_k + (w - p.k_row), word);
    } else {
        flow_put_u32(p.f_v + (w - p.v_row), word);
    }
}

// lib/attention_core.wgsl: q and the current position's rows staged from flow, older rows from
// the cache, the output to flow ATT.
fn att_q(t: u32, i: u32) -> f32 { return cur_q[i % p.head_dim]; }

fn att_k(w: u32) -> u32 {
    let r = w - cur_k_word;
    if (r < HD_MAX && r < select(HD, HD / 2u, K_F16)) { return cur_k[r]; }
    return k_cache[w];
}

fn att_k4(i: u32) -> vec4<u32> {
    return vec4<u32>(att_k(4u * i), att_k(4u * i + 1u), att_k(4u * i + 2u), att_k(4u * i + 3u));
}

fn att_v(w: u32) -> u32 {
    let r = w - cur_v_word;
    if (r < HD_MAX && r < select(HD, HD / 2u, V_F16)) { return cur_v[r]; }
    return v_cache[w];
}

fn att_out(t: u32, i: u32, v: f32) { flow_put(p.f_att + i, v); }
fn att_done(lid: u32, i: u32, o: vec2<f32>, wrote: bool) {}

// Phase A: qkv_rope_decode.wgsl's main for workgroup `g`.
fn phase_qkv(lid: u32, g: u32) {
    phase   = PHASE_QKV;
    norm_at = p.attn_norm;
    qkv_decode_rows(lid, g, LANES_QKV, N_EMBD, p.qkv_scales, p.qkv_oscales);
    flow_done(lid, 0u);
}

// Phase B: attention of head h.
fn phase_attention(lid: u32, h: u32) {
    let hd   = p.head_dim;
    let kvh  = h / (p.n_head / p.n_head_kv);
    let kw   = select(hd, hd / 2u, K_F16);  // u32 words of one head's K row (V likewise)
    let vw   = select(hd, hd / 2u, V_F16);
    cur_k_word = p.k_row + kvh * kw;
    cur_v_word = p.v_row + kvh * vw;
    flow_wait_done(lid, 0u, p.done_qkv);
    for (var d = lid; d < hd; d += WG) { cur_q[d] = flow_get(p.f_q + h * hd + d); }
    for (var i = lid; i < kw; i += WG) { cur_k[i] = flow_get_u32(p.f_k + kvh * kw + i); }
    for (var i = lid; i < vw; i += WG) { cur_v[i] = flow_get_u32(p.f_v + kvh * vw + i); }
    workgroupBarrier();
    attend(lid, h, 0u);
    flow_done(lid, 1u);
}

// The activations of a matmul phase from N1..N3's words (one checked read of each word, the scale
// polled by every invocation), staged as lib/act_stage.wgsl does; returns the scale.
fn stage_flow_acts(lid: u32, k: u32, slot: u32) -> f32 {
    let words = flow_fetch_words(lid, slot, k / 4u);
    for (var i = 0u; i < 8u; i++) {
        let j = lid + i * WG;
        if (j < k / 4u) { acts[act_slot(j, k)][j % 4u] = words[i]; }
    }
    let qs = flow_get(slot + k / 4u);
    workgroupBarrier();
    return qs;
}

// Phases C and E: bitlinear_decode.wgsl's main (accumulating into the residual) for BLOCKS blocks
// of WG / lanes rows from block g * BLOCKS on: fewer, longer workgroups read the activations fewer
// times. The next block's weights are loaded while the current one is dotted.
fn phase_bitlinear(lid: u32, g: u32, down: bool) {
    phase   = select(PHASE_O, PHASE_DOWN, down);
    let k      = select(N_EMBD_Q, N_FF, down);
    let lanes  = select(LANES_O, LANES_DOWN, down);
    let blocks = select(p.blocks_o, p.blocks_down, down);
    let rows   = WG / lanes;
    let lane   = lid % lanes;
    let first  = g * blocks * rows;
    var w: RowWords;
    if (first + lid / lanes < N_EMBD) { w = prefetch_row(first + lid / lanes, lane, lanes, k); }
    flow_wait_done(lid, select(2u, 6u, down), select(p.done_n1, p.done_n3, down));
    let as_ = stage_flow_acts(lid, k, select(p.f_a1, p.f_a3, down));
    for (var b = 0u; b < blocks; b++) {
        let r0  = first + b * rows;
        let cur = w;
        let nxt = r0 + rows + lid / lanes;
        if (b + 1u < blocks && nxt < N_EMBD) { w = prefetch_row(nxt, lane, lanes, k); }
        var partial = 0;
        if (r0 + lid / lanes < N_EMBD) { partial = row_dot(cur, lane, lanes, k); }
        let dot = reduce_rows(lid, partial, lanes);
        let ro  = r0 + lid;
        if (lid < rows && ro < N_EMBD) {
            if (down) {
                let v = row_product_at(dot, ro, as_, p.down_scales, p.down_oscales);
                x[p.x_offset + ro] = flow_get(p.f_xm + ro) + v;
            } else {
                let v = row_product_at(dot, ro, as_, p.o_scales, p.o_oscales);
                flow_put(p.f_xm + ro, x[p.x_offset + ro] + v);
            }
        }
        workgroupBarrier();  // lane_sums is reused by the next block
    }
    if (!down) { flow_done(lid, 3u); }
}

// Phase D: gate_up_decode.wgsl's main for BLOCKS blocks of WG / lanes / 2 outputs, as above.
fn phase_gate_up(lid: u32, g: u32) {
    phase   = PHASE_GU;
    let lanes  = LANES_GU;
    let outs   = WG / lanes / 2u;
    let team   = lid / lanes;
    let lane   = lid % lanes;
    let blocks = p.blocks_gu;
    let first  = g * blocks * outs;
    var w: RowWords;
    let out0 = first + team % outs;
    if (out0 < N_FF) { w = prefetch_row(select(out0, N_FF + out0, team >= outs), lane, lanes, N_EMBD); }
    flow_wait_done(lid, 4u, p.done_n2);
    let as_ = stage_flow_acts(lid, N_EMBD, p.f_a2);
    for (var b = 0u; b < blocks; b++) {
        let o0  = first + b * outs;
        let cur = w;
        let nxt = o0 + outs + team % outs;
        if (b + 1u < blocks && nxt < N_FF) { w = prefetch_row(select(nxt, N_FF + nxt, team >= outs), lane, lanes, N_EMBD); }
        var partial = 0;
        if (o0 + team % outs < N_FF) { partial = row_dot(cur, lane, lanes, N_EMBD); }
        let dot = reduce_rows(lid, partial, lanes);
        team_dots[lid] = dot;
        workgroupBarrier();
        let o = o0 + lid;
        if (lid < outs && o < N_FF) {
            let gv = row_product_at(dot, o, as_, p.gu_scales, p.gu_oscales);
            let uv = row_product_at(team_dots[outs + lid], N_FF + o, as_, p.gu_scales, p.gu_oscales);
            flow_put(p.f_gu + o, ffn_gate(gv, uv, p.activation));
        }
        workgroupBarrier();  // lane_sums and team_dots are reused by the next block
    }
    flow_done(lid, 5u);
}

// Phases N1..N3: the norm + int8 quantization of a flow vector of k values (rms_norm_quant.wgsl's
// numerics, lib/act_stage.wgsl), once, published as k / 4 activation words and the scale.
fn phase_norm(lid: u32, src: u32, nw: u32, k: u32, dst: u32, wait_counter: u32, goal: u32, counter: u32) {
    phase   = PHASE_NORM;
    in_slot = src;
    norm_at = nw;
    flow_wait_done(lid, wait_counter, goal);
    flow_wait_vec4s(lid, src, k / 4u);
    let qs = stage_norm_quant(lid, k, stage_load(lid, k));
    for (var j = lid; j < k / 4u; j += WG) { flow_put_u32(dst + j, acts[act_slot(j, k)][j % 4u]); }
    if (lid == 0u) { flow_put(dst + k / 4u, qs); }
    flow_done(lid, counter);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let t = flow_ticket(lid);
    // The phase of ticket t (A = 0, B, N1, C, N2, D, N3, E = 7) from the first ticket of each.
    var first = array<u32, 8>(0u, p.a_end, p.b_end, p.b_end + 1u, p.c_end, p.c_end + 1u, p.d_end, p.d_end + 1u);
    var ph = 0u;
    for (var i = 1u; i < 8u; i++) {
        if (t >= first[i]) { ph = i; }
    }
    if (ph > p.last_phase) { return; }
    let g = t - first[ph];  // the workgroup's index within its phase
    switch (ph) {
        case 0u: { phase_qkv(lid, g); }
        case 1u: { phase_attention(lid, g); }
        case 2u: { phase_norm(lid, p.f_att, p.attn_sub_norm, N_EMBD_Q, p.f_a1, 1u, p.done_att, 2u); }
        case 3u: { phase_bitlinear(lid, g, false); }
        case 4u: { phase_norm(lid, p.f_xm, p.ffn_norm, N_EMBD, p.f_a2, 3u, p.done_o, 4u); }
        case 5u: { phase_gate_up(lid, g); }
        case 6u: { phase_norm(lid, p.f_gu, p.ffn_sub_norm, N_FF, p.f_a3, 5u, p.done_gu, 6u); }
        default: { phase_bitlinear(lid, g, true); }
    }
}
