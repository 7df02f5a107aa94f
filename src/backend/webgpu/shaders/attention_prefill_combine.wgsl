// attention_prefill_combine: the last prompt-attention kernel when attention_prefill_pv.wgsl split
// positions into segments (a short prompt over a long cache): joins each output's segments, one
// superblock of 512 positions each, in cpu::attention_row's order (issue 52): a row of more than
// 512 positions (the block order, attention_prefill_softmax.wgsl's header) joins its superblocks'
// sums O_c with their weights a_c, then multiplies by r = 1 / L:
//   out[t][h][d] = (((0 + a_0 O_0) + a_1 O_1) + ...) r      (r = t G + j, h = kvh G + j)
// over the superblocks row r sees of the n segments of its row block (BR rows, the same formula as
// the P·V kernel); a row of at most 512 positions takes its one superblock's sums as they are.
// Rows of blocks with one segment were written by attention_prefill_pv.wgsl itself.
//
//   part: [n_seg][n_head_kv][T G][hd] f32   out: [n_head hd, T] f32
//   wts: attention_prefill_softmax.wgsl's [n_head_kv][T G][w_ld] f32 (a_c at [24 nsb_ld + c], r at
//   [27 nsb_ld])
// Bindings: 0 part, 1 wts (read), 2 out (read_write), 3 params (uniform)
// Dispatch: (ceil(T G hd / WG), n_head_kv, 1), one thread per output; its loads are issued 16 at a
// time before they are added (a chain of one load per add waited for each).

// #include "lib/numerics.wgsl"

override WG: u32 = 256u;
override BR: u32 = 32u;  // attention_prefill_pv.wgsl's rows per workgroup
override GROUP: u32 = 1u;  // G = n_head / n_head_kv (= Params.group; a constant, for the divisions by it)

struct Params {
    head_dim: u32,
    group: u32,       // G = n_head / n_head_kv (the kernel divides by the override GROUP)
    n_rows: u32,      // T G
    n_head_kv: u32,
    pos0: u32,        // position of token 0
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
    let n_seg   = (n_block + 511u) / 512u;
    if (n_seg == 1u) { return; }
    let slice = p.n_head_kv * p.n_rows * hd;  // elements per segment
    let at    = kvh * p.n_rows * hd + i;
    let n_row = p.pos0 + r / GROUP + 1u;  // positions row r sees
    let h     = kvh * GROUP + r % GROUP;
    let o     = p.out_offset + (r / GROUP) * p.out_stride + h * hd + i % hd;
    if (n_row <= 512u) {  // one superblock: its sums
        out[o] = part[at];
        return;
    }
    let wrow = (kvh * p.n_rows + r) * p.w_ld + 24u * p.nsb_ld;  // a_0
    let n_c  = (n_row + 511u) / 512u;                            // the superblocks row r sees
    var acc  = 0.0;
    for (var s0 = 0u; s0 < n_c; s0 += 16u) {
        var v: array<f32, 16>;
        for (var j = 0u; j < 16u; j++) {
            if (s0 + j < n_c) { v[j] = part[(s0 + j) * slice + at]; }
        }
        for (var j = 0u; j < 16u; j++) {
            if (s0 + j < n_c) { acc = acc + mul_rn(wts[wrow + s0 + j], v[j]); }
        }
    }
    out[o] = mul_rn(acc, wts[wrow + 3u * p.nsb_ld]);  // O r, r = 1 / L (at 27 nsb_ld)
}
