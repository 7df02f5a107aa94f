// attention_block_combine: after attention_block_pv.wgsl (the block order, issue 52 prototype behind
// WebGpuTuning::attn_block_order), each output the chunks joined as that kernel joins blocks, in
// chunk order, then the one normalisation (every op an f32 op rounded once):
//   M = max_c M_c;  A_c = exp_fixed(M_c - M);  L = ((0 + A_0 L_0) + A_1 L_1) + ...;
//   O[d] = ((0 + A_0 O_0[d]) + A_1 O_1[d]) + ...;  out[d] = O[d] * r,  r = 1 / L correctly rounded.
//
//   part: [T][n_head][nch_ld][HD] f32   ml: [T][n_head][nch_ld][2] f32   out: [n_head hd, T] f32
// Bindings: 0 part, 1 ml (read); 2 out (read_write); 3 params
// Dispatch: (n_head, T), HD threads: thread d of query head wid.x (each thread takes M, A_c and L
// itself: broadcast loads, no barrier).

// #include "lib/numerics.wgsl"

override HD: u32 = 128u;
override NP: u32 = 128u;  // positions per chunk (32 attn_block_chunk)

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

@compute @workgroup_size(HD)
fn main(@builtin(local_invocation_index) d: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let hq  = wid.x;
    let t   = wid.y;
    let n   = p.pos0 + t + 1u;
    let nch = (n + NP - 1u) / NP;
    let row = (t * p.n_head + hq) * p.nch_ld;  // (column, head)'s first chunk
    var mx  = ml[2u * row];
    for (var c = 1u; c < nch; c++) { mx = max(mx, ml[2u * (row + c)]); }
    var l = 0.0;
    var o = 0.0;
    for (var c = 0u; c < nch; c++) {
        let a = exp_fixed(ml[2u * (row + c)] - mx);
        l = l + mul_rn(a, ml[2u * (row + c) + 1u]);
        o = o + mul_rn(a, part[(row + c) * HD + d]);
    }
    out[p.out_offset + t * p.out_stride + hq * HD + d] = mul_rn(o, div_rn(1.0, l));
}
