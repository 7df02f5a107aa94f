// gather_columns: dst[:, i] = src[:, cols[i]] for f32 columns of k elements (a batch's head reads
// each sequence's last column: backend.h gather_columns).
// Bindings: 0 src, 1 cols (read); 2 dst (read_write); 3 params
// Dispatch: (ceil(k / WG), n, 1).

override WG: u32 = 256u;

struct Params {
    k: u32,
    src_offset: u32,   // f32 index of src[0, 0]
    src_stride: u32,   // f32 elements between columns of src
    dst_offset: u32,
    dst_stride: u32,
    cols_offset: u32,  // i32 index of cols[0]
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read> cols: array<i32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let e = gid.x;
    let i = gid.y;
    if (e >= p.k) { return; }
    let c = u32(cols[p.cols_offset + i]);
    dst[p.dst_offset + i * p.dst_stride + e] = src[p.src_offset + c * p.src_stride + e];
}
