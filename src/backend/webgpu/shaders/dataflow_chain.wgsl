// dataflow_chain: a chain of dependent phases through lib/dataflow.wgsl, for tests and timing.
// Phase q has `blocks` workgroups; block b of phase q writes value (q, b) = 1 + max over b' of value
// (q - 1, b'), phase 0 writes 1, so every value of phase q must read q + 1. One dispatch can run all
// phases (ticket order) or one phase (phase0 = that phase).
//
//   flow: [0] ticket counter, [1] error flag, values [phase][block] from FLOW_BASE (two words each)
// Dispatch: (n_phases * blocks, 1, 1).

// #include "lib/dataflow.wgsl"

struct Params {
    n_tickets: u32,
    tag: u32,
    phase0: u32,
    blocks: u32,
}

@group(0) @binding(0) var<storage, read_write> flow: array<atomic<u32>>;
@group(0) @binding(1) var<uniform> p: Params;

override WG: u32 = 64u;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let t     = flow_ticket(lid);
    let phase = p.phase0 + t / p.blocks;
    let block = t % p.blocks;
    var v     = 0.0;
    if (phase > 0u) {
        for (var b = lid; b < p.blocks; b += WG) { v = max(v, flow_get((phase - 1u) * p.blocks + b)); }
    }
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
        workgroupBarrier();
    }
    if (lid == 0u) { flow_put(phase * p.blocks + block, red[0] + 1.0); }
}
