// grid_sync_probe: G persistent workgroups (one ticket each) run `iters` dependent rounds inside one
// dispatch; in each round every workgroup publishes its share of an n-value vector through
// lib/dataflow.wgsl's tagged words and then needs all n values of the round. It times what a phase
// boundary inside a persistent decode kernel would cost (an all-gather of an activation vector),
// against a dispatch boundary ($TERN_WEBGPU_GAP, webgpu_step.cpp).
//
// Every workgroup must be resident at once (the rounds wait on all G): the host keeps G small, and
// a poll that gives up sets the error flag instead of hanging.
//
// Modes: 0 the counter alone (flow_done / flow_wait_done, no values);
//        1 the values alone: every invocation polls its words until their tags are current;
//        2 the counter, then the values (their tags checked once more);
//        3 the counter, then plain values: producers store ~bits in `data` (zeroed before the
//          dispatch, so 0 reads as "not there yet": the NaN 0xffffffff, which no value here is) and
//          consumers read them with plain vec4 loads, re-reading (after a storage barrier) while any
//          word is still 0; the re-reads are counted in flow[15];
//        4 as 3, but producers count themselves done BEFORE they store (a deliberate race that
//          exercises the re-reads: do they ever see the stores?).
// A value of round r is 1 + the largest value the workgroup read in round r - 1 (0 before round 0),
// so every workgroup must end with `iters` (written to result[ticket]).
//
//   flow: lib/dataflow.wgsl (counter 0 = the rounds' completions), values [iters][n] from FLOW_BASE;
//   data: [iters][n / 4] vec4<u32> (modes 3, 4); result: [G] f32
// Bindings: 0 flow (read_write), 1 data (read_write), 2 result (read_write), 3 params (uniform)
// Dispatch: (G, 1, 1).

// #include "lib/dataflow.wgsl"

struct Params {
    n_tickets: u32,   // G
    tag: u32,
    iters: u32,
    n: u32,           // values per round, at most 32 WG
    mode: u32,
}

@group(0) @binding(0) var<storage, read_write> flow: array<atomic<u32>>;
@group(0) @binding(1) var<storage, read_write> data: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> result: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256u;
var<workgroup> red: array<f32, WG>;
var<workgroup> any_missing: atomic<u32>;
var<workgroup> missing_plain: u32;

// Modes 3, 4: this invocation's plain words of round r (vec4 j = lid + i WG < n / 4), re-read while
// any word of the workgroup is still 0.
fn plain_gather(lid: u32, r: u32) -> f32 {
    let n4 = p.n / 4u;
    var got: array<vec4<u32>, 8>;
    for (var attempt = 0u; attempt < 1000000u; attempt++) {
        var missing = false;
        for (var i = 0u; i < 8u; i++) {
            let j = lid + i * WG;
            if (j < n4) {
                got[i] = data[r * n4 + j];
                missing = missing || any(got[i] == vec4<u32>(0u));
            }
        }
        if (missing) { atomicStore(&any_missing, 1u); }
        workgroupBarrier();
        if (lid == 0u) {
            missing_plain = atomicLoad(&any_missing);
            atomicStore(&any_missing, 0u);
        }
        let again = workgroupUniformLoad(&missing_plain);
        if (again == 0u) { break; }
        if (lid == 0u) { atomicAdd(&flow[15], 1u); }
        storageBarrier();
        if (attempt + 1u == 1000000u && lid == 0u) { atomicStore(&flow[1], 1u); }
    }
    var m = 0.0;
    for (var i = 0u; i < 8u; i++) {
        if (lid + i * WG < n4) {
            let v = ~got[i];
            m = max(m, max(max(bitcast<f32>(v.x), bitcast<f32>(v.y)), max(bitcast<f32>(v.z), bitcast<f32>(v.w))));
        }
    }
    return m;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let g   = flow_ticket(lid);
    let per = (p.n + p.n_tickets - 1u) / p.n_tickets;
    var acc = 0.0;
    for (var r = 0u; r < p.iters; r++) {
        let base = r * p.n;
        let end = min(p.n, (g + 1u) * per);
        if (p.mode == 4u) { flow_done(lid, 0u); }
        if (p.mode == 1u || p.mode == 2u) {
            for (var j = g * per + lid; j < end; j += WG) { flow_put(base + j, acc + 1.0); }
        } else if (p.mode >= 3u) {
            // Shares of whole vec4s (per is a multiple of 4 here: the host checks n % (4 G) == 0).
            for (var j = g * per / 4u + lid; j < end / 4u; j += WG) { data[r * (p.n / 4u) + j] = vec4<u32>(~bitcast<u32>(acc + 1.0)); }
        }
        if (p.mode != 1u && p.mode != 4u) { flow_done(lid, 0u); }
        if (p.mode != 1u) { flow_wait_done(lid, 0u, (r + 1u) * p.n_tickets); }
        var m = acc + 1.0;
        if (p.mode >= 3u) {
            m = plain_gather(lid, r);
        } else if (p.mode != 0u) {
            // Each invocation's words in one burst per poll round.
            m = 0.0;
            var got = array<u32, 32>();
            for (var round = 0u; round < FLOW_MAX_POLLS; round++) {
                var stale = 0u;
                for (var i = 0u; i < 32u; i++) {
                    let j = lid + i * WG;
                    if (j < p.n) {
                        let w  = FLOW_BASE + 2u * (base + j);
                        let hi = atomicLoad(&flow[w]);
                        let lo = atomicLoad(&flow[w + 1u]);
                        stale |= ((hi ^ p.tag) | (lo ^ p.tag)) & 0xffffu;
                        got[i] = (hi & 0xffff0000u) | (lo >> 16u);
                    }
                }
                if (stale == 0u) { break; }
                if (round + 1u == FLOW_MAX_POLLS) { atomicStore(&flow[1], 1u); }
            }
            for (var i = 0u; i < 32u; i++) {
                if (lid + i * WG < p.n) { m = max(m, bitcast<f32>(got[i])); }
            }
        }
        red[lid] = m;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
            workgroupBarrier();
        }
        acc = red[0];
        workgroupBarrier();
    }
    if (lid == 0u) { result[g] = acc; }
}
