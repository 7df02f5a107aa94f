requires packed_4x8_integer_dot_product;

// matvec_q1_attn: matvec_q1_qkv.wgsl and one query's attention (attention.wgsl) in one dispatch,
// a workgroup per QPW query heads of a KV group, for one token over few positions (the host's threshold,
// WebGpuTuning::family_q1_attn; at most one superblock of positions). Bit for bit as the chain it
// replaces (rms_norm + quantize_q8_0 + the [q; k; v] matvec, rope_kv_append, attention):
//   prologue  as matvec_q1_qkv.wgsl: h = rms_norm(x) * nw (NORM), else x, as Q8_0 blocks staged in
//             workgroup memory (lib/quarters_q8_0.wgsl);
//   matvec    workgroup j owns HEADS = QPW + 2 heads of head_dim rows: query heads j QPW .. j QPW +
//             QPW - 1 and their KV group's K and V heads (kvh = j QPW / G; with QPW < G the G / QPW
//             workgroups of a group each compute them). Invocation r (and r + WG, ...) sums row r
//             of those HEADS * HD rows whole: the terms of its weight groups in order, each as
//             cpu::dot_lowbit_q8_0 (matvec_q1_qkv.wgsl's group_term; there a row's terms go through
//             workgroup memory to one invocation that adds them in the same order: the same bits);
//   epilogue  the QK-norm and RoPE of all HEADS heads at once, matvec_q1_qkv.wgsl's expressions; q to
//             q_out (and kept in workgroup memory), k and v into the caches at row p.pos0 (by the
//             group's first workgroup) and, as the cache holds them, into workgroup memory (own_k,
//             own_v: the attention reads row p.pos0 from there, so no workgroup waits for another's
//             stores, nor for its own);
//   attention the QPW query heads in turn by the whole workgroup: lib/attention_core.wgsl's attend(),
//             attention.wgsl's decode form (its short form where the host sets ATT_SHORT), q read
//             from workgroup memory; the output in f32 to out (the o-projection's input).
// One dispatch per layer instead of matvec_q1_qkv + attention. Only n_head_kv workgroups: the
// others (from PF_FROM) pull a weight into L2 as attention.wgsl's do.
//
//   w: GpuLinear's words as vec4<u32> (matvec_q1_qkv.wgsl)   x: [K] f32   nw: [K] f32 (NORM)
//   rope: [pos][n_rot/2] (cos, sin)   qkn: [2 hd] f32, q_norm then k_norm
//   q_out: [n_head hd] f32   k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32, as u32 words
//   out: [n_head hd] f32
// Bindings: 0 w, 1 x, 2 nw, 3 rope, 4 qkn (read); 5 q_out, 6 k_cache, 7 v_cache, 8 out (read_write);
// 9 pf0 (read: the weight to prefetch; any buffer when PF_FROM is unset); 10 params (uniform)
// Dispatch: (n_head / QPW + prefetch workgroups, 1, 1).

// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/acts_q8_0.wgsl"
// #include "lib/quarters_q8_0.wgsl"
// #include "lib/codes_q8_0.wgsl"
// #include "lib/position_sum.wgsl"
// #include "lib/attention_core.wgsl"

override WG: u32 = 256u;     // a power of two, >= head_dim / 2; NORM needs K <= 32 WG (NB <= WG)
override HD: u32 = 128u;     // head_dim (even, a multiple of 4)
override G: u32 = ATT_GROUP;  // query heads per KV head (lib/attention_core.wgsl's, set by the host)
override QPW: u32 = 2u;      // query heads per workgroup (a divisor of G)
override NB: u32 = 64u;      // K / 32
override QPT: u32 = (4u * NB + WG - 1u) / WG;  // at most 8 (lib/quarters_q8_0.wgsl)
override GROUP: u32 = 128u;  // values per weight group (a multiple of 64)
override NT: u32 = 32u * NB / GROUP;  // terms per row: K / GROUP
override NORM: bool = true;
override Q_NORM: bool = false;
override K_NORM: bool = false;
override NORM_MODE: bool = false;  // pairs (2i, 2i+1); else NeoX
override K_F16: bool = true;
override V_F16: bool = true;
// lib/attention_core.wgsl's (attention.wgsl's meanings; the host sets them as for attention.wgsl,
// but for the cache's offsets and shape: the uniform has been read long before attend() starts).
override CHUNK: u32 = 256u;
override HD_MAX: u32 = 256u;
override S: u32 = 8u;
override WPT: u32 = select(16u, 8u, K_F16);
override TILE: u32 = 2080u;
override TILED: bool = true;
override KPART: u32 = WG;
override SC_MAX: u32 = 2048u;
override PF_FROM: u32 = 0xffffffffu;  // first prefetching workgroup; unset: none (attention.wgsl's)
override PF_LOADS: u32 = 8u;
override PF_WORDS0: u32 = 0u;
const PF_STRIDE: u32 = 16u;  // (the host's k_prefetch_stride_words)

