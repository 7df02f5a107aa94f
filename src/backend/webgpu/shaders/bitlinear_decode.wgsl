requires packed_4x8_integer_dot_product;

// bitlinear_decode: y = W a or y += W a for ONE token (decode), with the activations either given
// (NORM = false: a previous rms_norm_quant's int8 words) or computed in the prologue from x
// (NORM = true: a = int8-quantize(rms_norm(x) * nw), fused, lib/act_stage.wgsl). Same numerics as
// bitlinear.wgsl with one scale group per row (I2_S): y = (dot / act_scale) * scale * output_scale.
//
//   wq: codes [N][K/64] vec4<u32> | scales [N] f32 | output scales [N] f32 (webgpu_weights.h)
//   src: x [K] f32 bits (NORM) or act_q [K] int8 words   src_scale: nw [K] f32 (NORM) or act_scale [1]
//   y: [N] f32
//   norm_stats: block sums of squares (lib/sum_squares.wgsl) of x (STATS_IN) and of y (STATS_OUT)
// Bindings: 0 wq (read), 1 src (read), 2 src_scale (read), 3 y (read_write), 4 norm_stats
// (read_write), 5 pfw (read: a weight to pull into L2, lib/weight_prefetch.wgsl), 6 x_out (read_write:
// with PARTS, x as the deferred attention_split_combine would have written it), 7 params (uniform)
// Dispatch: (ceil(N / (2 WG / LANES)), 1, 1). Each workgroup stages the activations, then each
// team of LANES lanes dots two rows (lib/ternary_decode.wgsl's pairs), reduced in workgroup memory;
// thread r < 2 WG / LANES writes row r.

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/act_stage.wgsl"
// #include "lib/ternary_decode.wgsl"
// #include "lib/decode_io.wgsl"
// #include "lib/weight_prefetch.wgsl"

override WG: u32 = 256u;    // a power of two, >= K / 32
override LANES: u32 = 8u;   // a power of two dividing WG, >= K / 512
override K: u32 = 2560u;    // a multiple of 64
override NORM: bool = true;
// N as a constant (the host always sets it; 0: the uniform's): the weight loads' row bounds
// then need nothing from the uniform buffer, whose first read waits for memory.
override N_ROWS: u32 = 0u;

fn out_rows() -> u32 {
    if (N_ROWS != 0u) { return N_ROWS; }
    return p.n_rows;
}
// y's block sums of squares go to norm_stats (the host sets it when the workgroup's rows are whole
// blocks of 32), for the next kernel's norm.
override STATS_OUT: bool = false;

struct Params {
    n_rows: u32,          // N
    eps: f32,             // NORM only
    src_offset: u32,      // u32 index of x[0] / act_q[0]
    scale_offset: u32,    // f32 index of nw[0] / act_scale[0]
    scales_offset: u32,   // u32 index of the row scales in wq
    oscales_offset: u32,  // u32 index of the output scales in wq
    y_offset: u32,        // f32 index of y[0]
    accumulate: u32,      // 1: y += W a
    stats_in: u32,        // f32 index in norm_stats of x's block sums (STATS_IN)
    stats_out: u32,       // f32 index in norm_stats where y's block sums go (STATS_OUT)
    x_out_offset: u32,    // PARTS: f32 index in x_out where x goes
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;  // (lib/decode_io.wgsl's words)
@group(0) @binding(2) var<storage, read> src_scale: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(5) var<storage, read> pfw: array<u32>;  // lib/weight_prefetch.wgsl (any buffer when off)
@group(0) @binding(6) var<storage, read_write> x_out: array<f32>;  // PARTS: x as the combine would have written it
@group(0) @binding(7) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let rows = 2u * (WG / LANES);
    let team = lid / LANES;
    let row  = wid.x * rows + 2u * team;  // the team's rows: row, row + 1
    let lane = lid % LANES;
    let ro   = wid.x * rows + lid;  // the row this invocation finishes (lid < rows)
    var w: RowWords;
    var sc: vec2<f32>;
    var y0 = 0.0;  // y[ro] when accumulating, loaded up front like the scales
    var xin: StageInput;
    var pf = 0u;  // (lib/weight_prefetch.wgsl)
    xin = stage_load(lid, K);  // (x and the norm weights first: the norm is the longer chain)
    if (PARTS && wid.x == 0u) {  // x where the deferred combine would have written it (others may read it)
        for (var i = 0u; i < STAGE_U; i++) {
            let j = lid + i * WG;
            if (j < K / 4u) {
                for (var c = 0u; c < 4u; c++) { x_out[p.x_out_offset + 4u * j + c] = xin.xs[i][c]; }
            }
        }
    }
    w = prefetch_row_pair(vec2<u32>(row, row + 1u), vec2<bool>(row < out_rows(), row + 1u < out_rows()), lane, LANES, K);
    if (lid < rows && ro < out_rows()) {
        sc = row_scales(ro);
        if (p.accumulate != 0u) { y0 = y[p.y_offset + ro]; }
    }
    let as_ = stage_activations_from(lid, K, xin);
    pf ^= kernel_prefetch(lid, wid.x);  // (once x and the weights have arrived)
    var partial = vec2<i32>();
    if (row < out_rows()) { partial = row_dot_pair(w, lane, LANES, K); }
    let dot = reduce_row_pairs(lid, partial, lid / 2u, LANES)[lid % 2u];  // row ro's

    let wrote = lid < rows && ro < out_rows();
    var out_v = 0.0;
    if (wrote) {
        let v = row_product_scaled(dot, as_, sc);
        out_v = select(v, y0 + v, p.accumulate != 0u);
        y[p.y_offset + ro] = out_v;
    }
    if (STATS_OUT) { put_block_sums(lid, ro, out_v, wrote); }
    kernel_prefetch_use(pf);
}
