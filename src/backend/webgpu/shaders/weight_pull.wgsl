// weight_pull [try52, temporary]: a dispatch of its own that pulls a weight into L2 (lib/weight_prefetch.wgsl),
// or with KPF_WORDS 0 does nothing (a dispatch boundary alone).
// Bindings: 0 pfw (read), 1 norm_stats (read_write: a sink never written), 2 params
// #include "lib/weight_prefetch.wgsl"

override WG: u32 = 256u;

struct Params {
    unused: u32,
    rn_zero: u32,
}

@group(0) @binding(0) var<storage, read> pfw: array<u32>;
@group(0) @binding(1) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    kernel_prefetch_use(kernel_prefetch(lid, wid.x));
}
