// attention_split_pvs: split attention's P·V a superblock of 512 positions per workgroup
// (webgpu_attention_split.cpp; WebGpuTuning::attn_split_super), with the CPU's operations in the
// CPU's order (CpuBackend::attention, cpu::PositionSum):
//   sum     = the block sums of attention_split_softmax.wgsl added in cpu::sum_positions's order
//             (each superblock's blocks in order from 0, then the superblocks in order from 0),
//             inv = 1 / sum (correctly rounded);
//   prob    = e * inv, rounded to f16 with an f16 V cache;
//   part[t][h][sb][d] = this superblock's sum of prob * v[pos][kvh hd + d]: each block of 32
//             positions summed in position order from 0, then the blocks in order from 0 (the
//             products of two f16 values exact in f32, an f32 cache's rounded: mul_rn).
// cpu::PositionSum adds the superblocks to a total in order (attention_split_combine.wgsl does,
// after this kernel), so splitting the positions at superblocks changes no bit. Every thread loads
// one position's probability and V words at a time (all loads of a half superblock in flight
// together; attention_split_pv.wgsl walks 32 positions per thread), the products go through
// workgroup memory, and threads (block, d) add a block's 32 in order.
//
//   e: the softmax kernel's [T][n_head_kv][G][ld] f32   bsum: [T][n_head_kv][G][bsum_ld] f32
//   v_cache: [n_head_kv hd, rows] f16 pairs or f32 (u32 words)   part: [T][n_head][nsb_ld][hd] f32
// Bindings: 0 e, 1 bsum, 2 v_cache, 3 cols, 4 pages (read); 5 part (read_write); 6 params
// Dispatch: (hd / DG * nsb_ld, n_head_kv * GROUP, T): x = superblock * (hd / DG) + group of DG
// dimensions; a workgroup past its column's last superblock returns at once.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"

override WG: u32 = 256u;      // threads: positions per half superblock (256)
override HD: u32 = 128u;      // head_dim
override GROUP: u32 = 4u;     // G = n_head / n_head_kv
override DG: u32 = 8u;        // output dimensions per workgroup: even, dividing HD, at most 16
override V_F16: bool = true;

const SUPER: u32 = 512u;      // positions per superblock (cpu::k_pos_super)
const HALF: u32 = 256u;       // positions per pass (WG)

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
    nsb_ld: u32,       // superblocks per (column, head) row of part
    rn_zero: u32,      // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> e: array<f32>;
@group(0) @binding(1) var<storage, read> bsum: array<f32>;
@group(0) @binding(2) var<storage, read> v_cache: array<u32>;
@group(0) @binding(3) var<storage, read> cols: array<i32>;
@group(0) @binding(4) var<storage, read> pages: array<i32>;
@group(0) @binding(5) var<storage, read_write> part: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> bs_s: array<f32, WG>;          // block sums of exp, WG at a time
var<workgroup> sup_s: array<f32, 16>;         // their superblock sums, 16 at a time
var<workgroup> inv_s: f32;
var<workgroup> prod_s: array<f32, HALF * DG>;  // [position of the half][d]
var<workgroup> blk_s: array<f32, 16u * DG>;    // [block of the superblock][d]

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t    = wid.z;
    let h    = wid.y;  // query head
    let kvh  = h / GROUP;
    let ndg  = HD / DG;
    let dg   = wid.x % ndg;
    let sb   = wid.x / ndg;
    let col  = kv_column_uniform(lid, t);
    let n    = col.pos + 1u;
    let nb   = (n + 31u) / 32u;   // blocks of 32 positions
    let nsb  = (nb + 15u) / 16u;  // superblocks of 16 blocks
    if (sb >= nsb) { return; }    // (uniform: the column is)
    let row = (t * p.n_head_kv + kvh) * GROUP + h % GROUP;

    // 1. The normalizer: the block sums loaded WG at a time (all loads in flight), each
    //    superblock's 16 added in order by one thread, the superblocks in order by thread 0.
    var total = 0.0;
    for (var b0 = 0u; b0 < nb; b0 += WG) {
        let b = b0 + lid;
        bs_s[lid] = select(0.0, bsum[row * p.bsum_ld + min(b, nb - 1u)], b < nb);
        workgroupBarrier();
        if (lid < WG / 16u) {
            var s = 0.0;
            for (var k = 0u; k < 16u; k++) {
                if (b0 + 16u * lid + k < nb) { s = s + bs_s[16u * lid + k]; }
            }
            sup_s[lid] = s;
        }
        workgroupBarrier();
        if (lid == 0u) {
            for (var k = 0u; k < WG / 16u; k++) {
                if (b0 + 16u * k < nb) { total = total + sup_s[k]; }
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) { inv_s = div_rn(1.0, total); }
    let inv = workgroupUniformLoad(&inv_s);

    // 2. This superblock's positions, a half (256) at a time: thread lid's position's products into
    //    prod_s, then threads (block, d) add each block's 32 in order.
    let first = kvh * HD + dg * DG;
    let pbeg  = SUPER * sb;
    let pend  = min(pbeg + SUPER, n);
    for (var half = 0u; half < 2u; half++) {
        let h0  = pbeg + HALF * half;
        let pos = h0 + lid;
        if (pos < pend) {
            var pr = e[row * p.ld + pos] * inv;
            if (V_F16) { pr = round_f16(pr); }
            let e0 = p.v_offset + kv_row(col, pos) * p.n_embd_kv + first;  // element index
            if (V_F16) {
                var vw: array<u32, 8>;
                for (var w = 0u; w < DG / 2u; w++) { vw[w] = v_cache[e0 / 2u + w]; }
                for (var w = 0u; w < DG / 2u; w++) {
                    let v = unpack2x16float(vw[w]);
                    prod_s[lid * DG + 2u * w]      = pr * v.x;  // exact products: no rounding to keep
                    prod_s[lid * DG + 2u * w + 1u] = pr * v.y;
                }
            } else {
                var vw: array<u32, 16>;
                for (var d = 0u; d < DG; d++) { vw[d] = v_cache[e0 + d]; }
                for (var d = 0u; d < DG; d++) { prod_s[lid * DG + d] = mul_rn(pr, bitcast<f32>(vw[d])); }
            }
        }
        workgroupBarrier();
        if (lid < 8u * DG) {
            let b  = lid / DG;  // block of the half
            let d  = lid % DG;
            let p0 = 32u * b;
            let p1 = min(p0 + 32u, select(0u, pend - h0, pend > h0));
            var s  = 0.0;
            for (var q = p0; q < p1; q++) { s = s + prod_s[q * DG + d]; }
            blk_s[(8u * half + b) * DG + d] = s;
        }
        workgroupBarrier();
    }

    // 3. The superblock: its blocks in order.
    if (lid < DG) {
        let nbl = (pend - pbeg + 31u) / 32u;
        var s   = 0.0;
        for (var b = 0u; b < nbl; b++) { s = s + blk_s[b * DG + lid]; }
        part[((t * p.n_head_kv * GROUP + h) * p.nsb_ld + sb) * HD + dg * DG + lid] = s;
    }
}
