requires packed_4x8_integer_dot_product;

// gate_up_decode: f = act(Wg a) * (Wu a) for ONE token, gate and up stacked in one weight (rows
// [0, n_ff) gate, [n_ff, 2 n_ff) up), act = ReLU² or SiLU; the activations given or computed by the
// fused norm prologue as in bitlinear_decode.wgsl. Same numerics as gate_up.wgsl with one scale
// group per row.
//
//   wq: codes [2 n_ff][K/64] vec4<u32> | scales [2 n_ff] | output scales [2 n_ff]   f: [n_ff] f32
// Bindings: 0 wq (read), 1 src (read), 2 src_scale (read), 3 f (read_write), 4 norm_stats
// (read_write; as in bitlinear_decode.wgsl, f's block sums with STATS_OUT), 5 params (uniform)
// Dispatch: (ceil(n_ff / OUTS), 1, 1). The workgroup's OUTS = WG / LANES teams each read a gate row
// and its up row (lib/ternary_decode.wgsl's pairs, sharing their activation reads).

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/act_stage.wgsl"
// #include "lib/ternary_decode.wgsl"
// #include "lib/decode_io.wgsl"
// #include "lib/weight_prefetch.wgsl"

override WG: u32 = 256u;
override LANES: u32 = 8u;
override K: u32 = 2560u;
override NORM: bool = true;
// n_ff as a constant (the host always sets it; 0: the uniform's): the weight loads' row bounds
// then need nothing from the uniform buffer, whose first read waits for memory.
override N_FF: u32 = 0u;

fn ff_rows() -> u32 {
    if (N_FF != 0u) { return N_FF; }
    return p.n_ff;
}
override STATS_OUT: bool = false;  // f's block sums of squares to norm_stats (outputs are whole blocks)

struct Params {
    n_ff: u32,
    eps: f32,
    src_offset: u32,
    scale_offset: u32,
    scales_offset: u32,
    oscales_offset: u32,
    f_offset: u32,        // f32 index of f[0]
    activation: u32,      // 0: relu², 1: silu
    stats_in: u32,        // as bitlinear_decode.wgsl
    stats_out: u32,
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;  // (lib/decode_io.wgsl's words)
@group(0) @binding(2) var<storage, read> src_scale: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> f: array<f32>;
@group(0) @binding(4) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(5) var<storage, read> pfw: array<u32>;  // lib/weight_prefetch.wgsl (any buffer when off)
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let outs = WG / LANES;
    let team = lid / LANES;
    let lane = lid % LANES;
    let out  = wid.x * outs + team;  // the team's output: gate row out, up row n_ff + out
    let o    = wid.x * outs + lid;  // the output this invocation finishes (lid < outs)
    var w: RowWords;
    var sg: vec2<f32>;
    var su: vec2<f32>;
    var xin: StageInput;
    var pf = 0u;  // (lib/weight_prefetch.wgsl)
    xin = stage_load(lid, K);  // (x and the norm weights first: the norm is the longer chain)
    w = prefetch_row_pair(vec2<u32>(out, ff_rows() + out), vec2<bool>(out < ff_rows()), lane, LANES, K);
    if (lid < outs && o < ff_rows()) {
        sg = row_scales(o);
        su = row_scales(ff_rows() + o);
    }
    let as_ = stage_activations_from(lid, K, xin);
    pf ^= kernel_prefetch(lid, wid.x);  // (once x and the weights have arrived)
    var partial = vec2<i32>();
    if (out < ff_rows()) { partial = row_dot_pair(w, lane, LANES, K); }
    let gu = reduce_row_pairs(lid, partial, lid, LANES);  // the (gate, up) dots of output o (lid < outs)

    let wrote = lid < outs && o < ff_rows();
    var out_v = 0.0;
    if (wrote) {
        let g = row_product_scaled(gu.x, as_, sg);
        let u = row_product_scaled(gu.y, as_, su);
        out_v = ffn_gate(g, u, p.activation);
        f[p.f_offset + o] = out_v;
    }
    if (STATS_OUT) { put_block_sums(lid, o, out_v, wrote); }
    kernel_prefetch_use(pf);
}
