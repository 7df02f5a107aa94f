// attention_split_pv: the last split attention kernel (webgpu_attention_split.cpp): per column, KV
// (Since issue 52's block order: rows of at most 512 positions only, one superblock, whose weights
// below are exactly 1; longer rows: attention_paged_super.wgsl / attention_block_pv.wgsl.)
// head and group of DG output dimensions, over every position the column sees, with the CPU's
// operations in the CPU's order (CpuBackend::attention: each superblock c of 512 positions on its
// own, then the superblock combine):
//   l_c[j]  = superblock c's block sums of attention_split_softmax.wgsl (e = exp(s - m_c)) in order
//             from 0, inv_c[j] = 1 / l_c[j] (correctly rounded);
//   prob    = e * inv_c[j], rounded to f16 with an f16 V cache;
//   o_c[d]  = superblock c's sum of prob * v[pos][kvh hd + d], blocks of 32 positions in order from
//             0, then the blocks in order from 0, the products of two f16 values exact in f32, an
//             f32 cache's rounded (mul_rn);
//   M, L, r_c = a_c / L (lib/normalizer_total.wgsl), out[t][(kvh G + j) hd + d] = ((0 + r_0 o_0[d])
//             + r_1 o_1[d]) + ...  (one superblock: out = o_0)
// No partial sums leave the workgroup, so no combine follows.
//
//   e: the softmax kernel's [T][n_head_kv][G][ld] f32   bsum: [T][n_head_kv][G][bsum_ld] f32
//   sml: the softmax kernel's [T][n_head_kv][G][nsb_ld][2] f32 (m_c at [..][c][0])
//   v_cache: [n_head_kv hd, rows] f16 pairs or f32 (u32 words)   out: [n_head hd, T] f32
// Bindings: 0 e, 1 bsum, 2 v_cache, 3 cols, 4 pages, 5 sml (read); 6 out (read_write); 7 params
// Dispatch: (hd / DG, n_head_kv * GROUP / JG, T): JG query heads of a group per workgroup (JG < G: more
// workgroups, each reading its V rows again, for one column over a long context). The positions go in rounds of RB blocks of 32; thread (j, block)
// sums its block's 32 positions for the DG dimensions (loading PU positions ahead) into workgroup memory, then threads
// (j, superblock, d) add the round's superblocks' blocks in order and threads (j, d) add the
// superblocks, each times its r_c, to their running totals in order.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"
// #include "lib/normalizer_total.wgsl"

override WG: u32 = 256u;
override HD: u32 = 128u;      // head_dim
override GROUP: u32 = 4u;     // G = n_head / n_head_kv, at most 16
override DG: u32 = 8u;        // output dimensions per workgroup: even, dividing HD, at most 16
override V_F16: bool = true;
override JG: u32 = GROUP;     // query heads per workgroup (dividing GROUP): fewer, more workgroups
override RB: u32 = 64u;       // blocks per round: a multiple of 16 with JG * RB <= WG
override SPR: u32 = WG / JG;  // superblock sums of the normalizer per pass
override PU: u32 = 4u;        // positions whose loads are issued before their products are added (1..8)
override V_VEC: bool = false; // the host sets it where V_F16, DG is a multiple of 8 and every row's slice is 16-byte
                              // aligned: a position's DG / 2 words by vec4 loads, one load instead of 4 per 8
                              // dimensions (H200, 64 streams d256: 9,849.5 vs 8,905.7 tok/s)

