// Sums over attention positions in cpu::sum_positions's order (blocks of 32 positions in order, 16
// blocks to a superblock of 512 in order, superblocks in order), for kernels that stage CHUNK values
// at a time in `probs`: decode attention (lib/attention_core.wgsl: its exp sum, and its P·V
// probabilities) and the prompt softmax. The including kernel declares `override CHUNK` (a
// multiple of 32) and `override WG` (at least CHUNK / 32).

var<workgroup> probs: array<f32, CHUNK>;
var<workgroup> blk_sum: array<f32, CHUNK / 32u>;  // [block of the chunk]

// The running state of one or two sums side by side: the open superblock and the closed total.
struct PosSum {
    open: vec2<f32>,
    closed: vec2<f32>,
}

// s plus the sum of block b (b = the block's position / 32, blocks in order): into the open
// superblock, which after its 16th block closes into the total.
fn pos_add_block(s: PosSum, block: vec2<f32>, b: u32) -> PosSum {
    var r = PosSum(s.open + block, s.closed);
    if ((b + 1u) % 16u == 0u) {
        r = PosSum(vec2<f32>(0.0, 0.0), r.closed + r.open);
    }
    return r;
}

// The sums of everything added (the total plus the open superblock, as cpu::PositionSum::finish).
fn pos_total(s: PosSum) -> vec2<f32> {
    return s.closed + s.open;
}

// s plus the chunk of c_n values in probs[0 .. c_n) that starts at position c0 (a multiple of 32):
// a barrier after the caller's stores, one invocation per block of 32 sums it in order, a barrier,
// then every invocation adds the chunk's block sums in order (the same bits in each). Called by
// every invocation, in uniform control flow; the caller puts a barrier before its next stores.
fn pos_add_chunk(lid: u32, c0: u32, c_n: u32, s: PosSum) -> PosSum {
    workgroupBarrier();
    if (32u * lid < c_n) {
        var b = 0.0;
        for (var i = 32u * lid; i < min(32u * lid + 32u, c_n); i++) { b = b + probs[i]; }
        blk_sum[lid] = b;
    }
    workgroupBarrier();
    var r = s;
    for (var b = 0u; 32u * b < c_n; b++) { r = pos_add_block(r, vec2<f32>(blk_sum[b], 0.0), c0 / 32u + b); }
    return r;
}
