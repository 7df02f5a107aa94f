// attention_block_pv: one query's long attention in the block order of issue 52 (the CPU
// reference's, cpu::attention_row, past 512 positions): a workgroup per (chunk of 2 blocks of 32 positions,
// KV head, column) takes the scores itself and its chunk's P·V for all G query heads, with no
// normalisation until attention_block_combine.wgsl (which joins the chunks into superblocks of 8, then
// the row). Every op an f32 op rounded once, in this fixed order (cpu::attention_row's block order):
//   s_i    = dot_blocked16(f16(q), k_i) * scale            (attention_split_scores.wgsl's bits)
//   block b (positions [32 b, 32 b + 32) of the column, the ones it has):
//   m_b    = max s_i (from -FLT_MAX);  e_i = exp_fixed(s_i - m_b);  l_b = ((0 + e_0) + e_1) + ...
//   o_b[d] = ((0 + f16(e_0) v_0[d]) + f16(e_1) v_1[d]) + ...   (f16 x f16 products: exact in f32)
//   chunk (its blocks in order): M = max m_b;  a_b = exp_fixed(m_b - M);
//   L = ((0 + a_0 l_0) + a_1 l_1) + ...;  O[d] = ((0 + a_0 o_0[d]) + a_1 o_1[d]) + ...  (products rounded once)
// so the scores and the P·V of a block need nothing but the block's own max: one dispatch.
//
//   q: [n_head hd, T] f32   k_cache, v_cache: [n_head_kv hd, rows] f16 (rows of whole 16-byte units)
//   part: [T][n_head][nch_ld][HD] f32 (O)   ml: [T][n_head][nch_ld][2] f32 (M, L)
// Bindings: 0 q, 1 k_cache (vec4<u32>), 2 v_cache (u32) (read); 3 part, 4 ml (read_write); 5 params
// Dispatch: (ceil(n_max / NP), n_head_kv, T); a workgroup past its column's positions returns.
// Threads: WG = 128. Scores: thread (position lid % NP, half lid / NP of the head's HD dimensions)
// takes its HD / 2 K values by HD / 16 vec4 loads (a warp's lanes 32 rows apart); P·V: thread (block
// lid / (HD / 2), dimension pair lid % (HD / 2)) loads its 32 V words (a warp reads 128 contiguous
// bytes of a row per load). K's loads are issued first; V's after the scores' products (fewer
// registers live at once), in flight during the softmax.
// Measured and removed (H200 tg64 @ d4096, docs/perf-log.md): a thread per whole K row and 2 heads
// with block maxima by shuffles (507.90 / 511.46 vs 601.05 / 599.08 tok/s); K staged in workgroup
// memory by coalesced loads (501.13 / 502.04 vs 603.85 / 605.12); block maxima by shuffles in the
// second half's warps, one barrier fewer (585.90 / 586.06).

// #include "lib/numerics.wgsl"

override HD: u32 = 128u;        // head_dim: 64, 96 or 128
const C: u32 = 2u;              // blocks of 32 positions per workgroup: part of the order (a chunk)
override GROUP: u32 = 4u;       // G = n_head / n_head_kv, at most 4 (one vec4 of heads)
const NP: u32 = 32u * C;        // positions per workgroup
const WG: u32 = 64u * C;
override RA: u32 = 128u * GROUP;  // floats of ra: max(2 G NP, (C - 1) G HD)

const NEG_MAX: u32 = 0xff7fffffu;  // -FLT_MAX, as bits

