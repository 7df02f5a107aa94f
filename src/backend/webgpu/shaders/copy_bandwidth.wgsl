// copy_bandwidth: dst = src as vec4<u32>, grid-stride, for `tern bench --roofline`: the memory
// bandwidth a WGSL kernel reaches on this device (16-byte loads and stores, every SM busy), the
// ceiling the decode kernels are measured against. A buffer-to-buffer copy command measures the
// driver's copy path instead, which on an H100 through Dawn reached only a fraction of this.
//
//   src, dst: [n] vec4<u32>
// Bindings: 0 src (read), 1 dst (read_write), 2 params (uniform)
// Dispatch: (groups, 1, 1), 256 threads each; thread i copies elements i, i + stride, ...

struct Params {
    n: u32,       // vec4 elements
    stride: u32,  // threads in the dispatch
}

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < p.n; i += p.stride) {
        dst[i] = src[i];
    }
}
