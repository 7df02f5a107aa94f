// attention_split_rows: split attention's softmax and P·V for one query over a long f16 cache, in
// one dispatch after attention_split_scores.wgsl (webgpu_attention_split.cpp,
// WebGpuTuning::attn_split_tiles = 2): a workgroup per 8 output dimensions of one KV head and
// column, for all G query heads of the group and EVERY position the column sees, so that its
// outputs leave it final (no softmax dispatch before it, no combine after it). The CPU's
// operations in the CPU's order (CpuBackend::attend, cpu::sum_positions, cpu::PositionSum):
//   mx[j]   = the max of the scores kernel's workgroup maxima (max is exact in any order);
//   e       = exp_fixed(s - mx[j]);
//   sum[j]  = the e summed in cpu::sum_positions's order (each block of 32 positions in order from 0,
//             each superblock's 16 blocks in order, the superblocks in order), inv[j] = 1 / sum[j]
//             (correctly rounded);
//   prob    = f16(e * inv[j]);
//   out[t][(kvh G + j) hd + d] = the sum of prob * v[pos][kvh hd + d] in cpu::PositionSum's order:
//             each block in order, each superblock's blocks in order, the whole superblocks in order,
//             then the partial last superblock added to that total (products of two f16 values are
//             exact in f32, so a fused multiply-add gives the same bits).
// Thread (block b, head j) of a round of BR blocks (whole superblocks) computes its block's 32 e
// values (its scores by 8 vec4 loads) and their sum, then after the normalizer its probabilities
// and its block's P·V for its head and the 8 dimensions, the block's V row segments (16 bytes, one
// vec4 load per row, the same address for the G threads of a block: one request) straight into
// registers, ROWS at a time. Every workgroup of a KV head computes the same exps (HD / 8 times in
// all: cheap next to a dispatch); the first round's stay in registers, later rounds' are computed
// again for P·V. Workgroup memory holds only block and superblock sums.
//
//   scores: attention_split_scores's [T][n_head_kv][G][ld] f32 (ld a multiple of 4)
//   wmax: its [T][n_head_kv][G][wmax_ld] f32 workgroup maxima (tp positions each)
//   v_cache: [n_head_kv hd, rows] f16 (vec4<u32>: 8 halves)   out: [n_head hd, T] f32
// Bindings: 0 scores, 1 wmax, 2 v_cache (read); 3 out (read_write); 4 params
// Dispatch: (HD / 8, n_head_kv, T); column t sits at position pos0 + t of a contiguous cache.

// #include "lib/numerics.wgsl"

override HD: u32 = 128u;     // head_dim, a multiple of 8
override GROUP: u32 = 4u;    // G = n_head / n_head_kv, at most WG / 16
override WG: u32 = 256u;     // threads: G per block of a round
override BR: u32 = WG / GROUP / 16u * 16u;  // blocks of 32 positions per round (whole superblocks)
override SPR: u32 = BR / 16u;               // superblocks per round
override HT: u32 = 1u << firstLeadingBit(WG / GROUP);  // threads per head of the max's tree
const DS: u32 = 8u;          // dimensions per workgroup: one vec4<u32> of halves per V row
const ROWS: u32 = 16u;       // V rows of a block in registers at once

