requires packed_4x8_integer_dot_product;

// bitlinear: y = W a, or y += W a (the residual-add epilogue), for a ternary W in the GPU layout
// (lib/ternary.wgsl, webgpu_weights.h) and per-token int8 activations a. Bit-exact with
// cpu::bitlinear_dot: integer dots per scale group are exact; the float epilogue
// sum_g ((float)dot_g / act_scale) * scale_g runs in group order, then * output_scale.
//
//   weights: codes [N][K/16] u32 | group scales [N][n_groups] f32 | output scales [N] f32
//   act_q: [K, T] int8 (u32 words)   act_scale: [T] f32   y: [N, T] f32
// Bindings: 0 weights (read), 1 act_q (read), 2 act_scale (read), 3 y (read_write), 4 params (uniform)
// Dispatch: (ceil(N / ROWS), ceil(T / TOKS), 1). A workgroup owns ROWS rows x TOKS tokens. Its
// threads form ROWS teams of WG / ROWS lanes; lane l of a team reads words l, l + lanes, ... of its
// row (neighbouring lanes, neighbouring words), dots each with TOKS tokens, and adds its partial
// sums per scale group into workgroup atomics. Then the outputs' epilogues are spread over the
// threads. The host picks lanes ~ K/64 (each lane a few words) and ROWS = WG / lanes.

// #include "lib/ternary.wgsl"
// #include "lib/ternary_rows.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"

override WG: u32 = 256u;
override ROWS: u32 = 4u;      // divides WG
override TOKS: u32 = 1u;      // 1..8
override N_GROUPS: u32 = 1u;  // scale groups per row (sizes the workgroup array)

struct Params {
    n_rows: u32,          // N
    k_words: u32,         // K / 16
    group_words: u32,     // words per scale group (K / 16 when one scale per row)
    n_tokens: u32,        // T
    scales_offset: u32,   // u32 index of the group scales in `weights`
    oscales_offset: u32,  // u32 index of the output scales in `weights`
    act_offset: u32,      // u32 index (bytes / 4) of act_q[0, 0]
    act_stride: u32,      // u32 words between tokens of act_q (K / 4)
    ascale_offset: u32,   // f32 index of act_scale[0]
    y_offset: u32,        // f32 index of y[0, 0]
    y_stride: u32,        // f32 elements between tokens of y
    accumulate: u32,      // 1: y += W a
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> weights: array<u32>;
@group(0) @binding(1) var<storage, read> act_q: array<u32>;
@group(0) @binding(2) var<storage, read> act_scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> dots: array<atomic<i32>, ROWS * TOKS * N_GROUPS>;  // [row][token][group]

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let lanes = WG / ROWS;
    let team  = lid / lanes;
    let lane  = lid % lanes;
    let row0  = wid.x * ROWS;
    let tok0  = wid.y * TOKS;
    let n_tok = min(TOKS, p.n_tokens - tok0);
    for (var i = lid; i < ROWS * TOKS * N_GROUPS; i += WG) { atomicStore(&dots[i], 0); }
    workgroupBarrier();

    let row = row0 + team;
    if (row < p.n_rows) {
        accumulate_row_dots(row, team, lane, lanes, tok0, n_tok);
    }
    workgroupBarrier();

    for (var o = lid; o < ROWS * TOKS; o += WG) {
        let r  = o / TOKS;
        let t  = o % TOKS;
        let ro = row0 + r;
        if (ro < p.n_rows && t < n_tok) {
            let as_ = act_scale[p.ascale_offset + tok0 + t];
            let v   = row_epilogue((r * TOKS + t) * N_GROUPS, ro, as_);
            let yi = p.y_offset + (tok0 + t) * p.y_stride + ro;
            if (p.accumulate != 0u) {
                y[yi] = y[yi] + v;
            } else {
                y[yi] = v;
            }
        }
    }
}
