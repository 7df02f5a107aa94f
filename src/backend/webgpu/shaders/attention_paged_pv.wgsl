// attention_paged_pv: the P·V kernel of a paged batch's split attention (webgpu_attention_split.cpp;
// the batch-1 forms are attention_split_pv / _pvt), the same operations in the same order as
// attention_split_pv.wgsl and the CPU (CpuBackend::attention):
//   sum[j]  = the softmax kernel's block sums added in cpu::sum_positions's order (the blocks of each
//             superblock of 512 positions in order from 0, the superblocks in order from 0),
//             inv[j] = 1 / sum[j] (correctly rounded);
//   prob    = e * inv[j], rounded to f16 with an f16 V cache;
//   out[t][(kvh G + j) hd + d] = sum over positions of prob * v[pos][kvh hd + d] in
//             cpu::sum_positions's order (blocks of 32 positions in order from 0, the blocks of a
//             superblock in order from 0, the superblocks in order from 0), the products of two f16
//             values exact in f32, an f32 cache's rounded (mul_rn).
// What differs is the mapping, made for many short contexts (a decode step of 64 sequences at a few
// hundred positions each): thread (pair, block) holds two adjacent output dimensions of all G query
// heads for one block of 32 positions of the superblock, so a warp's V loads are consecutive words
// of a row (attention_split_pv's threads each read another block's row: one 32-byte sector per
// thread and load) and each V word is read once for the G heads; the G probabilities of 4 positions
// come in one vec4 load per head (the same address for the threads of a block).
//
//   e: the softmax kernel's [T][n_head_kv][G][ld] f32 (ld a multiple of 4)   bsum: [T][n_head_kv][G][bsum_ld] f32
//   v_cache: [n_head_kv hd, rows] f16 pairs or f32 (u32 words)   out: [n_head hd, T] f32
// Bindings: 0 e, 1 bsum, 2 v_cache, 3 cols, 4 pages (read); 5 out (read_write); 6 params
// Dispatch: (ceil(hd / (2 NL)), n_head_kv, T). Per superblock of the column: threads (block k, pair l)
// sum their block into workgroup memory, then threads (j, d) add the superblock's 16 blocks in order
// and the superblock to their running total.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"
// #include "lib/normalizer_total.wgsl"

override HD: u32 = 128u;      // head_dim, even
override GROUP: u32 = 4u;     // G = n_head / n_head_kv, at most 16
override NL: u32 = 16u;       // dimension pairs per workgroup (16 GROUP NL <= 4096: part_s)
override WG: u32 = 16u * NL;  // one thread per (block of the superblock, pair)
override V_F16: bool = true;
override PU: u32 = 8u;        // positions whose loads are issued before their products are added (4, 8 or 16; PU G <= 128)
override SPR: u32 = WG / GROUP;  // superblock sums of the normalizer per pass

struct Params {
    n_embd_kv: u32,    // cache elements per row
    v_offset: u32,     // element index of v_cache[0, 0] (even with an f16 cache)
    ld: u32,           // f32 elements between rows of e, a multiple of 4
    bsum_ld: u32,      // f32 elements between rows of bsum
    n_head_kv: u32,
    pos0: u32,         // (without PAGED: position of column 0)
    max_pages: u32,
    cols_offset: u32,
    pages_offset: u32,
    out_offset: u32,   // f32 index of out[0, 0]
    out_stride: u32,   // f32 elements between columns of out
    rn_zero: u32,      // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> e: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> bsum: array<f32>;
@group(0) @binding(2) var<storage, read> v_cache: array<u32>;
@group(0) @binding(3) var<storage, read> cols: array<i32>;
@group(0) @binding(4) var<storage, read> pages: array<i32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> sup_s: array<f32, WG>;                      // [j][superblock of the pass]
var<workgroup> inv_s: array<f32, 16>;                      // [j]
var<workgroup> part_s: array<f32, 16u * GROUP * 2u * NL>;  // [block of the superblock][j][dimension]

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t    = wid.z;
    let kvh  = wid.y;
    let col  = kv_column_uniform(lid, t);
    let n    = col.pos + 1u;
    let nb   = (n + 31u) / 32u;   // blocks of 32 positions
    let nsb  = (nb + 15u) / 16u;  // superblocks of 16 blocks
    let row0 = (t * p.n_head_kv + kvh) * GROUP;

