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
// Dispatch: (1, T, 1): a workgroup per token; invocation i the quarters (8 values) i + u WG of the
// token's 4 NB, u < QPT, in one pass over memory (lib/quarters_q8_0.wgsl). (An earlier form read x
// three times, for its norm, its maxes and its codes, each a round trip on the kernel's one
// workgroup.)

// #include "lib/numerics.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/acts_q8_0.wgsl"
// #include "lib/quarters_q8_0.wgsl"

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

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.y;
    let o  = t * act_words(NB);  // the token's first word
    let qs = quarters_q8_0(lid, p.x_offset + t * p.x_stride);
    for (var u = 0u; u < QPT; u++) {
        let g = lid + u * WG;
        if (g < 4u * NB) {
            acts[o + 2u * g]      = qs[u].w0;
            acts[o + 2u * g + 1u] = qs[u].w1;
            if (g % 4u == 0u) { acts[o + act_dq(NB) + g / 4u] = bitcast<u32>(round_f16(qs[u].d)); }
        }
    }
}
