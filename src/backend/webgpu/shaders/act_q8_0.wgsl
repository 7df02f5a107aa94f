// act_q8_0: the Q8_0-block input of matvec_q8_acts.wgsl, made once per token (matvec_q8.wgsl's
// prologue makes it again in every workgroup), with the same expressions, so the same bits:
//   NORM   h = rms_norm(x) * nw exactly as rms_norm.wgsl: f32 squares summed in the block-halving
//          order (cpu::sum_squares, lib/sum_squares.wgsl), the mean and root correctly rounded
//          (inv_rms_from), h = (x nw) inv; else h = x;
//   blocks per 32 values of h as quantize_q8_0.wgsl: d = amax / 127 (correctly rounded), id = 1 / d
//          (0 for d = 0), codes roundf(h * id), d kept as its f16 rounding (lib/acts_q8_0.wgsl).
//
//   x: [K, T] f32   nw: [K] f32 (NORM)
//   acts: per token (act_words(NB) u32 words each) the codes [K/32][8] u32 (element 4w + e of a
//     block in byte e of its word w), then the f16 d of each block as f32 bits (lib/acts_q8_0.wgsl)
// Bindings: 0 x, 1 nw (read); 2 acts (read_write); 3 params (uniform)
// Dispatch: (1, T, 1): a workgroup per token. Invocation i owns the quarters (8 values) i + u WG of
// the token's 4 NB, u < QPT: it loads their x (and nw) once, into registers, and keeps them there:
// the four invocations of a block (consecutive) add its squares' first two halving levels by
// exchanges (shuffles where subgroups are 32 wide, else workgroup memory), the rest in registers;
// the blocks' sums go to the workgroup's halving tree (blocks_total: NB <= WG); then each quarter's
// max |h|, the block's from its four, and the codes. One pass over memory, where an earlier form
// read x three times (its norm, its maxes, its codes), each a round trip on the kernel's one
// workgroup.

// #include "lib/numerics.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/acts_q8_0.wgsl"

override WG: u32 = 256u;  // a power of two, at least NB (the host: at least 4 NB where it can)
override NB: u32 = 64u;   // K / 32
override QPT: u32 = 1u;   // quarters per invocation: ceil(4 NB / WG), at most 4
override NORM: bool = false;

struct Params {
    k: u32,          // K
    eps: f32,        // NORM
    x_offset: u32,   // f32 index of x[0, 0]
    x_stride: u32,   // f32 elements between tokens of x
    nw_offset: u32,  // f32 index of nw[0]
    rn_zero: u32,    // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> nw: array<f32>;
@group(0) @binding(2) var<storage, read_write> acts: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> block_sq: array<f32, NB>;  // NORM: the blocks' sums of squares
var<workgroup> xch: array<f32, WG>;       // the exchanges without subgroups

// The value of invocation lid ^ m (m < 4: within the block's four). Every invocation calls it.
@diagnostic(off, subgroup_uniformity)
fn partner(lid: u32, v: f32, m: u32) -> f32 {
    if (WG_REDUCE_SG && SG32) { return sg_shuffle_xor(v, m); }
    workgroupBarrier();
    xch[lid] = v;
    workgroupBarrier();
    return xch[lid ^ m];
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.y;
    let x0 = p.x_offset + t * p.x_stride;
    let o  = t * act_words(NB);  // the token's first word
    var hv: array<array<f32, 8>, 4>;
    var wv: array<array<f32, 8>, 4>;
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
        // Block b's 32 squares t[0..31], quarter q holding t[8q .. 8q + 7]: level 16 adds quarter
        // q + 2's onto q's, level 8 quarter 1's onto 0's (the exchanges: the same sums arrive in all
        // four, as a + b = b + a), then levels 4, 2, 1 in registers (block_sum_words' tree).
        for (var u = 0u; u < QPT; u++) {
            let g = lid + u * WG;
            var sq: array<f32, 8>;
            for (var j = 0u; j < 8u; j++) { sq[j] = select(0.0, mul_rn(hv[u][j], hv[u][j]), g < 4u * NB); }
            for (var j = 0u; j < 8u; j++) { sq[j] = sq[j] + partner(lid, sq[j], 2u); }
            for (var j = 0u; j < 8u; j++) { sq[j] = sq[j] + partner(lid, sq[j], 1u); }
            let s = ((sq[0] + sq[4]) + (sq[2] + sq[6])) + ((sq[1] + sq[5]) + (sq[3] + sq[7]));
            if (g < 4u * NB && g % 4u == 0u) { block_sq[g / 4u] = s; }
        }
        workgroupBarrier();
        var bs = 0.0;
        if (lid < NB) { bs = block_sq[lid]; }
        let inv = inv_rms_from(blocks_total(lid, bs), p.k, p.eps);
        for (var u = 0u; u < QPT; u++) {
            for (var j = 0u; j < 8u; j++) { hv[u][j] = (hv[u][j] * wv[u][j]) * inv; }
        }
    }
    for (var u = 0u; u < QPT; u++) {
        let g = lid + u * WG;
        var m = 0.0;
        for (var j = 0u; j < 8u; j++) { m = max(m, abs(hv[u][j])); }
        // (a max: any order, the same bits)
        m = max(m, partner(lid, m, 1u));
        m = max(m, partner(lid, m, 2u));
        if (g < 4u * NB) {
            let d  = q8_0_d(m);
            let id = q8_0_id(d);
            for (var q = 0u; q < 2u; q++) {
                var word = 0u;
                for (var e = 0u; e < 4u; e++) { word |= q8_0_code(hv[u][4u * q + e], id) << (8u * e); }
                acts[o + 2u * g + q] = word;
            }
            if (g % 4u == 0u) { acts[o + act_dq(NB) + g / 4u] = bitcast<u32>(round_f16(d)); }
        }
    }
}
