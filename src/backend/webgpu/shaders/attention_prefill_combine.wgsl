// attention_prefill_combine: the last prompt-attention kernel when attention_prefill_pv.wgsl split
// positions into segments: combines each output's superblocks as cpu::combine_superblocks does. A
// segment is a superblock of 512 positions (a prompt) or a block of 32 (one query over a long
// context); the blocks of a superblock are added in order from 0 (o_c), then the superblocks, each
// times the softmax kernel's weight r_c, in order from 0:
//   out[t][h][d] = ((0 + r_0 o_0) + r_1 o_1) + ...,  o_c = ((0 + part[S c]) + part[S c + 1]) + ...
// (r = t G + j, h = kvh G + j, S = segments per superblock: 1 or 16), over the superblocks row r
// sees of the n segments of its row block (BR rows, the same formula as the P·V kernel); rows of
// blocks with one segment were written by attention_prefill_pv.wgsl itself.
// With BLOCK_ORDER, a row of more than 512 positions (block order: the softmax kernel's header; its
// segments are superblocks, S = 1) joins its superblocks' sums O_c with their weights a_c, then
// out = O r, r = 1 / L: out = (((0 + a_0 O_0) + a_1 O_1) + ...) r.
//
//   part: [n_seg][n_head_kv][T G][hd] f32   out: [n_head hd, T] f32
//   wts: attention_prefill_softmax.wgsl's [n_head_kv][T G][w_ld] f32 (r_c at [2c]; block order: a_c
//   at [24 nsb_ld + c], r at [27 nsb_ld])
// Bindings: 0 part, 1 wts (read), 2 out (read_write), 3 params (uniform)
// Dispatch: (ceil(T G hd / WG), n_head_kv, 1), one thread per output; its loads are issued 16 at a
// time before they are added (a chain of one load per add waited for each).

// #include "lib/numerics.wgsl"

override WG: u32 = 256u;
override BR: u32 = 32u;  // attention_prefill_pv.wgsl's rows per workgroup
override GROUP: u32 = 1u;  // G = n_head / n_head_kv (= Params.group; a constant, for the divisions by it)
override BLOCK_ORDER: bool = false;  // rows over 512 positions in the block order (WebGpuTuning::attn_block_order)

struct Params {
    head_dim: u32,
    group: u32,       // G = n_head / n_head_kv (the kernel divides by the override GROUP)
    n_rows: u32,      // T G
    n_head_kv: u32,
    pos0: u32,        // position of token 0
    seg_len: u32,     // positions per segment
    segs_per_super: u32,  // S: 1 (segments of 512 positions) or 16 (of 32)
    out_offset: u32,  // f32 index of out[0, 0]
    out_stride: u32,  // f32 elements between tokens of out
    nsb_ld: u32,      // superblocks per row (of the score rows' ld positions)
    w_ld: u32,        // f32 elements between rows of wts
    rn_zero: u32,     // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read> wts: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let hd  = p.head_dim;
    let i   = gid.x;  // r hd + d
    let kvh = gid.y;
    if (i >= p.n_rows * hd) { return; }
    let r       = i / hd;
    let n_block = p.pos0 + (min(r / BR * BR + BR, p.n_rows) - 1u) / GROUP + 1u;
    let n_seg   = (n_block + p.seg_len - 1u) / p.seg_len;
    if (n_seg == 1u) { return; }
    let slice = p.n_head_kv * p.n_rows * hd;  // elements per segment
    let at    = kvh * p.n_rows * hd + i;
    let n_row = p.pos0 + r / GROUP + 1u;  // positions row r sees
    let wrow  = (kvh * p.n_rows + r) * p.w_ld;
    let blocks = BLOCK_ORDER && n_row > 512u;
    let w0     = select(0u, 24u * p.nsb_ld, blocks);  // r_c at [2c], or a_c at [24 S + c]
    let w_step = select(2u, 1u, blocks);
    var acc = 0.0;  // the closed superblocks, weighted
    var sup = 0.0;  // the open one
    for (var s0 = 0u; s0 < n_seg; s0 += 16u) {
        var v: array<f32, 16>;
        for (var j = 0u; j < 16u; j++) {
            if (s0 + j < n_seg) { v[j] = part[(s0 + j) * slice + at]; }
        }
        for (var j = 0u; j < 16u; j++) {
            let s = s0 + j;
            if (s < n_seg) {
                sup = sup + v[j];
                if ((s + 1u) % p.segs_per_super == 0u || s + 1u == n_seg) {
                    let c = s / p.segs_per_super;
                    if (512u * c < n_row) { acc = acc + mul_rn(wts[wrow + w0 + w_step * c], sup); }
                    sup = 0.0;
                }
            }
        }
    }
    let h = kvh * GROUP + r % GROUP;
    if (blocks) { acc = mul_rn(acc, wts[wrow + 27u * p.nsb_ld]); }  // O r, r = 1 / L
    out[p.out_offset + (r / GROUP) * p.out_stride + h * hd + i % hd] = acc;
}