    // 1. The normalizers (lib/normalizer_total.wgsl).
    let total = normalizer_total(lid, GROUP, row0, p.bsum_ld, nb, nsb);
    if (lid < GROUP) { inv_s[lid] = div_rn(1.0, total); }
    workgroupBarrier();
    var inv: array<f32, 16>;
    for (var j = 0u; j < GROUP; j++) { inv[j] = inv_s[j]; }

    // 2. P·V by superblocks: thread (block k of the superblock, pair l).
    let l      = lid % NL;
    let k      = lid / NL;
    let d0     = wid.x * 2u * NL + 2u * l;  // this thread's first dimension
    let first  = kvh * HD + d0;             // its element in a cache row
    let e_row4 = row0 * (p.ld / 4u);        // vec4 index of e[t][kvh][0][0]
    let ld4    = p.ld / 4u;
    var tot    = 0.0;                       // thread (j, d) = lid < 2 G NL: the closed superblocks
    for (var sb = 0u; sb < nsb; sb++) {
        let b = 16u * sb + k;
        var acc = array<f32, 32>();  // [j][2]
        if (b < nb && d0 < HD) {
            let end  = min(32u * b + 32u, n);
            let base = kv_row(col, 32u * b);  // (the block's rows: lib/kv_pages.wgsl)
            for (var pos0 = 32u * b; pos0 < end; pos0 += PU) {
                // PU positions' loads first, all in flight together, then their products in order.
                var es: array<vec4<f32>, 32>;  // [u / 4][j]
                var vw: array<u32, 32>;        // [u][2]
                for (var u4 = 0u; u4 < PU / 4u; u4++) {
                    if (pos0 + 4u * u4 < end) {
                        for (var j = 0u; j < GROUP; j++) { es[u4 * GROUP + j] = e[e_row4 + j * ld4 + pos0 / 4u + u4]; }
                    }
                }
                for (var u = 0u; u < PU; u++) {
                    let pos = pos0 + u;
                    if (pos < end) {
                        let e0 = p.v_offset + kv_row_in_block(col, base, 32u * b, pos) * p.n_embd_kv + first;
                        if (V_F16) {
                            vw[2u * u] = v_cache[e0 / 2u];
                        } else {
                            vw[2u * u] = v_cache[e0];
                            vw[2u * u + 1u] = v_cache[e0 + 1u];
                        }
                    }
                }
                for (var u = 0u; u < PU; u++) {
                    if (pos0 + u < end) {
                        var v: vec2<f32>;
                        if (V_F16) {
                            v = unpack2x16float(vw[2u * u]);
                        } else {
                            v = vec2<f32>(bitcast<f32>(vw[2u * u]), bitcast<f32>(vw[2u * u + 1u]));
                        }
                        for (var j = 0u; j < GROUP; j++) {
                            var pr = es[(u / 4u) * GROUP + j][u % 4u] * inv[j];
                            if (V_F16) {
                                pr = round_f16(pr);
                                acc[2u * j]      = acc[2u * j] + pr * v.x;  // exact products: no rounding to keep
                                acc[2u * j + 1u] = acc[2u * j + 1u] + pr * v.y;
                            } else {
                                acc[2u * j]      = acc[2u * j] + mul_rn(pr, v.x);
                                acc[2u * j + 1u] = acc[2u * j + 1u] + mul_rn(pr, v.y);
                            }
                        }
                    }
                }
            }
        }
        for (var j = 0u; j < GROUP; j++) {
            part_s[(k * GROUP + j) * 2u * NL + 2u * l]      = acc[2u * j];
            part_s[(k * GROUP + j) * 2u * NL + 2u * l + 1u] = acc[2u * j + 1u];
        }
        workgroupBarrier();
        if (lid < 2u * GROUP * NL) {  // thread (j, d): the superblock's blocks in order, then the total
            var s = 0.0;
            for (var kk = 0u; kk < 16u; kk++) {
                if (16u * sb + kk < nb) { s = s + part_s[kk * 2u * GROUP * NL + lid]; }
            }
            tot = tot + s;
        }
        workgroupBarrier();
    }
    if (lid < 2u * GROUP * NL) {
        let j = lid / (2u * NL);
        let d = wid.x * 2u * NL + lid % (2u * NL);
        if (d < HD) { out[p.out_offset + t * p.out_stride + (kvh * GROUP + j) * HD + d] = tot; }
    }
}
