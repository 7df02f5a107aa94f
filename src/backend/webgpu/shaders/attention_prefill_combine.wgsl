// attention_prefill_combine: the last prompt-attention kernel when attention_prefill_pv.wgsl split
// positions into segments (of one superblock of 512 positions each): adds each output's segment
// sums in segment order from 0, the outer level of cpu::sum_positions's order,
//   out[t][h][d] = ((0 + part[0]) + part[1]) + ... + part[n - 1]    (r = t G + j, h = kvh G + j)
// where n is the number of segments of row r's row block (BR rows, the same formula as the P·V
// kernel); rows of blocks with one segment were written by attention_prefill_pv.wgsl itself.
//
//   part: [n_seg][n_head_kv][T G][hd] f32   out: [n_head hd, T] f32
// Bindings: 0 part (read), 1 out (read_write), 2 params (uniform)
// Dispatch: (ceil(T G hd / WG), n_head_kv, 1), one thread per output.

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
    seg_len: u32,     // positions per segment
    out_offset: u32,  // f32 index of out[0, 0]
    out_stride: u32,  // f32 elements between tokens of out
    rn_zero: u32,     // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

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
    var acc = 0.0;
    for (var s = 0u; s < n_seg; s++) { acc = acc + part[s * slice + kvh * p.n_rows * hd + i]; }
    let h = kvh * GROUP + r % GROUP;
    out[p.out_offset + (r / GROUP) * p.out_stride + h * hd + i % hd] = acc;
}
