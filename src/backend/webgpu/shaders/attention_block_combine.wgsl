// attention_block_combine: after attention_block_pv.wgsl (the block order of issue 52, the
// CPU reference's past 512 positions), each output row's chunk partials (M_c, L_c, O_c) joined in two levels,
// then the one normalisation (every op an f32 op rounded once):
//   superblock s = chunks [8 s, 8 s + 8) (512 positions; the last may be short), in chunk order:
//     M_s = max M_c;  A_c = exp_fixed(M_c - M_s);
//     L_s = ((0 + A_0 L_0) + A_1 L_1) + ...;  O_s[d] = ((0 + A_0 O_0[d]) + A_1 O_1[d]) + ...
//   the row = its superblocks joined the same way, in superblock order: M, L, O[d];
//   out[d] = O[d] * r,  r = 1 / L correctly rounded.
//
//   part: [T][n_head][nch_ld][HD] f32   ml: [T][n_head][nch_ld][2] f32   out: [n_head HD, T] f32
// Bindings: 0 part, 1 ml (read); 2 out (read_write); 3 params
// Dispatch: (n_head HD / DS, T), WG threads: a workgroup per (query head, slice of DS dimensions).
// Step 1: item (superblock s, k) per thread (k < DS: dimension k of the slice, k = DS: the normalizer),
// its superblock's 8 M_c and 8 values loaded at once (one round trip to memory), M_s and the A_c
// recomputed by each item (the same bits in each), the join into workgroup memory. Step 2 (one
// barrier later): threads d < DS join the <= NSB superblocks and write out[d].

// #include "lib/numerics.wgsl"

override HD: u32 = 128u;
override DS: u32 = 16u;    // dimensions per workgroup (divides HD)
override WG: u32 = 256u;   // threads
override NSB: u32 = 32u;   // the most superblocks a row may have (workgroup memory; the host's limit)
const NP: u32 = 64u;       // positions per chunk (2 blocks of 32: part of the order)
const SBC: u32 = 8u;       // chunks per superblock (512 positions)

struct Params {
    n_head: u32,
    nch_ld: u32,       // chunks per (column, head) row of part and ml
    pos0: u32,         // position of column 0
    out_offset: u32,   // f32 index of out[0, 0]
    out_stride: u32,   // f32 elements between columns of out
    rn_zero: u32,      // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read> ml: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> os: array<f32, NSB * DS>;  // [superblock][d]: O_s of the slice
var<workgroup> ls: array<f32, NSB>;       // L_s
var<workgroup> ms: array<f32, NSB>;       // M_s

const NEG_MAX: u32 = 0xff7fffffu;  // -FLT_MAX, as bits

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let hq    = wid.x / (HD / DS);
    let slice = wid.x % (HD / DS);
    let t     = wid.y;
    let n     = p.pos0 + t + 1u;
    let nch   = (n + NP - 1u) / NP;
    let nsb   = (nch + SBC - 1u) / SBC;
    let row   = (t * p.n_head + hq) * p.nch_ld;  // (column, head)'s first chunk

    // 1. The superblocks' joins.
    for (var i = lid; i < nsb * (DS + 1u); i += WG) {
        let s  = i / (DS + 1u);
        let k  = i % (DS + 1u);
        let c0 = row + SBC * s;
        let cn = min(SBC, nch - SBC * s);
        var mc: array<f32, SBC>;
        var x: array<f32, SBC>;
        for (var j = 0u; j < SBC; j++) {
            mc[j] = bitcast<f32>(NEG_MAX);
            x[j]  = 0.0;
            if (j < cn) {
                mc[j] = ml[2u * (c0 + j)];
                if (k < DS) {
                    x[j] = part[(c0 + j) * HD + slice * DS + k];
                } else {
                    x[j] = ml[2u * (c0 + j) + 1u];
                }
            }
        }
        var m = mc[0];
        for (var j = 1u; j < SBC; j++) { m = max(m, mc[j]); }  // (the -FLT_MAX fillers change nothing)
        var acc = 0.0;
        for (var j = 0u; j < SBC; j++) {
            if (j < cn) { acc = acc + mul_rn(exp_fixed(mc[j] - m), x[j]); }
        }
        if (k < DS) {
            os[s * DS + k] = acc;
        } else {
            ls[s] = acc;
            ms[s] = m;
        }
    }
    workgroupBarrier();

    // 2. The row: the superblocks joined in order, then O x (1 / L).
    if (lid < DS) {
        var m = ms[0];
        for (var s = 1u; s < nsb; s++) { m = max(m, ms[s]); }
        var l = 0.0;
        var o = 0.0;
        for (var s = 0u; s < nsb; s++) {
            let a = exp_fixed(ms[s] - m);
            l = l + mul_rn(a, ls[s]);
            o = o + mul_rn(a, os[s * DS + lid]);
        }
        out[p.out_offset + t * p.out_stride + hq * HD + slice * DS + lid] = mul_rn(o, div_rn(1.0, l));
    }
}
