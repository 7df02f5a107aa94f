// attention_split_combine: after attention_split_pvt.wgsl (one superblock: a column of at most 512
// positions) or attention_paged_super.wgsl, each output of a column of at most 512 positions its one
// superblock's sums as they are (its probabilities were normalised), and of a longer column the row
// join of its superblock partials in issue 52's block order (cpu_ops.h; each an f32 operation rounded
// once, in superblock order):
//   M = max_s M_s;  a_s = exp_fixed(M_s - M);  L = ((0 + a_0 L_0) + a_1 L_1) + ...;
//   O = ((0 + a_0 O_0) + a_1 O_1) + ...;  out = O * r,  r = 1 / L correctly rounded.
//
//   part: [T][n_head][nsb_ld][hd] f32 (O_s)   sml: [T][n_head][nsb_ld][2] f32 (M_s, L_s)
//   out: [n_head hd, T] f32
// Bindings: 0 part, 1 sml, 2 cols, 3 pages (read); 4 out (read_write); 5 params
// Dispatch: (ceil(n_head hd / WG), T)

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"

override WG: u32 = 256u;
override HD: u32 = 128u;

struct Params {
    n_head: u32,
    nsb_ld: u32,       // superblocks per (column, head) row of part and sml
    pos0: u32,         // without PAGED: position of column 0
    max_pages: u32,
    cols_offset: u32,
    pages_offset: u32,
    out_offset: u32,   // f32 index of out[0, 0]
    out_stride: u32,   // f32 elements between columns of out
    rn_zero: u32,      // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read> sml: array<f32>;
@group(0) @binding(2) var<storage, read> cols: array<i32>;
@group(0) @binding(3) var<storage, read> pages: array<i32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = gid.x;  // h hd + d
    let t = wid.y;
    if (i >= p.n_head * HD) { return; }
    let n    = kv_column(t).pos + 1u;
    let nsb  = (n + 511u) / 512u;
    let row  = (t * p.n_head + i / HD) * p.nsb_ld;  // (column, head)'s first superblock
    let base = row * HD + i % HD;
    if (nsb == 1u) {
        out[p.out_offset + t * p.out_stride + i] = part[base];
        return;
    }
    var mx = sml[2u * row];
    for (var c = 1u; c < nsb; c++) { mx = max(mx, sml[2u * (row + c)]); }
    var lt = 0.0;
    var o  = 0.0;
    for (var c = 0u; c < nsb; c++) {
        let a = exp_fixed(sml[2u * (row + c)] - mx);
        lt = lt + mul_rn(a, sml[2u * (row + c) + 1u]);
        o  = o + mul_rn(a, part[base + c * HD]);
    }
    out[p.out_offset + t * p.out_stride + i] = mul_rn(o, div_rn(1.0, lt));
}
