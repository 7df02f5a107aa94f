requires packed_4x8_integer_dot_product;

// attention_o_decode: one token's attention over a short context AND the o-projection that follows
// it, in one dispatch: x += W_o int8-quantize(rms_norm(attention(q, K, V)) * nw). Every workgroup
// computes the attention of all heads itself (the same values: redundant work, no communication
// between workgroups) into workgroup memory, then runs bitlinear_decode's o-projection for its
// rows. With the short contexts where this is used the redundant work costs less than what it
// removes: attention.wgsl's dispatch (n_head workgroups, most of the GPU idle) and the boundary
// before the o-projection (H200 tg128: skipping attention's dispatch altogether took a token from
// 1.195 to 0.969 ms; src/backend/webgpu/README.md, "Attention inside the o-projection").
//
// Numerics: attention.wgsl's (the CPU's order, bit for bit): scores q·k in cpu::dot_blocked16's
// order (blocks of 16 dimensions in order, the block sums in order; q rounded to f16 with an f16 K),
// * scale (rounded on its own), max, exp_rn (exp_rn_fast's bits), the sum in cpu::sum_positions's
// order, p = e * (1 / sum) (rounded to f16 with an f16 V), P·V in cpu::sum_positions's order. Then
// bitlinear_decode's fused norm, quantization, dot and epilogue (lib/act_stage.wgsl,
// lib/ternary_decode.wgsl).
//
//   wq: the o-projection's weight (webgpu_weights.h)   q: [N_HEAD HD] f32
//   k_cache: [n_ctx][KV_ROW] f16 pairs or f32 as vec4<u32> (the host checks the alignment)
//   v_cache: the same as u32 words   nw: attn_sub_norm [K] f32   y: x [N] f32, accumulated
//   norm_stats: y's block sums of squares (STATS_OUT)
// Bindings: 0 wq, 1 q, 2 k_cache, 3 v_cache, 4 nw (read), 5 y, 6 norm_stats (read_write), 7 pfw (read:
// lib/weight_prefetch.wgsl), 8 params (uniform)
// Dispatch: (ceil(N / (2 WG / LANES)), 1, 1), as bitlinear_decode.
//
// The attention phases, each over the whole workgroup, with a barrier between them:
//   q:      att4 = q (f16-rounded)
//   scores: item (KV head, position): the K row is read once for the GROUP query heads that share it
//   max:    item (head, block of 32 positions): the block's max
//   exp:    item (head, position): exp(score - the head's max)
//   sums:   item (head, block): the block's exponentials summed in order
//   probs:  item (head, position): p = e * (1 / the blocks summed in order)
//   P·V:    item (KV head, dimension pair): the GROUP heads' sums over every block, in order
// The output replaces q in att4, where the norm's staging (stage_x4) reads it.

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/position_sum.wgsl"
// #include "lib/act_stage.wgsl"
// #include "lib/ternary_decode.wgsl"
// #include "lib/weight_prefetch.wgsl"

override WG: u32 = 512u;     // a power of two, >= K / 32
override LANES: u32 = 32u;   // a power of two dividing WG
override K: u32 = 2560u;     // N_HEAD * HD: the o-projection's row length, a multiple of 64
override NORM: bool = true;  // (lib/act_stage.wgsl: always the fused norm here)
override N_ROWS: u32 = 0u;   // the o-projection's rows (0: the uniform's)
override STATS_OUT: bool = false;
override CHUNK: u32 = 32u;   // (lib/position_sum.wgsl's staging; only its sums are used here)

override N_HEAD: u32 = 20u;
override HD: u32 = 128u;     // head_dim, a multiple of 16
override GROUP: u32 = 4u;    // query heads per KV head, at most 8
override KV_ROW: u32 = 640u; // cache elements per position (n_head_kv * HD)
override K_F16: bool = true;
override V_F16: bool = true;
override N_MAX: u32 = 256u;  // positions the score array holds (a multiple of 32): pos0 < N_MAX
// Where q, K and V start, as constants where the host sets them (else the uniform's): the loads at
// the kernel's start then wait for nothing.
const AO_UNSET: u32 = 0xffffffffu;
override Q_AT: u32 = AO_UNSET;
override K_AT: u32 = AO_UNSET;   // element index of k_cache[0][0]
override V_AT: u32 = AO_UNSET;

