// attention_prefill_softmax: the second prompt-attention kernel (webgpu_attention_prefill.cpp). Turns
// each row of scores written by attention_prefill_scores.wgsl into probabilities, in place, in the
// order of cpu::attention_row (issue 52):
// a row of at most 512 positions in one pass (the P·V kernel's sums are then the output):
//   m = max s,  e = exp_fixed(s - m),  l = its e in cpu::sum_positions's order,  inv = 1 / l,
//   prob = e * inv, rounded to f16 with an f16 V cache;
// a row of more than 512 positions in the block order:
//   block b (32 positions): m_b = max(-FLT_MAX, s ...),  e = exp_fixed(s - m_b) (written, f16 with
//   an f16 V cache: the P·V kernel's f16(e)),  l_b = ((0 + e_first) + ...) + e_last;
//   chunk (blocks 2k, 2k + 1), superblock (8 chunks), row (the superblocks), each a join of its
//   parts in order: M = max m_i,  a_i = exp_fixed(m_i - M),  L = ((0 + a_0 l_0) + a_1 l_1) + ...
// and the P·V kernel (or attention_prefill_combine.wgsl) joins its sums with the same a_i, then
// multiplies by r = 1 / L.
// Row r of KV head kvh (token t = r / G) holds positions 0 .. pos0 + t; nothing past them is touched.
//
//   scores: [n_head_kv][T G][ld] f32 (read and written)
//   wts: [n_head_kv][T G][w_ld] f32, a long row's weights at its w_ld = 27 S + 1 floats (S = nsb_ld
//     superblocks per row): a_b of block b in its chunk at [b], a_k of chunk k in its superblock at
//     [16 S + k], a_c of superblock c in the row at [24 S + c] (M_c until the row's join), L_c at
//     [26 S + c], r = 1 / L at [27 S]; rows of at most 512 positions write none
// Bindings: 0 scores, 1 wts (read_write), 2 params (uniform)
// Dispatch: (T G, n_head_kv, 1). One workgroup per row; thread i takes positions i + WG u of each
// superblock (512 / WG of them, kept in registers: a score is read once and written once); the
// block maxima and sums a thread per block of 32 (lib/position_sum.wgsl's for a short row), the
// joins a thread per chunk, the superblock's and the row's sums by invocation 0 (which reads back
// only what it wrote itself).

// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/position_sum.wgsl"

override WG: u32 = 64u;        // a power of two, 32 .. 512
override CHUNK: u32 = 512u;    // positions per pass of the sum (lib/position_sum.wgsl): one superblock
override V_F16: bool = true;
override GROUP: u32 = 1u;  // G = n_head / n_head_kv (= Params.group; a constant, for the divisions by it)
const SPT: u32 = 16u;      // registers per thread: 512 / WG <= 16