struct Params {
    n_embd_kv: u32,    // cache elements per row
    q_offset: u32,     // f32 index of q[0, 0]
    q_stride: u32,     // f32 elements between columns of q
    k_offset: u32,     // element index of k_cache[0, 0] (a multiple of 8)
    v_offset: u32,     // element index of v_cache[0, 0] (a multiple of 2)
    n_head_kv: u32,
    pos0: u32,         // position of column 0
    nch_ld: u32,       // chunks per (column, head) row of part and ml
    scale: f32,
    rn_zero: u32,      // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> v_cache: array<u32>;
@group(0) @binding(3) var<storage, read_write> part: array<f32>;
@group(0) @binding(4) var<storage, read_write> ml: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

// Phases 1-3: the first halves' partial sums [j][position] at 0, the scores [j][position] at G NP.
// Phase 5: the o_b of blocks 1 .. C - 1, [b - 1][j][d].
var<workgroup> ra: array<f32, RA>;
var<workgroup> q_s: array<vec4<f32>, GROUP * HD / 4u>;  // [j][d]: q, f16-rounded (vec4 broadcast reads)
var<workgroup> e_s: array<f32, GROUP * NP>;   // [j][position]: e (0 past the column)
var<workgroup> pe_s: array<vec4<f32>, NP>;    // [position][j]: f16(e) (0 for missing heads)
var<workgroup> mb_s: array<f32, 4u * C>;      // [j][block]: m_b
var<workgroup> ab_s: array<f32, 4u * C>;      // [j][block]: a_b
var<workgroup> lb_s: array<f32, 4u * C>;      // [j][block]: l_b

// Thread (block b, dimension pair dp)'s 32 V words (0 past the column's np positions of the chunk).
fn load_v(vw: ptr<function, array<u32, 32>>, p0: u32, np: u32, b: u32, dp: u32, kvh: u32) {
    for (var i = 0u; i < 32u; i++) {
        let r = 32u * b + i;
        (*vw)[i] = 0u;
        if (r < np) { (*vw)[i] = v_cache[(p.v_offset + (p0 + r) * p.n_embd_kv + kvh * HD) / 2u + dp]; }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t   = wid.z;
    let kvh = wid.y;
    let ch  = wid.x;
    let n   = p.pos0 + t + 1u;
    let p0  = ch * NP;
    if (p0 >= n) { return; }  // (uniform)
    let np  = min(NP, n - p0);       // positions of this chunk
    let nbk = (np + 31u) / 32u;      // its blocks
    let pl  = lid % NP;              // scores: position in the chunk
    let h   = lid / NP;              //         half of the head (HD / 2 dimensions)
    let b   = lid / (HD / 2u);       // P·V: block (threads of b >= 2 idle where HD < 128)
    let dp  = lid % (HD / 2u);       //      dimension pair
    let row0 = (t * p.n_head_kv + kvh) * GROUP;  // (column, first query head)
    let HS = 0u;
    let SC = GROUP * NP;
    let NB = HD / 32u;               // blocks of 16 dimensions per half
    let RW = HD / 8u;                // vec4 words per K row

    // 0. K into registers (0 past the column), in flight while q is staged.
    var kq: array<vec4<u32>, 8>;
    for (var i = 0u; i < 8u; i++) { kq[i] = vec4<u32>(0u); }
    if (pl < np) {
        let e0 = (p.k_offset + (p0 + pl) * p.n_embd_kv + kvh * HD + (HD / 2u) * h) / 8u;
        for (var i = 0u; i < RW / 2u; i++) { kq[i] = k_cache[e0 + i]; }
    }
    var vw: array<u32, 32>;
    for (var i = lid; i < GROUP * HD / 4u; i += WG) {
        let at = p.q_offset + t * p.q_stride + kvh * GROUP * HD + 4u * i;
        q_s[i] = vec4<f32>(round_f16(q[at]), round_f16(q[at + 1u]), round_f16(q[at + 2u]), round_f16(q[at + 3u]));
    }
    workgroupBarrier();

    // 1. The NB block sums of 16 dimensions of this thread's half, per head (products exact: f16 x f16).
    // Half 0 adds its NB in order from 0 and hands the partial to half 1, which adds its own after it.
    var bs: array<vec4<f32>, 4>;  // [j][block of 16]
    for (var j = 0u; j < GROUP; j++) {
        for (var bb = 0u; bb < NB; bb++) {
            var s = 0.0;
            for (var w = 0u; w < 2u; w++) {
                let x  = kq[2u * bb + w];
                let qi = (j * HD + (HD / 2u) * h + 16u * bb + 8u * w) / 4u;  // dimensions 8 w .. 8 w + 7 of the block
                let qa = q_s[qi];
                let qb = q_s[qi + 1u];
                let v0 = unpack2x16float(x[0]);
                let v1 = unpack2x16float(x[1]);
                let v2 = unpack2x16float(x[2]);
                let v3 = unpack2x16float(x[3]);
                s = s + qa.x * v0.x;
                s = s + qa.y * v0.y;
                s = s + qa.z * v1.x;
                s = s + qa.w * v1.y;
                s = s + qb.x * v2.x;
                s = s + qb.y * v2.y;
                s = s + qb.z * v3.x;
                s = s + qb.w * v3.y;
            }
            bs[j][bb] = s;
        }
        if (h == 0u) {
            var acc = bs[j][0];  // (0 + x = x: a sum from 0 is never -0)
            for (var bb = 1u; bb < NB; bb++) { acc = acc + bs[j][bb]; }
            ra[HS + j * NP + pl] = acc;
        }
    }
    // V after the scores' products, K's registers free again (H200 tg64 @ d4096, C = 2: 610.54 / 612.10
    // tok/s vs 602.23 / 601.50 with V loaded beside K)
    load_v(&vw, p0, np, b, dp, kvh);
    workgroupBarrier();
    // 2. Half 1: the scores (-FLT_MAX past the column).
    if (h == 1u) {
        for (var j = 0u; j < GROUP; j++) {
            var acc = ra[HS + j * NP + pl];
            for (var bb = 0u; bb < NB; bb++) { acc = acc + bs[j][bb]; }
            var sc = mul_rn(acc, p.scale);
            if (pl >= np) { sc = bitcast<f32>(NEG_MAX); }
            ra[SC + j * NP + pl] = sc;
        }
    }
    workgroupBarrier();
    // 3. Thread (position, half): heads half, half + 2: its block's max (a warp's lanes share the block:
    // broadcast reads), e, f16(e).
    let bq = pl / 32u;
    for (var j = h; j < 4u; j += 2u) {
        var e = 0.0;
        if (j < GROUP) {
            let at = SC + j * NP + 32u * bq;
            var m  = bitcast<f32>(NEG_MAX);
            for (var k = 0u; k < 32u; k++) { m = max(m, ra[at + k]); }
            if (pl < np) { e = exp_fixed(ra[SC + j * NP + pl] - m); }
            e_s[j * NP + pl] = e;
            if (pl % 32u == 0u) { mb_s[j * C + bq] = m; }
        }
        pe_s[pl][j] = round_f16(e);
    }
    workgroupBarrier();

    // 4. P·V of block b, dimensions 2 dp, 2 dp + 1, all G heads, positions in order; and threads
    // (j, block) < G C: l_b and a_b.
    var o0 = vec4<f32>(0.0);
    var o1 = vec4<f32>(0.0);
    if (b < nbk) {
        for (var i = 0u; i < 32u; i++) {
            let pr = pe_s[32u * b + i];
            let v  = unpack2x16float(vw[i]);
            o0 = o0 + pr * v.x;
            o1 = o1 + pr * v.y;
        }
    }
    if (lid < GROUP * C) {
        let j  = lid / C;
        let bl = lid % C;
        if (bl < nbk) {
            var l = 0.0;
            for (var k = 0u; k < 32u; k++) { l = l + e_s[j * NP + 32u * bl + k]; }
            lb_s[lid] = l;
            var mm = mb_s[j * C];
            for (var k = 1u; k < nbk; k++) { mm = max(mm, mb_s[j * C + k]); }
            ab_s[lid] = exp_fixed(mb_s[lid] - mm);
        }
    }
    if (b >= 1u && b < nbk) {
        for (var j = 0u; j < GROUP; j++) {
            let at = ((b - 1u) * GROUP + j) * HD + 2u * dp;
            ra[at] = o0[j];
            ra[at + 1u] = o1[j];
        }
    }
    workgroupBarrier();

    // 5. The chunk: threads of block 0 join the blocks in order; threads j < G its (M, L).
    if (b == 0u) {
        for (var j = 0u; j < GROUP; j++) {
            var x0 = 0.0;
            var x1 = 0.0;
            for (var bl = 0u; bl < nbk; bl++) {
                var y0 = o0[j];
                var y1 = o1[j];
                if (bl > 0u) {
                    let at = ((bl - 1u) * GROUP + j) * HD + 2u * dp;
                    y0 = ra[at];
                    y1 = ra[at + 1u];
                }
                x0 = x0 + mul_rn(ab_s[j * C + bl], y0);
                x1 = x1 + mul_rn(ab_s[j * C + bl], y1);
            }
            let o = ((row0 + j) * p.nch_ld + ch) * HD + 2u * dp;
            part[o] = x0;
            part[o + 1u] = x1;
        }
    }
    if (lid < GROUP) {
        var mm = mb_s[lid * C];
        var l  = 0.0;
        for (var k = 0u; k < nbk; k++) {
            mm = max(mm, mb_s[lid * C + k]);
            l  = l + mul_rn(ab_s[lid * C + k], lb_s[lid * C + k]);
        }
        let at = 2u * ((row0 + lid) * p.nch_ld + ch);
        ml[at] = mm;
        ml[at + 1u] = l;
    }
}
