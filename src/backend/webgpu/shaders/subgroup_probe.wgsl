enable subgroups;

// subgroup_probe: how this device lays subgroups over a workgroup. For every invocation of one
// workgroup of WG, out[lid] = (subgroup_invocation_id, subgroup_size, number of active invocations
// of its subgroup, smallest local_invocation_index of its subgroup). The backend uses the "_sg" shader
// variants (lib/wg_reduce_sg.wgsl) only when every subgroup is the aligned, contiguous range that
// library assumes.
//
// Bindings: 0 out [WG] vec4<u32> (read_write), 1 params (uniform, unused). Dispatch: (1, 1, 1).

override WG: u32 = 256u;

struct Params {
    unused: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<vec4<u32>>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) sid: u32,
        @builtin(subgroup_size) size: u32) {
    out[lid] = vec4<u32>(sid, size, subgroupAdd(1u), subgroupMin(lid));
}