struct Params {
    group: u32,    // G = n_head / n_head_kv (the kernel divides by the override GROUP)
    n_rows: u32,   // T G
    pos0: u32,     // position of token 0
    ld: u32,       // f32 elements between score rows
    nsb_ld: u32,   // S: superblocks per row (of ld positions)
    w_ld: u32,     // f32 elements between rows of wts (27 S + 1)
    rn_zero: u32,  // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read_write> scores: array<f32>;
@group(0) @binding(1) var<storage, read_write> wts: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> blk_max: array<f32, 16>;  // block order: m_b of the superblock's blocks
var<workgroup> blk_l: array<f32, 16>;    // their l_b
var<workgroup> chk_max: array<f32, 8>;   // the superblock's chunks' M_k
var<workgroup> chk_l: array<f32, 8>;     // and L_k
var<workgroup> chk_a: array<f32, 8>;     // and a_k

// A row of n > 512 positions in the block order (the header). Called in uniform control flow.
fn block_row(lid: u32, base: u32, wb: u32, n: u32) {
    let S   = p.nsb_ld;
    let nsb = (n + 511u) / 512u;
    for (var c = 0u; c < nsb; c++) {
        let c0   = 512u * c;
        let c_n  = min(512u, n - c0);
        let nblk = (c_n + 31u) / 32u;
        var sv: array<f32, SPT>;
        for (var u = 0u; u < 512u / WG; u++) {
            let i = lid + u * WG;
            if (i < c_n) {
                sv[u] = scores[base + c0 + i];
                probs[i] = sv[u];
            }
        }
        workgroupBarrier();
        // m_b: a thread per block (max is exact in any order).
        if (lid < nblk) {
            var m = bitcast<f32>(0xff7fffffu);  // -FLT_MAX
            for (var i = 32u * lid; i < min(32u * lid + 32u, c_n); i++) { m = max(m, probs[i]); }
            blk_max[lid] = m;
        }
        workgroupBarrier();
        for (var u = 0u; u < 512u / WG; u++) {
            let i = lid + u * WG;
            if (i < c_n) {
                let e = exp_fixed(sv[u] - blk_max[i / 32u]);
                probs[i] = e;
                scores[base + c0 + i] = select(e, round_f16(e), V_F16);
            }
        }
        workgroupBarrier();
        // l_b: one chain per block, in position order.
        if (lid < nblk) {
            var l = 0.0;
            for (var i = 32u * lid; i < min(32u * lid + 32u, c_n); i++) { l = l + probs[i]; }
            blk_l[lid] = l;
        }
        workgroupBarrier();
        // The chunks (blocks 2k, 2k + 1; the last may have one): a thread per chunk.
        let nch = (nblk + 1u) / 2u;
        if (lid < nch) {
            let b0 = 2u * lid;
            var big = blk_max[b0];
            if (b0 + 1u < nblk) { big = max(big, blk_max[b0 + 1u]); }
            let a0 = exp_fixed(blk_max[b0] - big);
            var l  = 0.0 + mul_rn(a0, blk_l[b0]);
            wts[wb + 16u * c + b0] = a0;
            if (b0 + 1u < nblk) {
                let a1 = exp_fixed(blk_max[b0 + 1u] - big);
                l = l + mul_rn(a1, blk_l[b0 + 1u]);
                wts[wb + 16u * c + b0 + 1u] = a1;
            }
            chk_max[lid] = big;
            chk_l[lid]   = l;
        }
        workgroupBarrier();
        // The superblock (its chunks joined): a thread per chunk computes its weight a_k, then
        // invocation 0 adds the a_k L_k in order (all by invocation 0: H200 pp2048 softmax 143.96
        // against 137.92 us per dispatch).
        if (lid < nch) {
            var big = chk_max[0];
            for (var k = 1u; k < nch; k++) { big = max(big, chk_max[k]); }
            let a = exp_fixed(chk_max[lid] - big);
            wts[wb + 16u * S + 8u * c + lid] = a;
            chk_a[lid] = a;
            if (lid == 0u) { wts[wb + 24u * S + c] = big; }
        }
        workgroupBarrier();
        if (lid == 0u) {
            var l = 0.0;
            for (var k = 0u; k < nch; k++) { l = l + mul_rn(chk_a[k], chk_l[k]); }
            wts[wb + 26u * S + c] = l;
        }
        workgroupBarrier();  // probs and the block / chunk arrays are consumed before the next superblock
    }
    // The row (its superblocks joined) and r = 1 / L, by invocation 0 (reading what it wrote).
    if (lid == 0u) {
        var big = wts[wb + 24u * S];
        for (var c = 1u; c < nsb; c++) { big = max(big, wts[wb + 24u * S + c]); }
        var l = 0.0;
        for (var c = 0u; c < nsb; c++) {
            let a = exp_fixed(wts[wb + 24u * S + c] - big);
            l = l + mul_rn(a, wts[wb + 26u * S + c]);
            wts[wb + 24u * S + c] = a;
        }
        wts[wb + 27u * S] = div_rn(1.0, l);
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r    = wid.x;
    let row  = wid.y * p.n_rows + r;
    let base = row * p.ld;
    let wb   = row * p.w_ld;  // the row's weights in wts
    let n    = p.pos0 + r / GROUP + 1u;  // causal: positions 0 ..= pos0 + t
    if (n > 512u) {
        block_row(lid, base, wb, n);
        return;
    }

    // One pass: the scores and their max.
    var sv: array<f32, SPT>;
    var m = bitcast<f32>(0xff7fffffu);  // -FLT_MAX, as attention.wgsl
    for (var u = 0u; u < 512u / WG; u++) {
        let i = lid + u * WG;
        if (i < n) {
            sv[u] = scores[base + i];
            m = max(m, sv[u]);
        }
    }
    let mx = wg_max(lid, m);
    // e = exp(s - m) and their sum (the barrier inside pos_add_chunk also separates wg_max's reads
    // from the stores to probs).
    for (var u = 0u; u < 512u / WG; u++) {
        let i = lid + u * WG;
        if (i < n) {
            sv[u] = exp_fixed(sv[u] - mx);
            probs[i] = sv[u];
        }
    }
    let l   = pos_total(pos_add_chunk(lid, 0u, n, PosSum())).x;
    let inv = div_rn(1.0, l);
    for (var u = 0u; u < 512u / WG; u++) {
        let i = lid + u * WG;
        if (i < n) {
            let pr = sv[u] * inv;
            scores[base + i] = select(pr, round_f16(pr), V_F16);
        }
    }
}
