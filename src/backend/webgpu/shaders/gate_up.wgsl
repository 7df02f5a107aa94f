requires packed_4x8_integer_dot_product;

// gate_up: f = act(Wg a) * (Wu a), with gate and up stacked in one weight (rows [0, n_ff) gate,
// [n_ff, 2 n_ff) up) and act = ReLU² (BitNet b1.58) or SiLU. Each product is computed exactly as in
// bitlinear.wgsl (times its row's output scale), then the activation, as the CPU backend's gate_up.
//
//   weights: codes [2 n_ff][K/16] u32 | group scales [2 n_ff][n_groups] f32 | output scales [2 n_ff] f32
//   act_q: [K, T] int8 (u32 words)   act_scale: [T] f32   f: [n_ff, T] f32
// Bindings: 0 weights (read), 1 act_q (read), 2 act_scale (read), 3 f (read_write), 4 params (uniform)
// Dispatch: (ceil(n_ff / ROWS), ceil(T / TOKS), 1). A workgroup owns ROWS outputs (2 ROWS weight
// rows: team r < ROWS reads gate row r0 + r, team ROWS + r reads up row n_ff + r0 + r) x TOKS tokens.

// #include "lib/ternary.wgsl"
// #include "lib/ternary_rows.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"

override WG: u32 = 256u;
override ROWS: u32 = 2u;      // outputs per workgroup; 2 ROWS divides WG
override TOKS: u32 = 1u;      // 1..8
override N_GROUPS: u32 = 1u;  // scale groups per row

struct Params {
    n_ff: u32,            // outputs (half the weight rows)
    k_words: u32,         // K / 16
    group_words: u32,     // words per scale group
    n_tokens: u32,
    scales_offset: u32,   // u32 index of the group scales in `weights`
    oscales_offset: u32,  // u32 index of the output scales in `weights`
    act_offset: u32,      // u32 index of act_q[0, 0]
    act_stride: u32,      // u32 words between tokens of act_q
    ascale_offset: u32,   // f32 index of act_scale[0]
    f_offset: u32,        // f32 index of f[0, 0]
    f_stride: u32,        // f32 elements between tokens of f
    activation: u32,      // 0: relu², 1: silu
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> weights: array<u32>;
@group(0) @binding(1) var<storage, read> act_q: array<u32>;
@group(0) @binding(2) var<storage, read> act_scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> f: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> dots: array<atomic<i32>, 2u * ROWS * TOKS * N_GROUPS>;  // [team][token][group]

// The bitlinear epilogue of weight row `row` (team `team`) for token slot t.
fn epilogue(team: u32, row: u32, t: u32, as_: f32) -> f32 {
    return row_epilogue((team * TOKS + t) * N_GROUPS, row, as_);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let lanes = WG / (2u * ROWS);
    let team  = lid / lanes;
    let lane  = lid % lanes;
    let out0  = wid.x * ROWS;
    let tok0  = wid.y * TOKS;
    let n_tok = min(TOKS, p.n_tokens - tok0);
    for (var i = lid; i < 2u * ROWS * TOKS * N_GROUPS; i += WG) { atomicStore(&dots[i], 0); }
    workgroupBarrier();

    let out = out0 + team % ROWS;
    let row = select(out, p.n_ff + out, team >= ROWS);
    if (out < p.n_ff) {
        accumulate_row_dots(row, team, lane, lanes, tok0, n_tok);
    }
    workgroupBarrier();

    for (var oi = lid; oi < ROWS * TOKS; oi += WG) {
        let r = oi / TOKS;
        let t = oi % TOKS;
        let o = out0 + r;
        if (o < p.n_ff && t < n_tok) {
            let as_ = act_scale[p.ascale_offset + tok0 + t];
            let g   = epilogue(r, o, t, as_);
            let u   = epilogue(ROWS + r, p.n_ff + o, t, as_);
            f[p.f_offset + (tok0 + t) * p.f_stride + o] = ffn_gate(g, u, p.activation);
        }
    }
}
