// One token's Q8_0 blocks of h (NORM: h = rms_norm(x) * nw, else x) in one pass over memory, shared
// by act_q8_0.wgsl (into an acts buffer) and matvec_q8.wgsl's prologue (into workgroup memory), with
// quantize_q8_0.wgsl's expressions and rms_norm.wgsl's numerics, so the CPU's bits:
//   invocation i owns the quarters (8 values) i + u WG of the 4 NB, u < QPT, and loads their x (and
//   nw) once into registers. NORM: f32 squares summed in the block-halving order (cpu::sum_squares):
//   the four invocations of a block (consecutive) add the levels at distances 16 and 8 by exchanges
//   (shuffles where subgroups are 32 wide, else workgroup memory; a + b = b + a, so all four get the
//   same sums), levels 4, 2, 1 in registers (block_sum_words' tree); the block sums go through the
//   workgroup's halving tree (blocks_total: NB <= WG); the mean and root correctly rounded
//   (inv_rms_from); h = (x nw) inv. Then each quarter's max |h|, the block's by exchanges (a max is
//   exact in any order), d = amax / 127, id = 1 / d, the codes roundf(h id) (lib/acts_q8_0.wgsl).
// With Q8_TOTAL_SG (in effect only where SG32 holds and NB <= 256) the block sums' total is each
// subgroup's from workgroup memory (lib/sum_squares.wgsl's blocks_total_team: the same halving
// order, zero padding to 256 blocks instead of WG, so the same bits): one barrier instead of the
// workgroup tree's log2(WG) + 1.
// The including kernel declares `override WG` (a power of two), `override NB`, `override QPT`
// (ceil(4 NB / WG), at most 8), `override NORM`, the bindings `x`, `nw` (array<f32>) and a uniform
// `p` with k, eps, nw_offset and rn_zero, and includes lib/numerics.wgsl, lib/sum_squares.wgsl,
// lib/wg_reduce.wgsl and lib/acts_q8_0.wgsl. Every invocation calls quarters_q8_0 (barriers).

const Q8_MAX_QPT: u32 = 8u;

// A quarter's two code words (elements 4w + e in byte e), its block's d (before the f16 rounding),
// and the sum of its 8 codes.
struct QuarterQ8 {
    w0: u32,
    w1: u32,
    d: f32,
    csum: i32,
}

var<workgroup> q8_block_sq: array<f32, NB>;  // NORM: the blocks' sums of squares
var<workgroup> q8_xch: array<f32, WG>;       // the exchanges without subgroups
override Q8_TOTAL_SG: bool = false;

// The value of invocation lid ^ m (m < 4: within the block's four). Every invocation calls it.
@diagnostic(off, subgroup_uniformity)
fn q8_partner(lid: u32, v: f32, m: u32) -> f32 {
    if (WG_REDUCE_SG && SG32) { return sg_shuffle_xor(v, m); }
    workgroupBarrier();
    q8_xch[lid] = v;
    workgroupBarrier();
    return q8_xch[lid ^ m];
}

// The quarters lid + u WG (u < QPT) of token x0's h (x0: f32 index of the token's x[0]).
fn quarters_q8_0(lid: u32, x0: u32) -> array<QuarterQ8, Q8_MAX_QPT> {
    var hv: array<array<f32, 8>, Q8_MAX_QPT>;
    var wv: array<array<f32, 8>, Q8_MAX_QPT>;
    for (var u = 0u; u < QPT; u++) {
        let g = lid + u * WG;  // the quarter: values 8 g .. 8 g + 7 of block g / 4
        if (g < 4u * NB) {
            for (var j = 0u; j < 8u; j++) {
                hv[u][j] = x[x0 + 8u * g + j];
                if (NORM) { wv[u][j] = nw[p.nw_offset + 8u * g + j]; }
            }
        }
    }
    if (NORM) {
        for (var u = 0u; u < QPT; u++) {
            let g = lid + u * WG;
            var sq: array<f32, 8>;
            for (var j = 0u; j < 8u; j++) { sq[j] = select(0.0, mul_rn(hv[u][j], hv[u][j]), g < 4u * NB); }
            for (var j = 0u; j < 8u; j++) { sq[j] = sq[j] + q8_partner(lid, sq[j], 2u); }  // level 16
            for (var j = 0u; j < 8u; j++) { sq[j] = sq[j] + q8_partner(lid, sq[j], 1u); }  // level 8
            let s = ((sq[0] + sq[4]) + (sq[2] + sq[6])) + ((sq[1] + sq[5]) + (sq[3] + sq[7]));
            if (g < 4u * NB && g % 4u == 0u) { q8_block_sq[g / 4u] = s; }
        }
        workgroupBarrier();
        var total = 0.0;
        if (Q8_TOTAL_SG && WG_REDUCE_SG && SG32 && NB <= 256u) {
            var t: array<f32, 8>;
            for (var i = 0u; i < 8u; i++) {
                let b = lid % 32u + 32u * i;
                t[i] = select(0.0, q8_block_sq[min(b, NB - 1u)], b < NB);
            }
            total = blocks_total_team(lid, t);
        } else {
            var bs = 0.0;
            if (lid < NB) { bs = q8_block_sq[lid]; }
            total = blocks_total(lid, bs);
        }
        let inv = inv_rms_from(total, p.k, p.eps);
        for (var u = 0u; u < QPT; u++) {
            for (var j = 0u; j < 8u; j++) { hv[u][j] = (hv[u][j] * wv[u][j]) * inv; }
        }
    }
    var res: array<QuarterQ8, Q8_MAX_QPT>;
    for (var u = 0u; u < QPT; u++) {
        var m = 0.0;
        for (var j = 0u; j < 8u; j++) { m = max(m, abs(hv[u][j])); }
        m = max(m, q8_partner(lid, m, 1u));
        m = max(m, q8_partner(lid, m, 2u));
        let d  = q8_0_d(m);
        let id = q8_0_id(d);
        var words = array<u32, 2>(0u, 0u);
        var cs = 0;
        for (var q = 0u; q < 2u; q++) {
            for (var e = 0u; e < 4u; e++) {
                let c = q8_0_code(hv[u][4u * q + e], id);
                words[q] |= c << (8u * e);
                cs += (bitcast<i32>(c << 24u)) >> 24u;
            }
        }
        res[u] = QuarterQ8(words[0], words[1], d, cs);
    }
    return res;
}
