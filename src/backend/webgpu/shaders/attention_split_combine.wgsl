// attention_split_combine: after attention_split_pvt.wgsl, each output the superblocks' sums
// added as cpu::PositionSum adds them: the whole superblocks to a total in order from 0, then
// out = total + the last partial superblock (+ 0 where there is none), so the bits are the CPU's.
//
//   part: [T][n_head][nsb_ld][hd] f32   out: [n_head hd, T] f32
// Bindings: 0 part, 1 cols, 2 pages (read); 3 out (read_write); 4 params
// Dispatch: (ceil(n_head hd / WG), T)

// #include "lib/kv_pages.wgsl"

override WG: u32 = 256u;
override HD: u32 = 128u;

struct Params {
    n_head: u32,
    nsb_ld: u32,       // superblocks per (column, head) row of part
    pos0: u32,         // without PAGED: position of column 0
    max_pages: u32,
    cols_offset: u32,
    pages_offset: u32,
    out_offset: u32,   // f32 index of out[0, 0]
    out_stride: u32,   // f32 elements between columns of out
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read> cols: array<i32>;
@group(0) @binding(2) var<storage, read> pages: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = gid.x;  // h hd + d
    let t = wid.y;
    if (i >= p.n_head * HD) { return; }
    let n      = kv_column(t).pos + 1u;
    let whole  = n / 512u;  // superblocks closed in the total
    let base   = ((t * p.n_head + i / HD) * p.nsb_ld) * HD + i % HD;
    // Eight superblocks' loads at a time in flight (+0 past the whole ones: it leaves the total's
    // bits as they are), then added in order.
    var total  = 0.0;
    for (var s0 = 0u; s0 < whole; s0 += 8u) {
        var v: array<f32, 8>;
        for (var k = 0u; k < 8u; k++) {
            v[k] = 0.0;
            if (s0 + k < whole) { v[k] = part[base + (s0 + k) * HD]; }
        }
        for (var k = 0u; k < 8u; k++) { total = total + v[k]; }
    }
    let last = select(0.0, part[base + whole * HD], n % 512u != 0u);
    out[p.out_offset + t * p.out_stride + i] = total + last;
}