struct Params {
    n_rows: u32,          // N
    eps: f32,
    nw_offset: u32,       // f32 index of nw[0]
    scales_offset: u32,   // u32 index of the row scales in wq
    oscales_offset: u32,  // u32 index of the output scales in wq
    y_offset: u32,        // f32 index of y[0]
    stats_out: u32,       // f32 index in norm_stats where y's block sums go (STATS_OUT)
    pos0: u32,            // the token's position: positions 0 ..= pos0 are attended
    q_offset: u32,        // f32 index of q[0]
    k_offset: u32,        // element index of k_cache[0][0]
    v_offset: u32,
    scale: f32,           // 1 / sqrt(head_dim)
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> v_cache: array<u32>;
@group(0) @binding(4) var<storage, read> nw: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(7) var<storage, read> pfw: array<u32>;
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> att4: array<vec4<f32>, K / 4u>;            // q (f16-rounded), then the attention output
var<workgroup> asc: array<f32, N_HEAD * N_MAX>;           // [head][position]: scores, exp, probabilities
var<workgroup> abk: array<f32, N_HEAD * (N_MAX / 32u)>;   // [head][block]: block maxima, then block sums

fn q_at() -> u32 {
    if (Q_AT != AO_UNSET) { return Q_AT; }
    return p.q_offset;
}
fn k_at() -> u32 {
    if (K_AT != AO_UNSET) { return K_AT; }
    return p.k_offset;
}
fn v_at() -> u32 {
    if (V_AT != AO_UNSET) { return V_AT; }
    return p.v_offset;
}

// lib/act_stage.wgsl's inputs: x is the attention output in workgroup memory.
fn stage_x4(j: u32) -> vec4<f32> { return att4[j]; }
fn stage_nw4(j: u32) -> vec4<f32> {
    let o = p.nw_offset + 4u * j;
    return vec4<f32>(nw[o], nw[o + 1u], nw[o + 2u], nw[o + 3u]);
}
fn stage_qword(j: u32) -> u32 { return 0u; }      // (NORM only)
fn stage_qscale() -> f32 { return 1.0; }
fn stage_stats(b: u32) -> f32 { return 0.0; }     // (no STATS_IN)

fn weight_vec4(i: u32) -> vec4<u32> { return wq[i]; }
fn out_rows() -> u32 {
    if (N_ROWS != 0u) { return N_ROWS; }
    return p.n_rows;
}

// The 16 dimensions of K block b (16 b .. 16 b + 15) of the row whose first vec4 is r4, as f32.
fn k_block(r4: u32, b: u32) -> array<vec4<f32>, 4> {
    var k: array<vec4<f32>, 4>;
    if (K_F16) {
        let w0 = k_cache[r4 + 2u * b];
        let w1 = k_cache[r4 + 2u * b + 1u];
        k[0] = vec4<f32>(unpack2x16float(w0.x), unpack2x16float(w0.y));
        k[1] = vec4<f32>(unpack2x16float(w0.z), unpack2x16float(w0.w));
        k[2] = vec4<f32>(unpack2x16float(w1.x), unpack2x16float(w1.y));
        k[3] = vec4<f32>(unpack2x16float(w1.z), unpack2x16float(w1.w));
    } else {
        for (var i = 0u; i < 4u; i++) { k[i] = bitcast<vec4<f32>>(k_cache[r4 + 4u * b + i]); }
    }
    return k;
}

// s + q·k over 4 dimensions in order: f16 products are exact in f32 (a fused multiply-add gives
// the same bits), f32 products are rounded on their own as the CPU rounds them.
fn dot4_in_order(s0: f32, qv: vec4<f32>, kv: vec4<f32>) -> f32 {
    if (K_F16) { return (((s0 + qv.x * kv.x) + qv.y * kv.y) + qv.z * kv.z) + qv.w * kv.w; }
    return (((s0 + mul_rn(qv.x, kv.x)) + mul_rn(qv.y, kv.y)) + mul_rn(qv.z, kv.z)) + mul_rn(qv.w, kv.w);
}

// Attention of every head for the token at position p.pos0, into att4 (every invocation must call
// it: barriers; it ends with one).
fn attend_all_heads(lid: u32) {
    let n     = p.pos0 + 1u;
    let nb    = (n + 31u) / 32u;
    let n_kv  = N_HEAD / GROUP;
    let nbk   = N_MAX / 32u;
    let kw    = select(HD, HD / 2u, K_F16);          // u32 words per head of a K row
    let krow  = select(KV_ROW, KV_ROW / 2u, K_F16);  // u32 words per K row
    let k0w   = select(k_at(), k_at() / 2u, K_F16);  // u32 index of k_cache[0][0]

    for (var j = lid; j < K / 4u; j += WG) {
        let o = q_at() + 4u * j;
        let v = vec4<f32>(q[o], q[o + 1u], q[o + 2u], q[o + 3u]);
        att4[j] = select(v, vec4<f32>(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w)), K_F16);
    }
    workgroupBarrier();

