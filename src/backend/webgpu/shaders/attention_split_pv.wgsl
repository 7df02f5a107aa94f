// attention_split_pv: the last split attention kernel (webgpu_attention_split.cpp): per column, KV
// head and group of DG output dimensions, over every position of a row of at most 512 positions (one
// superblock: longer rows are in issue 52's block order, attention_paged_super.wgsl /
// attention_block_pv.wgsl), with the CPU's operations in the CPU's order (cpu::attention_row's
// single-pass softmax):
//   l[j]    = the row's block sums of attention_split_softmax.wgsl (e = exp(s - m)) in order from
//             0, inv[j] = 1 / l[j] (correctly rounded);
//   prob    = e * inv[j], rounded to f16 with an f16 V cache;
//   out[t][(kvh G + j) hd + d] = the sum of prob * v[pos][kvh hd + d], blocks of 32 positions in
//             order from 0, then the blocks in order from 0, the products of two f16 values exact in
//             f32, an f32 cache's rounded (mul_rn).
// No partial sums leave the workgroup, so no combine follows.
//
//   e: the softmax kernel's [T][n_head_kv][G][ld] f32   bsum: [T][n_head_kv][G][bsum_ld] f32
//   v_cache: [n_head_kv hd, rows] f16 pairs or f32 (u32 words)   out: [n_head hd, T] f32
// Bindings: 0 e, 1 bsum, 2 v_cache, 3 cols, 4 pages (read); 5 out (read_write); 6 params
// Dispatch: (hd / DG, n_head_kv * GROUP / JG, T): JG query heads of a group per workgroup (JG < G: more
// workgroups, each reading its V rows again, for one column over a long context). Thread (j, block)
// of RB blocks per head (RB >= 16: the row's at most 16 blocks of 32 at once) sums its block's 32
// positions for the DG dimensions (loading PU positions ahead) into workgroup memory, then threads
// (j, d) add the blocks in order.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"

override WG: u32 = 256u;
override HD: u32 = 128u;      // head_dim
override GROUP: u32 = 4u;     // G = n_head / n_head_kv, at most 16
override DG: u32 = 8u;        // output dimensions per workgroup: even, dividing HD, at most 16
override V_F16: bool = true;
override JG: u32 = GROUP;     // query heads per workgroup (dividing GROUP): fewer, more workgroups
override RB: u32 = 64u;       // threads per query head: a multiple of 16 with JG * RB <= WG
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
    rn_zero: u32,      // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> e: array<f32>;
@group(0) @binding(1) var<storage, read> bsum: array<f32>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;  // u32 word i: [i / 4][i % 4]
@group(0) @binding(3) var<storage, read> cols: array<i32>;
@group(0) @binding(4) var<storage, read> pages: array<i32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> inv_s: array<f32, 16>;             // [j]: 1 / l
var<workgroup> part_s: array<f32, JG * RB * DG>;  // [j][block][d]

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
    let nb   = (n + 31u) / 32u;   // blocks of 32 positions (at most 16)
    let row0 = (t * p.n_head_kv + kvh) * GROUP + jg * JG;

    // 1. The normalizers: thread j adds its row's block sums in order.
    if (lid < JG) {
        var l = 0.0;
        for (var b = 0u; b < nb; b++) { l = l + bsum[(row0 + lid) * p.bsum_ld + b]; }
        inv_s[lid] = div_rn(1.0, l);
    }
    workgroupBarrier();

    // 2. P·V: thread (j, block b) its block's 32 positions.
    let first = kvh * HD + dg * DG;
    let j     = lid / RB;
    let b     = lid % RB;
    if (j < JG) {
        var acc = array<f32, 16>();
        if (b < nb) {
            let inv  = inv_s[j];
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
        for (var d = 0u; d < DG; d++) { part_s[(j * RB + b) * DG + d] = acc[d]; }
    }
    workgroupBarrier();
    // 3. The row: threads (j, d) add the blocks in order.
    if (lid < JG * DG) {
        let jj = lid / DG;
        let d  = lid % DG;
        var s  = 0.0;
        for (var k = 0u; k < nb; k++) { s = s + part_s[(jj * RB + k) * DG + d]; }
        out[p.out_offset + t * p.out_stride + (kvh * GROUP + jg * JG + jj) * HD + dg * DG + d] = s;
    }
}