struct Params {
    n_embd_kv: u32,    // cache elements per row
    v_offset: u32,     // element index of v_cache[0, 0]
    ld: u32,           // f32 elements between rows of e
    bsum_ld: u32,      // f32 elements between rows of bsum
    n_head_kv: u32,
    pos0: u32,         // without PAGED: position of column 0
    max_pages: u32,
    cols_offset: u32,
    pages_offset: u32,
    out_offset: u32,   // f32 index of out[0, 0]
    out_stride: u32,   // f32 elements between columns of out
    nsb_ld: u32,       // superblocks per row of sml
    rn_zero: u32,      // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> e: array<f32>;
@group(0) @binding(1) var<storage, read> bsum: array<f32>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;  // u32 word i: [i / 4][i % 4]
@group(0) @binding(3) var<storage, read> cols: array<i32>;
@group(0) @binding(4) var<storage, read> pages: array<i32>;
@group(0) @binding(5) var<storage, read> sml: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> sup_s: array<f32, WG>;                // [j][superblock of the pass]
var<workgroup> max_s: array<f32, 16>;                // [j]: M (lib/normalizer_total.wgsl)
var<workgroup> den_s: array<f32, 16>;                // [j]: L
var<workgroup> inv_r: array<f32, JG * (RB / 16u)>;   // [j][superblock of the round]: 1 / l_c
var<workgroup> w_r: array<f32, JG * (RB / 16u)>;     // [j][superblock of the round]: r_c = a_c / L
var<workgroup> part_s: array<f32, JG * RB * DG>;  // [j][block of the round][d]
var<workgroup> psup_s: array<f32, JG * (RB / 16u) * DG>;  // [j][superblock of the round][d]
var<workgroup> tot_s: array<f32, JG * DG>;        // [j][d]: the closed superblocks

const VW: u32 = 16u;  // u32 words per position in the staged V words (DG <= 16 f32 or f16 pairs)

// Adds the products of one position (staged V words vw[u VW ..]) to acc.
fn add_position(acc: ptr<function, array<f32, 16>>, pr: f32, vw: ptr<function, array<u32, 128>>, u: u32) {
    if (V_F16) {
        for (var w = 0u; w < DG / 2u; w++) {
            let v = unpack2x16float((*vw)[u * VW + w]);
            (*acc)[2u * w]      = (*acc)[2u * w] + pr * v.x;  // exact products: no rounding to keep
            (*acc)[2u * w + 1u] = (*acc)[2u * w + 1u] + pr * v.y;
        }
    } else {
        for (var d = 0u; d < DG; d++) {
            (*acc)[d] = (*acc)[d] + mul_rn(pr, bitcast<f32>((*vw)[u * VW + d]));
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t    = wid.z;
    let kvh  = wid.y / (GROUP / JG);
    let jg   = wid.y % (GROUP / JG);  // this workgroup's query heads: jg JG .. jg JG + JG - 1 of the group
    let dg   = wid.x;
    let col  = kv_column_uniform(lid, t);
    let n    = col.pos + 1u;
    let nb   = (n + 31u) / 32u;   // blocks of 32 positions
    let nsb  = (nb + 15u) / 16u;  // superblocks of 16 blocks
    let row0 = (t * p.n_head_kv + kvh) * GROUP + jg * JG;

    // 1. The combine's denominators L (lib/normalizer_total.wgsl).
    let total = normalizer_total(lid, JG, row0, p.bsum_ld, p.nsb_ld, nb, nsb);
    if (lid < JG) { den_s[lid] = total; }
    if (lid < JG * DG) { tot_s[lid] = 0.0; }
    workgroupBarrier();

    // 2. P·V in rounds of RB blocks.
    let first = kvh * HD + dg * DG;
    let nsr   = RB / 16u;  // superblocks per round
    for (var b0 = 0u; b0 < nb; b0 += RB) {
        // The round's superblocks' 1 / l_c and weights r_c: threads (j, superblock of the round).
        if (lid < JG * nsr) {
            let jj = lid / nsr;
            let c  = b0 / 16u + lid % nsr;
            if (c < nsb) {
                let l = superblock_l(row0 + jj, p.bsum_ld, nb, c);
                let m = sml[2u * ((row0 + jj) * p.nsb_ld + c)];
                inv_r[lid] = div_rn(1.0, l);
                w_r[lid]   = div_rn(mul_rn(exp_fixed(m - max_s[jj]), l), den_s[jj]);
            }
        }
        workgroupBarrier();
        let j = lid / RB;
        let b = b0 + lid % RB;
        if (j < JG) {
            // (zeroed explicitly each round: a declaration without initializer in a loop body that
            // is passed by pointer kept the previous round's values on SwiftShader)
            var acc = array<f32, 16>();
            if (b < nb) {
                let inv  = inv_r[j * nsr + (lid % RB) / 16u];
                let erow = (row0 + j) * p.ld;
                let end  = min(32u * b + 32u, n);
                let base = kv_row(col, 32u * b);  // (the block's rows: lib/kv_pages.wgsl)
                // PU positions at a time: their loads first, all in flight together (one position's
                // memory latency instead of PU), then their products in position order.
                for (var pos0 = 32u * b; pos0 < end; pos0 += PU) {
                    var es: array<f32, 8>;
                    var vw: array<u32, 128>;
                    for (var u = 0u; u < PU; u++) {
                        let pos = pos0 + u;
                        if (pos < end) {
                            es[u] = e[erow + pos];
                            let e0 = p.v_offset + kv_row_in_block(col, base, 32u * b, pos) * p.n_embd_kv + first;
                            if (V_F16 && V_VEC) {
                                for (var h = 0u; h < DG / 8u; h++) {
                                    let x = v_cache[e0 / 8u + h];
                                    for (var c = 0u; c < 4u; c++) { vw[u * VW + 4u * h + c] = x[c]; }
                                }
                            } else if (V_F16) {
                                for (var w = 0u; w < DG / 2u; w++) {
                                    let i = e0 / 2u + w;
                                    vw[u * VW + w] = v_cache[i / 4u][i % 4u];
                                }
                            } else {
                                for (var d = 0u; d < DG; d++) { vw[u * VW + d] = v_cache[(e0 + d) / 4u][(e0 + d) % 4u]; }
                            }
                        }
                    }
                    for (var u = 0u; u < PU; u++) {
                        if (pos0 + u < end) {
                            var pr = es[u] * inv;
                            if (V_F16) { pr = round_f16(pr); }
                            add_position(&acc, pr, &vw, u);
                        }
                    }
                }
            }
            for (var d = 0u; d < DG; d++) { part_s[(j * RB + lid % RB) * DG + d] = acc[d]; }
        }
        workgroupBarrier();
        // The round's superblocks: threads (j, superblock, d).
        if (lid < JG * nsr * DG) {
            let jj = lid / (nsr * DG);
            let sr = (lid / DG) % nsr;
            let d  = lid % DG;
            var s  = 0.0;
            let bf = b0 + 16u * sr;
            for (var k = 0u; k < 16u; k++) {
                if (bf + k < nb) { s = s + part_s[(jj * RB + 16u * sr + k) * DG + d]; }
            }
            psup_s[lid] = s;
        }
        workgroupBarrier();
        if (lid < JG * DG) {
            let jj = lid / DG;
            let d  = lid % DG;
            var tot = tot_s[lid];
            for (var sr = 0u; sr < nsr; sr++) {
                if (b0 + 16u * sr < nb) { tot = tot + mul_rn(w_r[jj * nsr + sr], psup_s[(jj * nsr + sr) * DG + d]); }
            }
            tot_s[lid] = tot;
        }
        workgroupBarrier();
    }
    if (lid < JG * DG) {
        let jj = lid / DG;
        out[p.out_offset + t * p.out_stride + (kvh * GROUP + jg * JG + jj) * HD + dg * DG + lid % DG] = tot_s[lid];
    }
}
