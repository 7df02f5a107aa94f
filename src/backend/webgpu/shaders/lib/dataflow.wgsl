// Dataflow between the workgroups of one dispatch: lets one dispatch run several dependent phases
// (a whole decode layer) without the ~5 µs a dispatch boundary costs on a GPU.
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
// The including kernel declares `flow: array<atomic<u32>>` (read_write storage; word 0 = ticket
// counter, word 1 = error flag, values from FLOW_BASE on) and Params with `ticket_base` (tickets
// issued before this dispatch: the counter is never reset) and `tag`.

const FLOW_BASE: u32 = 16u;
// A poll gives up after this many reads (a bug must not hang the GPU): the value reads as NaN and
// word 1 gets 1.
const FLOW_MAX_POLLS: u32 = 1u << 22u;

var<workgroup> flow_wg_ticket: u32;

fn flow_ticket(lid: u32) -> u32 {
    if (lid == 0u) { flow_wg_ticket = atomicAdd(&flow[0], 1u) - p.ticket_base; }
    return workgroupUniformLoad(&flow_wg_ticket);
}

fn flow_put(i: u32, v: f32) {
    let b = bitcast<u32>(v);
    atomicStore(&flow[FLOW_BASE + 2u * i], (b & 0xffff0000u) | p.tag);
    atomicStore(&flow[FLOW_BASE + 2u * i + 1u], (b << 16u) | p.tag);
}

fn flow_poll(w: u32) -> u32 {
    for (var n = 0u; n < FLOW_MAX_POLLS; n++) {
        let x = atomicLoad(&flow[w]);
        if ((x & 0xffffu) == p.tag) { return x; }
    }
    atomicStore(&flow[1], 1u);
    return 0xffff0000u;
}

fn flow_get(i: u32) -> f32 {
    let hi = flow_poll(FLOW_BASE + 2u * i);
    let lo = flow_poll(FLOW_BASE + 2u * i + 1u);
    return bitcast<f32>((hi & 0xffff0000u) | (lo >> 16u));
}