struct Params {
    k: u32,              // K (NORM)
    eps: f32,            // NORM
    x_offset: u32,       // f32 index of x[0]
    nw_offset: u32,      // f32 index of nw[0]
    scales_offset: u32,  // u32 index of the group scales in w
    n_rot: u32,
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,           // the token's position (its (cos, sin) row and cache row)
    q_offset: u32,       // f32 index of q_out[0]
    k_offset: u32,       // element index of k_cache[0, 0] (even for f16)
    v_offset: u32,
    n_embd_kv: u32,      // cache elements per position
    qk_eps: f32,         // Q_NORM / K_NORM
    out_offset: u32,     // f32 index of out[0]
    head_dim: u32,
    scale: f32,          // 1 / sqrt(head_dim)
    rn_zero: u32,        // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
@group(0) @binding(3) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read> qkn: array<f32>;
@group(0) @binding(5) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(8) var<storage, read_write> out: array<f32>;
@group(0) @binding(9) var<storage, read> pf0: array<u32>;
@group(0) @binding(10) var<uniform> p: Params;

override HEADS: u32 = QPW + 2u;  // heads per workgroup: QPW query heads, K, V
// The activations' Q8_0 blocks (as matvec_q1_qkv.wgsl).
var<workgroup> acodes: array<vec4<u32>, 2u * NB>;
var<workgroup> adq: array<f32, NB>;
var<workgroup> asum: array<i32, NB>;
var<workgroup> part_sum: array<i32, 4u * NB>;
// The workgroup's rows [head][HD]: the sums, then after the norm and the rotation.
var<workgroup> fo: array<f32, HEADS * HD>;
var<workgroup> rot: array<f32, HEADS * HD>;
var<workgroup> head_inv: array<f32, HEADS>;
var<workgroup> block_sq: array<f32, 8u * HEADS>;  // [head][block of 32 squares]
// Cache row p.pos0 of the workgroup's KV head as the cache holds it (u32 words: f16 pairs or f32).
var<workgroup> own_k: array<u32, HD>;
var<workgroup> own_v: array<u32, HD>;
var<private> q_first: u32;  // element index in q of the workgroup's first query head
var<private> own_k0: u32;   // K (V) cache word index of row p.pos0's first word of the KV head
var<private> own_v0: u32;

fn stage_q8_0(lid: u32, x0: u32) {
    let qs = quarters_q8_0(lid, x0);
    for (var u = 0u; u < QPT; u++) {
        let g = lid + u * WG;
        if (g < 4u * NB) {
            acodes[g / 2u][2u * (g % 2u)]      = qs[u].w0;
            acodes[g / 2u][2u * (g % 2u) + 1u] = qs[u].w1;
            part_sum[g] = qs[u].csum;
            if (g % 4u == 0u) { adq[g / 4u] = round_f16(qs[u].d); }
        }
    }
    if (Q8_TOTAL_SG && WG_REDUCE_SG && SG32) {
        block_csums(lid, qs);
        return;
    }
    workgroupBarrier();
    for (var b = lid; b < NB; b += WG) {
        asum[b] = part_sum[4u * b] + part_sum[4u * b + 1u] + part_sum[4u * b + 2u] + part_sum[4u * b + 3u];
    }
}

// Weight group g of weight row `row` (cpu::dot_lowbit_q8_0; matvec_q1_qkv.wgsl's).
fn group_term(row: u32, g: u32) -> f32 {
    var s = 0.0;
    for (var j = 0u; j < GROUP / 32u; j += 2u) {
        let blk = g * (GROUP / 32u) + j;  // an even block: it and the next are one vec4
        let cv  = w[row * (NB / 2u) + blk / 2u];
        s = s + mul_rn(adq[blk], f32(codes_sumi(cv.x, cv.y, blk)));
        s = s + mul_rn(adq[blk + 1u], f32(codes_sumi(cv.z, cv.w, blk + 1u)));
    }
    let si = p.scales_offset + row * NT + g;
    return mul_rn(bitcast<f32>(w[si / 4u][si % 4u]), s);
}

// Weight row `row`'s sum of its groups' terms in order (group_term's), with AHEAD its code words
// loaded first, up to 32 vec4s (whole groups) at a time, and the chunk's scales with them, so that
// an invocation's loads of a row are one round trip per chunk instead of one per group (the same
// operations in the same order: the same bits).
override AHEAD: bool = true;
const AHEAD_WORDS: u32 = 32u;
fn row_sum(row: u32) -> f32 {
    var s = 0.0;
    if (!AHEAD) {
        for (var g = 0u; g < NT; g++) { s = s + group_term(row, g); }
        return s;
    }
    let wpr   = NB / 2u;        // vec4 code words per row
    let wpg   = GROUP / 64u;    // ... per group
    let chunk = (AHEAD_WORDS / wpg) * wpg;
    for (var c0 = 0u; c0 < wpr; c0 += chunk) {
        let g0 = c0 / wpg;
        let ng = min(chunk / wpg, NT - g0);
        var cw: array<vec4<u32>, AHEAD_WORDS>;
        var gs: array<f32, AHEAD_WORDS>;
        for (var i = 0u; i < AHEAD_WORDS; i++) {
            if (i < ng * wpg) { cw[i] = w[row * wpr + c0 + i]; }
        }
        for (var k = 0u; k < AHEAD_WORDS; k++) {
            if (k < ng) {
                let si = p.scales_offset + row * NT + g0 + k;
                gs[k] = bitcast<f32>(w[si / 4u][si % 4u]);
            }
        }
        for (var k = 0u; k < AHEAD_WORDS; k++) {
            if (k < ng) {
                var t = 0.0;
                for (var jj = 0u; jj < wpg; jj++) {
                    let blk = (g0 + k) * (GROUP / 32u) + 2u * jj;
                    let cv  = cw[k * wpg + jj];
                    t = t + mul_rn(adq[blk], f32(codes_sumi(cv.x, cv.y, blk)));
                    t = t + mul_rn(adq[blk + 1u], f32(codes_sumi(cv.z, cv.w, blk + 1u)));
                }
                s = s + mul_rn(gs[k], t);
            }
        }
    }
    return s;
}

// The weight head of the workgroup's head lh (j: the workgroup, kvh its KV head): query heads,
// then K, then V.
fn weight_head(j: u32, kvh: u32, lh: u32) -> u32 {
    if (lh < QPW) { return j * QPW + lh; }
    if (lh == QPW) { return p.n_head + kvh; }
    return p.n_head + p.n_head_kv + kvh;
}

// Head lh's block b of 32 squares in the halving order (matvec_q1_qkv.wgsl's block_square_sum).
fn block_square_sum(lh: u32, b: u32) -> f32 {
    var t: array<f32, 32>;
    for (var e = 0u; e < 32u; e++) {
        let i = b * 32u + e;
        var v = 0.0;
        if (i < HD) { v = fo[lh * HD + i]; }
        t[e] = mul_rn(v, v);
    }
    for (var h = 16u; h >= 1u; h /= 2u) {
        for (var i = 0u; i < h; i++) { t[i] = t[i] + t[i + h]; }
    }
    return t[0];
}
fn head_sum_squares(lh: u32) -> f32 {
    let nb = (HD + 31u) / 32u;
    var bs: array<f32, 8>;
    for (var b = 0u; b < 8u; b++) { bs[b] = select(0.0, block_sq[8u * lh + b], b < nb); }
    var pw = 1u;
    while (pw < nb) { pw *= 2u; }
    for (var h = pw / 2u; h >= 1u; h /= 2u) {
        for (var i = 0u; i < h; i++) { bs[i] = bs[i] + bs[i + h]; }
    }
    return bs[0];
}

fn is_normed(lh: u32) -> bool { return (lh < QPW && Q_NORM) || (lh == QPW && K_NORM); }

// lib/attention_core.wgsl's accessors: q from workgroup memory (rot), the caches (row p.pos0 of
// the KV head from own_k / own_v), the output.
fn att_q(t: u32, i: u32) -> f32 { return rot[i - q_first]; }
fn att_k(wi: u32) -> u32 {
    if (wi - own_k0 < select(HD, HD / 2u, K_F16)) { return own_k[wi - own_k0]; }  // (wraps below own_k0)
    return k_cache[wi];
}
fn att_k4(i: u32) -> vec4<u32> { return vec4<u32>(att_k(4u * i), att_k(4u * i + 1u), att_k(4u * i + 2u), att_k(4u * i + 3u)); }
fn att_v(wi: u32) -> u32 {
    if (wi - own_v0 < select(HD, HD / 2u, V_F16)) { return own_v[wi - own_v0]; }
    return v_cache[wi];
}
fn att_out(t: u32, i: u32, v: f32) { out[p.out_offset + i] = v; }
fn att_done(lid: u32, i: u32, o: vec2<f32>, wrote: bool) {}

// attention.wgsl's weight prefetch, one buffer (pf0, PF_WORDS0 words).
fn prefetch_weight(lid: u32, g: u32) {
    var acc = 0u;
    let first = (g * WG * PF_LOADS + lid) * PF_STRIDE;
    for (var u = 0u; u < PF_LOADS; u++) {
        let i = first + u * WG * PF_STRIDE;
        if (i < PF_WORDS0) { acc ^= pf0[i]; }
    }
    if ((acc & p.rn_zero) != 0u) { out[0] = bitcast<f32>(acc); }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (wid.x >= PF_FROM) {
        prefetch_weight(lid, wid.x - PF_FROM);
        return;
    }
    let j   = wid.x;
    let kvh = j * QPW / G;  // the KV head
    let owner = (j * QPW) % G == 0u;  // the group's first workgroup stores k and v
    q_first = j * QPW * HD;
    let ek = p.k_offset + p.pos0 * p.n_embd_kv + kvh * HD;  // element index of k[pos0][kvh HD]
    let ev = p.v_offset + p.pos0 * p.n_embd_kv + kvh * HD;
    own_k0 = select(ek, ek / 2u, K_F16);
    own_v0 = select(ev, ev / 2u, V_F16);
    stage_q8_0(lid, p.x_offset);
    workgroupBarrier();
    for (var r = lid; r < HEADS * HD; r += WG) {
        let row = weight_head(j, kvh, r / HD) * HD + r % HD;
        fo[r] = row_sum(row);
    }
    workgroupBarrier();

    // matvec_q1_qkv.wgsl's epilogue, on all HEADS heads.
    let nbh = (HD + 31u) / 32u;
    if (lid < HEADS * nbh && is_normed(lid / nbh)) { block_sq[8u * (lid / nbh) + lid % nbh] = block_square_sum(lid / nbh, lid % nbh); }
    workgroupBarrier();
    if (lid < HEADS && is_normed(lid)) { head_inv[lid] = inv_root_rn(div_rn(head_sum_squares(lid), f32(HD)) + p.qk_eps); }
    workgroupBarrier();
    let half = p.n_rot / 2u;
    for (var pi = lid; pi < HEADS * (HD / 2u); pi += WG) {
        let lh     = pi / (HD / 2u);
        let jj     = pi % (HD / 2u);
        let is_q   = lh < QPW;
        let is_v   = lh == QPW + 1u;
        let normed = is_normed(lh);
        var i0 = 2u * jj;
        var i1 = 2u * jj + 1u;
        if (!NORM_MODE) {
            i0 = select(p.n_rot + 2u * (jj - half), jj, jj < half);
            i1 = select(i0 + 1u, jj + half, jj < half);
        }
        var x0 = fo[lh * HD + i0];
        var x1 = fo[lh * HD + i1];
        if (normed) {
            let inv = head_inv[lh];
            x0 = mul_rn(x0, select(qkn[HD + i0], qkn[i0], is_q)) * inv;
            x1 = mul_rn(x1, select(qkn[HD + i1], qkn[i1], is_q)) * inv;
        }
        if (!is_v && jj < half) {
            let cs = rope[p.pos0 * half + jj];
            let turned = rope_rotate(x0, x1, cs);
            x0 = turned.x;
            x1 = turned.y;
        }
        rot[lh * HD + i0] = x0;
        rot[lh * HD + i1] = x1;
    }
    workgroupBarrier();
    for (var pi = lid; pi < HEADS * (HD / 2u); pi += WG) {
        let lh = pi / (HD / 2u);
        let d  = 2u * (pi % (HD / 2u));
        let r  = lh * HD + d;
        if (lh < QPW) {
            let o = p.q_offset + q_first + r;
            q_out[o]      = rot[r];
            q_out[o + 1u] = rot[r + 1u];
            continue;
        }
        let is_v = lh == QPW + 1u;
        let f16  = select(K_F16, V_F16, is_v);
        var w0 = bitcast<u32>(rot[r]);
        let w1 = bitcast<u32>(rot[r + 1u]);
        if (f16) { w0 = pack_f16x2(rot[r], rot[r + 1u]); }
        // (f16: word d / 2 of the row, else words d, d + 1)
        let o0 = select(d, d / 2u, f16);
        if (is_v) {
            own_v[o0] = w0;
            if (!f16) { own_v[o0 + 1u] = w1; }
        } else {
            own_k[o0] = w0;
            if (!f16) { own_k[o0 + 1u] = w1; }
        }
        if (!owner) { continue; }
        let c0 = select(own_k0, own_v0, is_v) + o0;  // the cache word
        if (is_v) {
            v_cache[c0] = w0;
            if (!f16) { v_cache[c0 + 1u] = w1; }
        } else {
            k_cache[c0] = w0;
            if (!f16) { k_cache[c0 + 1u] = w1; }
        }
    }
    workgroupBarrier();  // (own_k, own_v)
    for (var u = 0u; u < QPW; u++) {
        attend(lid, j * QPW + u, 0u);
        workgroupBarrier();  // (the next head reuses attend's workgroup memory)
    }
}
