// attention_block_combine: after attention_block_pv.wgsl (the block order, issue 52 prototype behind
// WebGpuTuning::attn_block_order), each output the chunks joined as that kernel joins blocks, in
// chunk order, then the one normalisation (every op an f32 op rounded once):
//   M = max_c M_c;  A_c = exp_fixed(M_c - M);  L = ((0 + A_0 L_0) + A_1 L_1) + ...;
//   O[d] = ((0 + A_0 O_0[d]) + A_1 O_1[d]) + ...;  out[d] = O[d] * r,  r = 1 / L correctly rounded.
//
//   part: [T][n_head][nch_ld][HD] f32   ml: [T][n_head][nch_ld][2] f32   out: [n_head hd, T] f32
// Bindings: 0 part, 1 ml (read); 2 out (read_write); 3 params
// Dispatch: (n_head HD / DS, T), NCH threads (at most NCH chunks per column, the host's limit): a
// workgroup per (query head, slice of DS dimensions). Every global load is issued at once into
// workgroup memory (thread c: chunk c's (M, L); the slice's O_c by all threads), M by a tree (max is
// exact in any order), A_c by thread c, then threads d < DS take L and O[d] in chunk order from
// workgroup memory: one round trip to memory instead of one per chunk.

// #include "lib/numerics.wgsl"

override HD: u32 = 128u;
override NP: u32 = 128u;   // positions per chunk (32 attn_block_chunk)
override NCH: u32 = 128u;  // threads, and the most chunks a column may have (a power of two)
override DS: u32 = 16u;    // dimensions per workgroup

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

var<workgroup> os: array<f32, NCH * DS>;  // [chunk][d]: O_c of the slice
var<workgroup> ms: array<f32, NCH>;       // M_c, then the tree's maxima
var<workgroup> ls: array<f32, NCH>;       // L_c
var<workgroup> as_: array<f32, NCH>;      // A_c
var<workgroup> mx: f32;

const NEG_MAX: u32 = 0xff7fffffu;  // -FLT_MAX, as bits

@compute @workgroup_size(NCH)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let hq    = wid.x / (HD / DS);
    let slice = wid.x % (HD / DS);
    let t     = wid.y;
    let n     = p.pos0 + t + 1u;
    let nch   = (n + NP - 1u) / NP;
    let row   = (t * p.n_head + hq) * p.nch_ld;  // (column, head)'s first chunk
    var m = bitcast<f32>(NEG_MAX);
    var l = 0.0;
    if (lid < nch) {
        m = ml[2u * (row + lid)];
        l = ml[2u * (row + lid) + 1u];
    }
    for (var i = lid; i < nch * DS; i += NCH) {
        os[i] = part[(row + i / DS) * HD + slice * DS + i % DS];
    }
    ms[lid] = m;
    ls[lid] = l;
    workgroupBarrier();
    var mt = m;
    for (var w = NCH / 2u; w >= 1u; w /= 2u) {
        if (lid < w) { mt = max(mt, ms[lid + w]); }
        workgroupBarrier();
        if (lid < w) { ms[lid] = mt; }
        workgroupBarrier();
    }
    if (lid < nch) { as_[lid] = exp_fixed(m - ms[0]); }
    workgroupBarrier();
    if (lid < DS) {
        var lt = 0.0;
        var o  = 0.0;
        for (var c = 0u; c < nch; c++) {
            let a = as_[c];
            lt = lt + mul_rn(a, ls[c]);
            o  = o + mul_rn(a, os[c * DS + lid]);
        }
        out[p.out_offset + t * p.out_stride + hq * HD + slice * DS + lid] = mul_rn(o, div_rn(1.0, lt));
    }
}
