// lm_head_i8_argmax: greedy decoding's LM head over the int8 copy of an F16 table
// (head_i8_pack.wgsl), which is half the bytes: per row an f32 value f = s * sum q h and a bound
// B = c ||h|| on its distance to the exact head's logit, in the form lm_head_f16_decode.wgsl's
// ARGMAX_ONLY writes them, so argmax_exact.wgsl then recomputes exactly (from the F16 table) the
// few rows with f + B >= max (f - B), and the greedy token is the exact head's.
// h = rms_norm(x) * nw (NORM), optionally rounded to f16, staged as lib/head_input.wgsl does.
//
//   q8: [n_vocab][K / 16] vec4<u32> (16 int8 each)   info: [n_vocab] (s, c) f32   x: [K] f32
//   nw: [K] f32   logits: [n_vocab] f32 (f)   partial: [n_vocab] (bits(B), 0), then
//   [ceil(n_vocab / 64)] (bits(max of f - B over the block), index)
// Bindings: 0 q8 (read), 1 info (read), 2 x (read), 3 nw (read), 4 logits (read_write),
//           5 partial (read_write), 6 params (uniform)
// Dispatch: (ceil(n_vocab / 64), 1, 1). 256 threads = 8 teams of 32 lanes; team t computes rows
// 64 w + 8 r + t for r = 0..7; lane l reads vec4 words l, l + 32, ... of each row.

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/head_input.wgsl"

override K: u32 = 2560u;      // elements per row, a multiple of 16, at most 4096
override NORM: bool = true;   // h = rms_norm(x) * nw first
override PER_LANE: u32 = (K / 16u + 31u) / 32u;  // vec4 loads per lane per row (<= 8)
override WG: u32 = 256u;      // fixed (the teams; lib/inv_rms.wgsl and lib/best_index.wgsl size by it)

struct Params {
    n_vocab: u32,
    x_offset: u32,        // f32 index of x[0]
    out_offset: u32,      // f32 index of logits[0]
    round_input: u32,     // 1: round h to f16 first
    k: u32,               // = K (for lib/inv_rms.wgsl)
    eps: f32,             // NORM only
    partial_offset: u32,  // vec2 index of partial[0]
    rn_zero: u32,         // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q8: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> info: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> nw: array<f32>;
@group(0) @binding(4) var<storage, read_write> logits: array<f32>;
@group(0) @binding(5) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> red: array<f32, 2048>;  // [team][row r][lane]

fn load_row(row: u32, lane: u32) -> array<vec4<u32>, 8> {
    var wv: array<vec4<u32>, 8>;
    let words = K / 16u;
    if (row < p.n_vocab) {
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (i < words) { wv[v] = q8[row * words + i]; }
        }
    }
    return wv;
}

// The four int8 codes of a word (byte b = element b) as f32.
fn codes_of(w: u32) -> vec4<f32> {
    let c = bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
    return vec4<f32>(c);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let team  = lid / 32u;
    let lane  = lid % 32u;
    let words = K / 16u;
    var next  = load_row(wid.x * 64u + team, lane);  // issued before h is staged
    stage_head_input(lid);

    // ||h|| from above: an f32 sum of K squares is within K u <= 2^-12 of exact, so 1 + 2^-8 covers it.
    var hh = 0.0;
    for (var i = lid; i < K / 4u; i += WG) { hh += dot(hs[i], hs[i]); }
    red[lid] = hh;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { red[lid] = red[lid] + red[lid + s]; }
        workgroupBarrier();
    }
    let h_norm = sqrt(red[0]) * (1.0 + 1.0 / 256.0);
    workgroupBarrier();  // red is reused below

    var acc: array<f32, 8>;
    for (var r = 0u; r < 8u; r++) {
        let row = wid.x * 64u + r * 8u + team;
        let wv  = next;
        if (r + 1u < 8u) { next = load_row(row + 8u, lane); }
        var c = vec4<f32>(0.0);  // four fma chains per lane (any order is within the bound)
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (i >= words) { break; }
            let w = wv[v];
            c = fma(codes_of(w.x), hs[4u * i], c);
            c = fma(codes_of(w.y), hs[4u * i + 1u], c);
            c = fma(codes_of(w.z), hs[4u * i + 2u], c);
            c = fma(codes_of(w.w), hs[4u * i + 3u], c);
        }
        acc[r] = (c.x + c.y) + (c.z + c.w);
    }
    for (var r = 0u; r < 8u; r++) { red[(team * 8u + r) * 32u + lane] = acc[r]; }
    workgroupBarrier();
    for (var s = 16u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var r = 0u; r < 8u; r++) {
                let i = (team * 8u + r) * 32u + lane;
                red[i] = red[i] + red[i + s];
            }
        }
        workgroupBarrier();
    }
    var bv = 0.0;
    var bi = 0xffffffffu;
    if (lane < 8u) {
        let row = wid.x * 64u + lane * 8u + team;
        if (row < p.n_vocab) {
            let sc = info[row];
            let f  = sc.x * red[(team * 8u + lane) * 32u];
            let b  = sc.y * h_norm;
            partial[p.partial_offset + row] = vec2<u32>(bitcast<u32>(b), 0u);
            logits[p.out_offset + row] = f;
            bv = f - b;
            bi = row;
        }
    }
    let best = best_index(lid, bv, bi);
    if (lid == 0u) {
        partial[p.partial_offset + p.n_vocab + wid.x] = best;
    }
}
