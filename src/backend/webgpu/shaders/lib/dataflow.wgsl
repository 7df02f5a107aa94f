// Dataflow between the workgroups of one dispatch: lets one dispatch run several dependent phases
// (a whole decode layer) without a dispatch boundary between them (~2.1 µs of GPU time each on an H200).
//
// WGSL gives no device-scope fence: a workgroup cannot make its plain stores visible to another
// workgroup in order, and atomics are relaxed. So every value that crosses workgroups inside a
// dispatch travels in atomic words that carry their own validity: an f32 is two words,
// (high 16 bits << 16 | tag) and (low 16 bits << 16 | tag), where the tag (1..65535) names the
// dispatch that wrote it. A reader polls each word until its tag is current; per-location coherence
// is all that needs. Buffers hold one slot per value per dispatch, so no word is written twice in
// a dispatch and a stale word always carries an older tag.
//
// Deadlock freedom: a workgroup takes a ticket (the order in which workgroups really started) and
// decides from it what to compute; work only ever waits for values written by lower tickets, which
// have started and so finish as long as a started workgroup keeps running. Nothing depends on how
// many workgroups the GPU runs at once.
//
// Waiting: a phase that needs another's values first lets one invocation watch that phase's
// completion counter (flow_wait_done), then checks the tags of what it reads (flow_wait_vec4s,
// flow_get); only the tags make the values safe, the counter keeps the polling traffic low (with
// every invocation of the waiting workgroups polling every word, the layer kernel decoded at 198
// instead of 211 tokens/s on an H200).
//
// The including kernel declares `override WG`, `flow: array<atomic<u32>>` (read_write storage;
// word 0 = ticket counter, 0 between dispatches; word 1 = error flag; words 2 .. 15 completion
// counters, which only grow; values from FLOW_BASE on) and
// a uniform p with `tag` and `n_tickets` (the dispatch's workgroups: the one that takes the last
// ticket resets the counter, so no dispatch needs to know how many came before).

const FLOW_BASE: u32 = 16u;
// A poll gives up after this many reads (a bug must not hang the GPU): the value reads as NaN and
// word 1 gets 1.
const FLOW_MAX_POLLS: u32 = 1u << 26u;

var<workgroup> flow_wg_ticket: u32;

fn flow_ticket(lid: u32) -> u32 {
    if (lid == 0u) {
        let t = atomicAdd(&flow[0], 1u);
        // Every other ticket was taken before this one (one location's atomics are totally ordered).
        if (t + 1u == p.n_tickets) { atomicStore(&flow[0], 0u); }
        flow_wg_ticket = t;
    }
    return workgroupUniformLoad(&flow_wg_ticket);
}

fn flow_put_u32(i: u32, b: u32) {
    atomicStore(&flow[FLOW_BASE + 2u * i], (b & 0xffff0000u) | p.tag);
    atomicStore(&flow[FLOW_BASE + 2u * i + 1u], (b << 16u) | p.tag);
}

fn flow_put(i: u32, v: f32) { flow_put_u32(i, bitcast<u32>(v)); }

fn flow_poll(w: u32) -> u32 {
    for (var n = 0u; n < FLOW_MAX_POLLS; n++) {
        let x = atomicLoad(&flow[w]);
        if ((x & 0xffffu) == p.tag) { return x; }
    }
    atomicStore(&flow[1], 1u);
    return 0xffff0000u;
}

fn flow_get_u32(i: u32) -> u32 {
    let hi = flow_poll(FLOW_BASE + 2u * i);
    let lo = flow_poll(FLOW_BASE + 2u * i + 1u);
    return (hi & 0xffff0000u) | (lo >> 16u);
}

fn flow_get(i: u32) -> f32 { return bitcast<f32>(flow_get_u32(i)); }

// Value i without checking its tag: only after this invocation's flow_wait_vec4s covered it (a
// later read of a location never returns an older value than an earlier one did).
fn flow_read(i: u32) -> f32 {
    let hi = atomicLoad(&flow[FLOW_BASE + 2u * i]);
    let lo = atomicLoad(&flow[FLOW_BASE + 2u * i + 1u]);
    return bitcast<f32>((hi & 0xffff0000u) | (lo >> 16u));
}

// Waits until values v0 + 4j .. v0 + 4j + 3 are current for this invocation's j = lid + i WG < n4
// (i < 8: the vec4s lib/act_stage.wgsl gives it), polling all of its words in each round so that
// the loads are in flight together.
fn flow_wait_vec4s(lid: u32, v0: u32, n4: u32) {
    for (var round = 0u; round < FLOW_MAX_POLLS; round++) {
        var stale = 0u;
        for (var i = 0u; i < 8u; i++) {
            let j = lid + i * WG;
            if (j < n4) {
                let w = FLOW_BASE + 2u * (v0 + 4u * j);
                for (var e = 0u; e < 8u; e++) { stale |= (atomicLoad(&flow[w + e]) ^ p.tag) & 0xffffu; }
            }
        }
        if (stale == 0u) { return; }
    }
    atomicStore(&flow[1], 1u);
}

// Counts this workgroup as done in completion counter c (after all its invocations' puts).
fn flow_done(lid: u32, c: u32) {
    storageBarrier();
    if (lid == 0u) { atomicAdd(&flow[2u + c], 1u); }
}

// Waits until completion counter c reaches `goal` (what the host expects after this dispatch's
// producers: the counters are never reset; compared modulo 2^32), watched by one invocation.
fn flow_wait_done(lid: u32, c: u32, goal: u32) {
    if (lid == 0u) {
        for (var n = 0u; n < FLOW_MAX_POLLS; n++) {
            if (i32(atomicLoad(&flow[2u + c]) - goal) >= 0) { break; }
        }
    }
    workgroupBarrier();
}

// Values v0 + j for this invocation's j = lid + i WG < n (i < 8), as u32 in element i: all read
// in each round until every one is current.
fn flow_fetch_words(lid: u32, v0: u32, n: u32) -> array<u32, 8> {
    var out: array<u32, 8>;
    for (var round = 0u; round < FLOW_MAX_POLLS; round++) {
        var stale = 0u;
        for (var i = 0u; i < 8u; i++) {
            let j = lid + i * WG;
            if (j < n) {
                let w  = FLOW_BASE + 2u * (v0 + j);
                let hi = atomicLoad(&flow[w]);
                let lo = atomicLoad(&flow[w + 1u]);
                stale |= ((hi ^ p.tag) | (lo ^ p.tag)) & 0xffffu;
                out[i] = (hi & 0xffff0000u) | (lo >> 16u);
            }
        }
        if (stale == 0u) { return out; }
    }
    atomicStore(&flow[1], 1u);
    return out;
}
