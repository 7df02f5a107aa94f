// lm_head_f16_decode: logits[v] = head[v] · h for one token (decode) and an F16 table, at memory
// speed, with the two neighbours of the LM head fused in: NORM = true computes h = rms_norm(x) * nw
// in the prologue (as rms_norm.wgsl, bit for bit), and every workgroup also writes the winner of its
// 64 logits (the first argmax stage, as argmax_partial.wgsl) so that argmax_final.wgsl can follow.
// Same numerics as lm_head.wgsl (h optionally rounded to f16 first; double-float sums); h is staged
// once per workgroup in workgroup memory, the table is read as vec4<u32> (8 halves per load), and a
// workgroup owns 64 rows so that staging h is amortised.
//
//   head: [K, n_vocab] f16 (K % 8 == 0, K <= 4096)   x: [K] f32 (h itself when NORM = false)   nw: [K] f32
//   logits: [n_vocab] f32   partial: [ceil(n_vocab / 64)] (f32 value bits, u32 index)
// Bindings: 0 head (read, vec4<u32>), 1 x (read), 2 nw (read; any buffer when NORM = false),
//           3 logits (read_write), 4 partial (read_write), 5 params (uniform)
// Dispatch: (ceil(n_vocab / 64), 1, 1). 256 threads = 8 teams of 32 lanes; team t computes rows
// 64 w + 8 r + t for r = 0..7 (the 8 teams read 8 neighbouring rows at a time); lane l reads
// vec4 words l, l + 32, ... of each row. Partial sums are reduced per team in workgroup memory.

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/head_input.wgsl"
// #include "lib/head_params.wgsl"

override K: u32 = 2560u;     // elements per row (n_embd)
override NORM: bool = false;  // h = rms_norm(x) * nw first
override ROUND_IN: bool = false;  // h rounded to f16 first (lib/head_input.wgsl)
// ARGMAX_ONLY (greedy decoding, the logits are not read): f32 fma sums plus, per row, a bound B on
// their distance to the exact logit; partial[row] = (bits(B), 0) for rows < n_vocab and the block's
// max of (logit - B) at partial[n_vocab + block]. argmax_exact.wgsl then recomputes exactly the
// few rows that can be the maximum. Otherwise the double-float sums of the exact head (the CPU's
// double sum).
override ARGMAX_ONLY: bool = false;
override PER_LANE: u32 = (K / 8u + 31u) / 32u;  // vec4 loads per lane per row (K <= 4096: <= 16)
override WG: u32 = 256u;      // fixed (lib/inv_rms.wgsl and lib/best_index.wgsl size their arrays by it)


@group(0) @binding(0) var<storage, read> head: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> red: array<vec2<f32>, 2048>;  // [team][row r][lane]

// One step of a row's sum: acc + e.x * h.x + e.y * h.y.
fn chain(acc: vec2<f32>, e: vec2<f32>, h: vec2<f32>) -> vec2<f32> {
    if (ARGMAX_ONLY) {  // (sum, sum of |products|)
        return vec2<f32>(fma(e.y, h.y, fma(e.x, h.x, acc.x)), fma(abs(e.y), abs(h.y), fma(abs(e.x), abs(h.x), acc.y)));
    }
    return head_pair_exact(acc, e, h);
}

// The lane's vec4 words of `row` (all loads issued together: the table streams at memory speed
// only with many bytes in flight).
fn load_row(row: u32, lane: u32) -> array<vec4<u32>, 16> {
    var wv: array<vec4<u32>, 16>;
    let words = K / 8u;  // vec4<u32> per row
    if (row < p.n_vocab) {
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (i < words) { wv[v] = head[row * words + i]; }
        }
    }
    return wv;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let team  = lid / 32u;
    let lane  = lid % 32u;
    let words = K / 8u;  // vec4<u32> per row
    // The first row's loads are issued before h is staged (its norm and f16 rounding take a few
    // microseconds), and each next row's while the current one is summed.
    var next = load_row(wid.x * 64u + team, lane);
    stage_head_input(lid);
    var acc: array<vec2<f32>, 8>;
    for (var r = 0u; r < 8u; r++) {
        let row = wid.x * 64u + r * 8u + team;
        let wv  = next;
        if (r + 1u < 8u) { next = load_row(row + 8u, lane); }
        if (row >= p.n_vocab) { continue; }
        // Four independent sum chains (one per u32 of the vec4) so that the adds overlap.
        var c = array<vec2<f32>, 4>();  // explicitly zero: a new sum per row
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (i >= words) { break; }
            let w  = wv[v];
            let ha = hs[2u * i];       // h of the halves in w.x (xy) and w.y (zw)
            let hb = hs[2u * i + 1u];  // h of the halves in w.z (xy) and w.w (zw)
            c[0] = chain(c[0], unpack2x16float(w.x), ha.xy);
            c[1] = chain(c[1], unpack2x16float(w.y), ha.zw);
            c[2] = chain(c[2], unpack2x16float(w.z), hb.xy);
            c[3] = chain(c[3], unpack2x16float(w.w), hb.zw);
        }
        if (ARGMAX_ONLY) {
            acc[r] = (c[0] + c[1]) + (c[2] + c[3]);
        } else {
            acc[r] = df_add(df_add(c[0], c[1]), df_add(c[2], c[3]));
        }
    }
    for (var r = 0u; r < 8u; r++) { red[(team * 8u + r) * 32u + lane] = acc[r]; }
    workgroupBarrier();
    for (var s = 16u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var r = 0u; r < 8u; r++) {
                let i = (team * 8u + r) * 32u + lane;
                if (ARGMAX_ONLY) {
                    red[i] = red[i] + red[i + s];
                } else {
                    red[i] = df_add(red[i], red[i + s]);
                }
            }
        }
        workgroupBarrier();
    }
    var bv = 0.0;
    var bi = 0xffffffffu;
    if (lane < 8u) {
        let row = wid.x * 64u + lane * 8u + team;
        if (row < p.n_vocab) {
            let rv = red[(team * 8u + lane) * 32u];
            if (ARGMAX_ONLY) {
                // Every f32 sum of K exact products (any order) is within K u sum|p| of the exact
                // sum, which is within u |sum| of the rounded exact logit: (K + 2) u sum|p|, with
                // 10% to spare for the f32 sum of |p| itself.
                let b = 1.1 * f32(K + 2u) * 5.9604645e-8 * rv.y;
                partial[p.partial_offset + row] = vec2<u32>(bitcast<u32>(b), 0u);
                bv = rv.x - b;
                logits[p.out_offset + row] = rv.x;
            } else {
                bv = df_to_f32(rv);
                logits[p.out_offset + row] = bv;
            }
            bi = row;
        }
    }
    let best = best_index(lid, bv, bi);
    if (lid == 0u) {
        partial[p.partial_offset + select(0u, p.n_vocab, ARGMAX_ONLY) + wid.x] = best;
    }
}
