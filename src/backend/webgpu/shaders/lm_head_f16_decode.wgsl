// lm_head_f16_decode: logits[v] = head[v] · h for one token (decode) and an F16 table, at memory
// speed. Same numerics as lm_head.wgsl (h optionally rounded to f16 first; double-float sums),
// different schedule: h is staged once per workgroup in workgroup memory, the table is read as
// vec4<u32> (8 halves per load), and a workgroup owns 64 rows so that staging h is amortised.
//
//   head: [K, n_vocab] f16 (K % 8 == 0)   h: [K] f32   logits: [n_vocab] f32
// Bindings: 0 head (read, vec4<u32>), 1 h (read), 2 logits (read_write), 3 params (uniform)
// Dispatch: (ceil(n_vocab / 64), 1, 1). 256 threads = 8 teams of 32 lanes; team t computes rows
// 64 w + 8 r + t for r = 0..7 (the 8 teams read 8 neighbouring rows at a time); lane l reads
// vec4 words l, l + 32, ... of each row. Partial sums are reduced per team in workgroup memory.

// #include "lib/numerics.wgsl"

override K: u32 = 2560u;  // elements per row (n_embd)

struct Params {
    n_vocab: u32,
    h_offset: u32,     // f32 index of h[0]
    out_offset: u32,   // f32 index of logits[0]
    round_input: u32,  // 1: round h to f16 first
}

@group(0) @binding(0) var<storage, read> head: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read_write> logits: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> hs: array<f32, K>;
var<workgroup> red: array<vec2<f32>, 2048>;  // [team][row r][lane]

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let round_in = p.round_input != 0u;
    for (var i = lid; i < K; i += 256u) {
        let v = h[p.h_offset + i];
        hs[i] = select(v, round_f16(v), round_in);
    }
    workgroupBarrier();

    let team  = lid / 32u;
    let lane  = lid % 32u;
    let words = K / 8u;  // vec4<u32> per row
    var acc: array<vec2<f32>, 8>;
    for (var r = 0u; r < 8u; r++) {
        let row = wid.x * 64u + r * 8u + team;
        if (row >= p.n_vocab) { continue; }
        let base = row * words;
        var a = vec2<f32>(0.0, 0.0);
        for (var i = lane; i < words; i += 32u) {
            let w  = head[base + i];
            let e0 = unpack2x16float(w.x);
            let e1 = unpack2x16float(w.y);
            let e2 = unpack2x16float(w.z);
            let e3 = unpack2x16float(w.w);
            let k  = 8u * i;
            if (round_in) {  // f16 x f16: every product is exact in f32
                a = df_add_f(a, e0.x * hs[k]);
                a = df_add_f(a, e0.y * hs[k + 1u]);
                a = df_add_f(a, e1.x * hs[k + 2u]);
                a = df_add_f(a, e1.y * hs[k + 3u]);
                a = df_add_f(a, e2.x * hs[k + 4u]);
                a = df_add_f(a, e2.y * hs[k + 5u]);
                a = df_add_f(a, e3.x * hs[k + 6u]);
                a = df_add_f(a, e3.y * hs[k + 7u]);
            } else {
                a = df_fma(a, e0.x, hs[k]);
                a = df_fma(a, e0.y, hs[k + 1u]);
                a = df_fma(a, e1.x, hs[k + 2u]);
                a = df_fma(a, e1.y, hs[k + 3u]);
                a = df_fma(a, e2.x, hs[k + 4u]);
                a = df_fma(a, e2.y, hs[k + 5u]);
                a = df_fma(a, e3.x, hs[k + 6u]);
                a = df_fma(a, e3.y, hs[k + 7u]);
            }
        }
        acc[r] = a;
    }
    for (var r = 0u; r < 8u; r++) { red[(team * 8u + r) * 32u + lane] = acc[r]; }
    workgroupBarrier();
    for (var s = 16u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var r = 0u; r < 8u; r++) {
                let i = (team * 8u + r) * 32u + lane;
                red[i] = df_add(red[i], red[i + s]);
            }
        }
        workgroupBarrier();
    }
    if (lane < 8u) {
        let row = wid.x * 64u + lane * 8u + team;
        if (row < p.n_vocab) { logits[p.out_offset + row] = df_to_f32(red[(team * 8u + lane) * 32u]); }
    }
}