struct Params {
    n_embd_kv: u32,    // cache elements per row (a multiple of 8)
    v_offset: u32,     // element index of v_cache[0, 0] (a multiple of 8)
    ld: u32,           // f32 elements between rows of scores (a multiple of 4)
    wmax_ld: u32,      // f32 elements between rows of wmax
    tp: u32,           // positions per workgroup maximum
    n_head_kv: u32,
    pos0: u32,         // position of column 0
    out_offset: u32,   // f32 index of out[0, 0]
    out_stride: u32,   // f32 elements between columns of out
    rn_zero: u32,      // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> scores: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> wmax: array<f32>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> red_s: array<f32, WG>;                // the max's tree; then [block][j] block sums
var<workgroup> blk_s: array<f32, BR * GROUP * DS>;   // [block of the round][j][d]: block sums of P·V
var<workgroup> sup_s: array<f32, SPR * GROUP * DS>;  // [superblock of the round][j][d]
var<workgroup> mx_s: array<f32, 16>;                 // [j]
var<workgroup> inv_s: array<f32, 16>;                // [j]

const NEG_MAX: u32 = 0xff7fffffu;  // -FLT_MAX (as attention_split_scores starts its max), as bits

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let slice = wid.x;
    let kvh   = wid.y;
    let t     = wid.z;
    let n     = p.pos0 + t + 1u;   // positions 0 ..= the column's
    let nb    = (n + 31u) / 32u;   // blocks of 32 positions
    let nsb   = (nb + 15u) / 16u;  // superblocks of 16 blocks
    let row0  = (t * p.n_head_kv + kvh) * GROUP;
    let b     = lid / GROUP;       // block of the round
    let j     = lid % GROUP;       // query head of the group
    let mine  = b < BR;
    let col   = (p.v_offset + kvh * HD + slice * DS) / 8u;  // vec4 index of the slice in row 0
    let vstep = p.n_embd_kv / 8u;
    let srow  = (row0 + j) * p.ld / 4u;                      // vec4 index of this head's scores

    // The first round's first V rows and this thread's scores, in flight while the max is reduced.
    var vr: array<vec4<u32>, ROWS>;
    var sv: array<vec4<f32>, 8>;  // the block's 32 scores; then its e values
    if (mine) {
        for (var k = 0u; k < ROWS; k++) { vr[k] = v_cache[col + min(32u * b + k, n - 1u) * vstep]; }
        for (var k = 0u; k < 8u; k++) {
            let pos = 32u * b + 4u * k;
            sv[k] = select(vec4<f32>(0.0), scores[srow + pos / 4u], pos < n);
        }
    }

    // mx[j]: threads (j, i < HT) take every HT-th workgroup maximum, then a tree per head.
    let n_w = (n + p.tp - 1u) / p.tp;
    {
        let jj = lid / HT;
        let i  = lid % HT;
        var m  = bitcast<f32>(NEG_MAX);
        if (jj < GROUP) {
            for (var w = i; w < n_w; w += HT) { m = max(m, wmax[(row0 + jj) * p.wmax_ld + w]); }
        }
        red_s[lid] = m;
        workgroupBarrier();
        for (var s = HT / 2u; s > 0u; s >>= 1u) {
            if (jj < GROUP && i < s) { red_s[lid] = max(red_s[lid], red_s[lid + s]); }
            workgroupBarrier();
        }
        if (lid < GROUP) { mx_s[lid] = red_s[lid * HT]; }
        workgroupBarrier();
    }
    let mx = mx_s[j];

    // The normalizer, round by round: thread (b, j) its block's e values in order, threads (j,
    // superblock) each superblock's blocks in order, thread j the superblocks in order.
    var total = 0.0;
    for (var r0 = 0u; r0 < nb; r0 += BR) {
        let blk = r0 + b;
        var ev: array<vec4<f32>, 8>;
        if (mine && r0 > 0u) {
            for (var k = 0u; k < 8u; k++) {
                let pos = 32u * blk + 4u * k;
                ev[k] = select(vec4<f32>(0.0), scores[srow + pos / 4u], pos < n);
            }
        } else {
            ev = sv;
        }
        var bs = 0.0;
        for (var k = 0u; k < 32u; k++) {
            let pos = 32u * blk + k;
            let x   = select(0.0, exp_fixed(ev[k / 4u][k % 4u] - mx), pos < n);
            ev[k / 4u][k % 4u] = x;
            bs = bs + x;
        }
        if (r0 == 0u) { sv = ev; }  // (the first round's e values, kept for P·V)
        workgroupBarrier();  // (red_s: the max's tree, or the last round's sums, read)
        if (mine) { red_s[b * GROUP + j] = bs; }
        workgroupBarrier();
        if (lid < SPR * GROUP) {
            let s  = lid / GROUP;
            let jj = lid % GROUP;
            var acc = 0.0;
            for (var bb = 0u; bb < 16u; bb++) { acc = acc + red_s[(16u * s + bb) * GROUP + jj]; }  // (0 past nb)
            blk_s[lid] = acc;
        }
        workgroupBarrier();
        if (lid < GROUP) {
            for (var s = 0u; s < SPR; s++) {
                if (r0 / 16u + s < nsb) { total = total + blk_s[s * GROUP + lid]; }
            }
        }
    }
    if (lid < GROUP) { inv_s[lid] = div_rn(1.0, total); }
    workgroupBarrier();
    let inv = inv_s[j];