    // Scores of the GROUP heads of KV head kvh at one position (K row read once).
    for (var it = lid; it < n_kv * n; it += WG) {
        let kvh = it / n;
        let pos = it - kvh * n;
        let r4  = (k0w + pos * krow + kvh * kw) / 4u;
        var acc = array<f32, 8>();
        for (var b = 0u; b < HD / 16u; b++) {
            let kb = k_block(r4, b);
            for (var g = 0u; g < GROUP; g++) {
                let q4 = ((kvh * GROUP + g) * HD + 16u * b) / 4u;
                var s = dot4_in_order(0.0, att4[q4], kb[0]);
                s = dot4_in_order(s, att4[q4 + 1u], kb[1]);
                s = dot4_in_order(s, att4[q4 + 2u], kb[2]);
                s = dot4_in_order(s, att4[q4 + 3u], kb[3]);
                acc[g] = select(acc[g] + s, s, b == 0u);
            }
        }
        for (var g = 0u; g < GROUP; g++) {
            asc[(kvh * GROUP + g) * N_MAX + pos] = mul_rn(acc[g], p.scale);  // not fused into score - max
        }
    }
    workgroupBarrier();

    for (var it = lid; it < N_HEAD * nb; it += WG) {
        let h = it / nb;
        let b = it - h * nb;
        var m = bitcast<f32>(0xff7fffffu);
        for (var i = 32u * b; i < min(32u * b + 32u, n); i++) { m = max(m, asc[h * N_MAX + i]); }
        abk[h * nbk + b] = m;
    }
    workgroupBarrier();

    for (var it = lid; it < N_HEAD * n; it += WG) {
        let h = it / n;
        let i = it - h * n;
        var m = abk[h * nbk];
        for (var b = 1u; b < nb; b++) { m = max(m, abk[h * nbk + b]); }
        asc[h * N_MAX + i] = exp_rn_fast(asc[h * N_MAX + i] - m);
    }
    workgroupBarrier();

    for (var it = lid; it < N_HEAD * nb; it += WG) {
        let h = it / nb;
        let b = it - h * nb;
        var s = 0.0;
        for (var i = 32u * b; i < min(32u * b + 32u, n); i++) { s = s + asc[h * N_MAX + i]; }
        abk[h * nbk + b] = s;
    }
    workgroupBarrier();

    for (var it = lid; it < N_HEAD * n; it += WG) {
        let h = it / n;
        let i = it - h * n;
        var es = PosSum();
        for (var b = 0u; b < nb; b++) { es = pos_add_block(es, vec2<f32>(abk[h * nbk + b], 0.0), b); }
        let pr = asc[h * N_MAX + i] * div_rn(1.0, pos_total(es).x);
        asc[h * N_MAX + i] = select(pr, round_f16(pr), V_F16);
    }
    workgroupBarrier();

