// attention_split_pvt: split attention's P·V for one query over an f16 cache, for a row of at most
// 512 positions (one superblock: longer rows are in issue 52's block order, attention_paged_super.wgsl /
// attention_block_pv.wgsl), a tile of the row x DS dimensions of one KV head per workgroup, all G
// query heads of the group at once (webgpu_attention_split.cpp), with the CPU's operations in the
// CPU's order (cpu::attention_row's single-pass softmax):
//   l[j]    = the row's block sums of attention_split_softmax.wgsl (whose e are exp(s - m)) added
//             in order from 0, inv[j] = 1 / l[j] (correctly rounded);
//   prob    = f16(e * inv[j]);
//   part[t][kvh G + j][d] = the sum of prob * v[pos][kvh hd + d]: each block of 32 positions summed
//             in position order from 0, then the blocks in order from 0 (products of two f16 values,
//             exact in f32, so a fused multiply-add gives the same bits): the output, which
//             attention_split_combine.wgsl copies to `out` (or the o-projection's prologue reads
//             where the combine is deferred, lib/decode_io.wgsl PARTS).
// Unlike attention_split_pv.wgsl (a thread walks 32 positions of global memory, 4 query heads read V
// four times), the workgroup stages its V tile (512 rows x DS halves, 32-byte row segments) and the
// probabilities in workgroup memory with all loads in flight, and thread (block, d) then sums its
// block of 32 positions for every query head from there: V is read once, by HD / DS x n_head_kv
// workgroups.
//
//   e: the softmax kernel's [T][n_head_kv][G][ld] f32   bsum: [T][n_head_kv][G][bsum_ld] f32
//   v_cache: [n_head_kv hd, rows] f16, 8 per vec4<u32> (v_offset and a row a multiple of 8 elements)
//   part: [T][n_head][hd] f32
// Every loop has a fixed trip count, so that all of a thread's loads are in flight at once instead
// of one latency per iteration: V rows by vec4 loads, positions past the column's end staged as zeros
// (their products add +0, which leaves every sum's bits as they are: the sums are never -0), the
// block sums of the normalizer loaded before they are added.
// Bindings: 0 e, 1 bsum, 2 v_cache, 3 cols, 4 pages (read); 5 part (read_write); 6 params
// Dispatch: (HD / DS, n_head_kv, T): x = the slice of DS dimensions.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"

override HD: u32 = 128u;      // head_dim, a multiple of DS
override GROUP: u32 = 4u;     // G = n_head / n_head_kv, at most 16
override DS: u32 = 16u;       // dimensions per workgroup (16: threads = 16 blocks x 16 dimensions)

const WG: u32 = 256u;
const SUPER: u32 = 512u;                // the longest row (cpu::k_pos_super)
override JV: u32 = (GROUP + 3u) / 4u;   // vec4s of query heads (at most 4)
override VW: u32 = DS / 2u;             // u32 words of a tile row
override VS: u32 = VW + 1u;             // its stride in workgroup memory (odd: rows 32 apart in other banks)

