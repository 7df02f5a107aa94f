// gap_probe: a trivial kernel that only bumps one word of a scratch buffer. $TERN_WEBGPU_GAP=n
// records n of them after every dispatch (webgpu_step.cpp): each is a dependent dispatch (Dawn puts
// a barrier before it, since the one before it wrote the same buffer), so the time per token they
// add, divided by their number, is what one dispatch boundary costs on the device inside the real
// decode stream. A timing aid; it changes no result.
//
// Bindings: 0 scratch (read_write), 1 params (uniform, unused)
// Dispatch: (any, 1, 1).

struct Params {
    unused: u32,
}

@group(0) @binding(0) var<storage, read_write> scratch: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(32)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (lid == 0u && wid.x == 0u) { scratch[0] = scratch[0] + 1u; }
}