    // P·V: dimension pair c of the GROUP heads of KV head kvh, block by block in order, each block's
    // 32 positions in order from 0 (its V words loaded 16 at a time ahead of their products).
    let pairs = HD / 2u;
    for (var it = lid; it < n_kv * pairs; it += WG) {
        let kvh = it / pairs;
        let c   = it - kvh * pairs;
        // (Loop-body variables are initialized explicitly: SwiftShader did not reset them per iteration.)
        var os = array<PosSum, 8>();
        for (var b = 0u; b < nb; b++) {
            var o = array<vec2<f32>, 8>();
            for (var u0 = 0u; u0 < 32u; u0 += 16u) {
                var vw: array<vec2<u32>, 16>;
                for (var u = 0u; u < 16u; u++) {
                    let e = v_at() + min(32u * b + u0 + u, n - 1u) * KV_ROW + kvh * HD + 2u * c;
                    if (V_F16) { vw[u] = vec2<u32>(v_cache[e / 2u], 0u); } else { vw[u] = vec2<u32>(v_cache[e], v_cache[e + 1u]); }
                }
                for (var u = 0u; u < 16u; u++) {
                    let i = 32u * b + u0 + u;
                    if (i < n) {
                        for (var g = 0u; g < GROUP; g++) {
                            let pr = asc[(kvh * GROUP + g) * N_MAX + i];
                            if (V_F16) {  // products of two f16 values: exact in f32
                                o[g] = o[g] + pr * unpack2x16float(vw[u].x);
                            } else {
                                o[g] = o[g] + vec2<f32>(mul_rn(pr, bitcast<f32>(vw[u].x)), mul_rn(pr, bitcast<f32>(vw[u].y)));
                            }
                        }
                    }
                }
            }
            for (var g = 0u; g < GROUP; g++) { os[g] = pos_add_block(os[g], o[g], b); }
        }
        for (var g = 0u; g < GROUP; g++) {
            let r = pos_total(os[g]);
            let d = (kvh * GROUP + g) * HD + 2u * c;  // even: both in one vec4
            att4[d / 4u][d % 4u] = r.x;
            att4[d / 4u][d % 4u + 1u] = r.y;
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let rows = 2u * (WG / LANES);
    let team = lid / LANES;
    let row  = wid.x * rows + 2u * team;  // the team's rows: row, row + 1
    let lane = lid % LANES;
    let ro   = wid.x * rows + lid;  // the row this invocation finishes (lid < rows)
    // The weights, scales and residual first: they arrive while the attention runs.
    let w = prefetch_row_pair(vec2<u32>(row, row + 1u), vec2<bool>(row < out_rows(), row + 1u < out_rows()), lane, LANES, K);
    var sc: vec2<f32>;
    var y0 = 0.0;
    if (lid < rows && ro < out_rows()) {
        sc = row_scales_at(ro, p.scales_offset, p.oscales_offset);
        y0 = y[p.y_offset + ro];
    }
    let pf = kernel_prefetch(lid, wid.x);

    attend_all_heads(lid);

    let as_ = stage_activations_from(lid, K, stage_load(lid, K));
    var partial = vec2<i32>();
    if (row < out_rows()) { partial = row_dot_pair(w, lane, LANES, K); }
    let dot = reduce_row_pairs(lid, partial, lid / 2u, LANES)[lid % 2u];  // row ro's

    let wrote = lid < rows && ro < out_rows();
    var out_v = 0.0;
    if (wrote) {
        out_v = y0 + row_product_scaled(dot, as_, sc);
        y[p.y_offset + ro] = out_v;
    }
    if (STATS_OUT) {
        let s = team_halving_sum(lid, mul_rn(out_v, out_v), NORM_BLOCK);
        if (wrote && lid % NORM_BLOCK == 0u) { norm_stats[p.stats_out + ro / NORM_BLOCK] = s; }
    }
    kernel_prefetch_use(pf);
}