    // P·V, round by round: thread (b, j) block r0 + b for head j, then threads (superblock, j, d)
    // each superblock's blocks, then threads (j, d) the superblocks into the total.
    var out_total = 0.0;  // threads (j, d) < G DS: the whole superblocks so far
    var out_last  = 0.0;  // the partial last superblock
    for (var r0 = 0u; r0 < nb; r0 += BR) {
        let blk = r0 + b;
        var acc: array<f32, DS>;
        for (var d = 0u; d < DS; d++) { acc[d] = 0.0; }
        if (mine && blk < nb) {
            var ev = sv;
            if (r0 > 0u) {  // this round's e values again
                for (var k = 0u; k < 8u; k++) {
                    let pos = 32u * blk + 4u * k;
                    ev[k] = select(vec4<f32>(0.0), scores[srow + pos / 4u], pos < n);
                }
                for (var k = 0u; k < 32u; k++) { ev[k / 4u][k % 4u] = exp_fixed(ev[k / 4u][k % 4u] - mx); }
            }
            for (var h = 0u; h < 32u / ROWS; h++) {
                if (h > 0u || r0 > 0u) {  // (the first round's first rows are loaded above)
                    for (var k = 0u; k < ROWS; k++) {
                        vr[k] = v_cache[col + min(32u * blk + ROWS * h + k, n - 1u) * vstep];
                    }
                }
                for (var k = 0u; k < ROWS; k++) {
                    let i    = ROWS * h + k;
                    let pr   = round_f16(ev[i / 4u][i % 4u] * inv);
                    let w    = vr[k];
                    let v01  = unpack2x16float(w.x);
                    let v23  = unpack2x16float(w.y);
                    let v45  = unpack2x16float(w.z);
                    let v67  = unpack2x16float(w.w);
                    let live = 32u * blk + i < n;
                    acc[0] = select(acc[0], acc[0] + pr * v01.x, live);
                    acc[1] = select(acc[1], acc[1] + pr * v01.y, live);
                    acc[2] = select(acc[2], acc[2] + pr * v23.x, live);
                    acc[3] = select(acc[3], acc[3] + pr * v23.y, live);
                    acc[4] = select(acc[4], acc[4] + pr * v45.x, live);
                    acc[5] = select(acc[5], acc[5] + pr * v45.y, live);
                    acc[6] = select(acc[6], acc[6] + pr * v67.x, live);
                    acc[7] = select(acc[7], acc[7] + pr * v67.y, live);
                }
            }
        }
        workgroupBarrier();  // (blk_s: the normalizer's, or the last round's, sums read)
        if (mine) {
            for (var d = 0u; d < DS; d++) { blk_s[(b * GROUP + j) * DS + d] = acc[d]; }
        }
        workgroupBarrier();
        // Threads (superblock s of the round, j, d): its blocks in order (blocks past nb are 0).
        if (lid < SPR * GROUP * DS) {
            let s  = lid / (GROUP * DS);
            let jd = lid % (GROUP * DS);
            var sum = 0.0;
            for (var bb = 0u; bb < 16u; bb++) { sum = sum + blk_s[(16u * s + bb) * GROUP * DS + jd]; }
            sup_s[lid] = sum;
        }
        workgroupBarrier();
        // Threads (j, d): the round's superblocks in order; a whole one into the total, the partial
        // last one kept apart (cpu::PositionSum::finish adds it last).
        if (lid < GROUP * DS) {
            for (var s = 0u; s < SPR; s++) {
                let sb = r0 / 16u + s;
                if (sb < nsb) {
                    let v = sup_s[s * GROUP * DS + lid];
                    if (512u * (sb + 1u) <= n) { out_total = out_total + v; } else { out_last = v; }
                }
            }
        }
    }
    if (lid < GROUP * DS) {
        let jj = lid / DS;
        let d  = lid % DS;
        out[p.out_offset + t * p.out_stride + (kvh * GROUP + jj) * HD + slice * DS + d] = out_total + out_last;
    }
}