struct Params {
    n_embd_kv: u32,    // cache elements per row
    v_offset: u32,     // element index of v_cache[0, 0] (even)
    ld: u32,           // f32 elements between rows of e
    bsum_ld: u32,      // f32 elements between rows of bsum
    n_head_kv: u32,
    pos0: u32,         // without PAGED: position of column 0
    max_pages: u32,
    cols_offset: u32,
    pages_offset: u32,
    rn_zero: u32,      // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> e: array<f32>;
@group(0) @binding(1) var<storage, read> bsum: array<f32>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> cols: array<i32>;
@group(0) @binding(4) var<storage, read> pages: array<i32>;
@group(0) @binding(5) var<storage, read_write> part: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> v_s: array<u32, SUPER * VS>;         // [position][word]: the V tile
var<workgroup> p_s: array<vec4<f32>, SUPER * JV>;   // [position][heads 4m..4m+3]: probabilities; then block sums
var<workgroup> inv_s: array<f32, 16>;               // [j]

// Thread lid's e values of the row's positions (0 past the column's end or for missing heads).
fn load_e(ev: ptr<function, array<f32, 32>>, lid: u32, row0: u32, np: u32) {
    for (var k = 0u; k < SUPER * 4u * JV / WG; k++) {
        let i = lid + k * WG;
        let r = i / (4u * JV);
        let j = i % (4u * JV);
        (*ev)[k] = 0.0;
        if (r < np && j < GROUP) { (*ev)[k] = e[(row0 + j) * p.ld + r]; }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t     = wid.z;
    let kvh   = wid.y;
    let slice = wid.x;
    let col   = kv_column_uniform(lid, t);
    let np    = col.pos + 1u;      // the row's positions (at most SUPER)
    let nb    = (np + 31u) / 32u;  // blocks of 32 positions
    let row0  = (t * p.n_head_kv + kvh) * GROUP;

    // 1. The V tile's loads first (in flight while the normalizer is summed): word w of row r.
    let first = kvh * HD + slice * DS;  // element index in a cache row
    // Quarter q of row r: vec4 (p.v_offset + row n_embd_kv + first) / 8 + q, all loaded, then stored.
    var vq: array<vec4<u32>, 4>;  // SUPER VW / 4 / WG = 4 (DS = 16)
    for (var k = 0u; k < SUPER * VW / 4u / WG; k++) {
        let i = lid + k * WG;
        let r = i / (VW / 4u);
        vq[k] = vec4<u32>(0u);
        if (r < np) {
            vq[k] = v_cache[(p.v_offset + kv_row(col, r) * p.n_embd_kv + first) / 8u + i % (VW / 4u)];
        }
    }
    // The probabilities' e values too (into registers: their loads in flight with the others).
    var ev: array<f32, 32>;  // [k]: position (lid + k WG) / (4 JV), head (lid + k WG) % (4 JV)
    load_e(&ev, lid, row0, np);
    // The row's 16 block sums of head lid as well (+0 past the column's blocks, which leaves
    // the sum's bits as they are): every global load is issued before any store to workgroup memory,
    // so their latencies overlap.
    var bs: array<f32, 16>;
    for (var b = 0u; b < 16u; b++) {
        bs[b] = 0.0;
        if (lid < GROUP && b < nb) { bs[b] = bsum[(row0 + lid) * p.bsum_ld + b]; }
    }
    for (var k = 0u; k < SUPER * VW / 4u / WG; k++) {
        let i = lid + k * WG;
        let at = (i / (VW / 4u)) * VS + 4u * (i % (VW / 4u));
        for (var c = 0u; c < 4u; c++) { v_s[at + c] = vq[k][c]; }
    }

    // 2. The normalizers: thread j adds its row's block sums in order.
    if (lid < GROUP) {
        var l = 0.0;
        for (var b = 0u; b < 16u; b++) { l = l + bs[b]; }
        inv_s[lid] = div_rn(1.0, l);
    }
    workgroupBarrier();

    // 3. The probabilities of the row, f16-rounded, 4 heads per vec4 (0 for missing heads).
    for (var k = 0u; k < SUPER * 4u * JV / WG; k++) {
        let i = lid + k * WG;
        let r = i / (4u * JV);
        let j = i % (4u * JV);
        var pr = 0.0;
        if (r < np && j < GROUP) { pr = round_f16(ev[k] * inv_s[j]); }
        p_s[i / 4u][i % 4u] = pr;
    }
    workgroupBarrier();

    // 4. Thread (block b, dimension d): the block's 32 positions in order, every head at once.
    let b   = lid / DS;
    let d   = lid % DS;
    var acc: array<vec4<f32>, 4>;
    for (var m = 0u; m < JV; m++) { acc[m] = vec4<f32>(0.0); }
    // A block past the row's positions keeps +0 (what its zeros would add up to: the sums
    // are never -0); inside, 32 positions always: past np, V and the probabilities are 0 (+0 added).
    if (b < nb) {
        for (var k = 0u; k < 32u; k++) {
            let r  = 32u * b + k;
            let vv = unpack2x16float(v_s[r * VS + d / 2u]);
            let v  = select(vv.x, vv.y, (d & 1u) != 0u);
            for (var m = 0u; m < JV; m++) { acc[m] = acc[m] + p_s[r * JV + m] * v; }
        }
    }
    workgroupBarrier();
    for (var m = 0u; m < JV; m++) { p_s[lid * JV + m] = acc[m]; }  // [block][d][m]
    workgroupBarrier();

    // 5. The row: its blocks in order, threads (d, m).
    if (lid < DS * JV) {
        let dd = lid / JV;
        let m  = lid % JV;
        var s  = vec4<f32>(0.0);
        for (var bb = 0u; bb < WG / DS; bb++) { s = s + p_s[(bb * DS + dd) * JV + m]; }  // past nb: +0
        for (var c = 0u; c < 4u; c++) {
            let j = 4u * m + c;
            if (j < GROUP) { part[(row0 + j) * HD + slice * DS + dd] = s[c]; }
        }
    }
}
