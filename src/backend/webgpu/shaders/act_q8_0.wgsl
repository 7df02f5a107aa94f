// act_q8_0: the Q8_0-block input of matvec_q8_acts.wgsl, made once per token (matvec_q8.wgsl's
// prologue makes it again in every workgroup), with the same expressions, so the same bits:
//   NORM   h = rms_norm(x) * nw exactly as rms_norm.wgsl (lib/inv_rms.wgsl), else h = x;
//   blocks per 32 values of h as quantize_q8_0.wgsl: d = amax / 127 (correctly rounded), id = 1 / d
//          (0 for d = 0), codes roundf(h * id), d kept as its f16 rounding.
//
//   x: [K, T] f32   nw: [K] f32 (NORM)
//   acts: per token (act_words(NB) u32 words each) the codes [K/32][8] u32 (element 4w + e of a
//     block in byte e of its word w), then the f16 d of each block as f32 bits (lib/acts_q8_0.wgsl)
// Bindings: 0 x, 1 nw (read); 2 acts (read_write); 3 params (uniform)
// Dispatch: (1, T, 1): a workgroup per token.

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/acts_q8_0.wgsl"

override WG: u32 = 256u;  // a power of two; NORM needs K <= 32 WG (lib/inv_rms.wgsl)
override NB: u32 = 64u;   // K / 32
override NORM: bool = false;

struct Params {
    k: u32,          // K (lib/inv_rms.wgsl)
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

var<workgroup> part_max: array<f32, 4u * NB>;  // per 8 values


// Element i of h (matvec_q8.wgsl's h_of).
fn h_of(x0: u32, i: u32, inv: f32) -> f32 {
    if (!NORM) { return x[x0 + i]; }
    return (x[x0 + i] * nw[p.nw_offset + i]) * inv;
}

// Invocation g owns values 8 g .. 8 g + 7 (a quarter of block g / 4), as matvec_q8.wgsl's stage_q8_0:
// the quarter's max |h|, then, with the block's max from its four quarters, its two code words.
@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.y;
    let x0 = p.x_offset + t * p.x_stride;
    let o  = t * act_words(NB);  // the token's first word
    var inv = 1.0;
    if (NORM) { inv = inv_rms(lid, x0); }
    for (var g = lid; g < 4u * NB; g += WG) {
        var m = 0.0;
        for (var j = 0u; j < 8u; j++) { m = max(m, abs(h_of(x0, 8u * g + j, inv))); }
        part_max[g] = m;
    }
    workgroupBarrier();
    for (var g = lid; g < 4u * NB; g += WG) {
        let b    = g / 4u;
        let amax = max(max(part_max[4u * b], part_max[4u * b + 1u]), max(part_max[4u * b + 2u], part_max[4u * b + 3u]));
        let d    = div_rn(amax, 127.0);
        let id   = select(0.0, div_rn(1.0, d), d != 0.0);
        for (var q = 0u; q < 2u; q++) {
            var word = 0u;
            for (var e = 0u; e < 4u; e++) {
                let c = i32(round_away(mul_rn(h_of(x0, 8u * g + 4u * q + e, inv), id)));
                word |= (bitcast<u32>(c) & 0xffu) << (8u * e);
            }
            acts[o + 2u * g + q] = word;
        }
        if (g % 4u == 0u) { acts[o + act_dq(NB) + b] = bitcast<u32>(round_f16(d)); }
    }
}
