// lm_head_q: logits[v, t] = head[v] · h[t] for a head kept in its file's blocks (Q8_0, Q4_0, Q6_K;
// GpuMatrix's layout) instead of lm_head.wgsl's f32 copy: 4 to 5 times fewer bytes per token. As the
// CPU's lm_head: each weight dequantized to f32 exactly as dequantize_row does (Q8_0 q * d, Q4_0
// (n - 8) * d, Q6_K (d * sc) * (q - 32)), h rounded to f16 first with ROUND_IN, the products summed
// in double-float like lm_head.wgsl (the CPU sums in double), rounded to f32 once. Also the first
// stage of the argmax (argmax_partial.wgsl's, over the workgroup's rows; ties to the lower index) into
// partial[t][workgroup], so that argmax_final.wgsl can follow directly.
// The chunks' loads and sums: lib/q_head_chunk.wgsl.
//
//   w, ws: GpuMatrix words (as vec4<u32>) and block scales (matmul.wgsl's table)   h: [K, T] f32
//   logits: [n_vocab, T] f32   partial: [T][ceil(n_vocab / (WG / LANES))] (f32 value bits, u32 index)
// Bindings: 0 w, 1 ws, 2 h (read); 3 logits, 4 partial (read_write); 5 params (uniform)
// Dispatch: (ceil(n_vocab / (WG / LANES)), T, 1). The workgroup stages its token's h (STAGE), then a
// team of LANES lanes per row, lane l on the row's 32-value chunks l, l + LANES, ... (each chunk's
// words loaded as vec4s at once, the next chunk's while the current one is summed); the lanes' sums
// added by a tree in workgroup memory.

// #include "lib/numerics.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/q_head_chunk.wgsl"

override WG: u32 = 256u;
override ROUND_IN: bool = false;  // h rounded to f16 first
override LANES: u32 = 8u;   // a power of two dividing WG
override CPR: u32 = 64u;    // 32-value chunks per row (K / 32)
override WTYPE: u32 = 6u;   // 3 q8_0, 4 q4_0, 6 q6_k (matmul.wgsl's numbering)
override STAGE: bool = true;  // h (rounded as asked) staged in workgroup memory (the host: where K fits)

struct Params {
    n_vocab: u32,
    h_offset: u32,     // f32 index of h[0, 0]
    h_stride: u32,
    out_offset: u32,   // f32 index of logits[0, 0]
    out_stride: u32,
    rn_zero: u32,      // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> ws: array<f32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> red: array<vec2<f32>, WG>;
var<workgroup> hs: array<f32, select(1u, CPR * 32u, STAGE)>;

fn h_global(t: u32, i: u32) -> f32 {
    let v = h[p.h_offset + t * p.h_stride + i];
    return select(v, round_f16(v), ROUND_IN);
}

fn h_val(t: u32, i: u32) -> f32 {
    if (STAGE) { return hs[i]; }
    return h_global(t, i);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let team = lid / LANES;
    let lane = lid % LANES;
    let row  = wid.x * (WG / LANES) + team;
    let t    = wid.y;
    let live = row < p.n_vocab;
    // The lane's first chunk is loaded before h is staged, and each next chunk while the current one
    // is summed: the loads of a lane overlap its arithmetic (its sums are long chains).
    var next: ChunkWords;
    if (live && lane < CPR) { next = chunk_words(row, lane); }
    if (STAGE) {
        for (var i = lid; i < CPR * 32u; i += WG) { hs[i] = h_global(t, i); }
        workgroupBarrier();
    }
    var acc = vec2<f32>(0.0, 0.0);
    if (live) {
        for (var c = lane; c < CPR; c += LANES) {
            let cw = next;
            if (c + LANES < CPR) { next = chunk_words(row, c + LANES); }
            acc = chunk_dot(acc, cw, c, t);
        }
    }
    red[lid] = acc;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if (lane < s) { red[lid] = df_add(red[lid], red[lid + s]); }
        workgroupBarrier();
    }
    var bv = 0.0;
    var bi = 0xffffffffu;
    if (lane == 0u && row < p.n_vocab) {
        bv = df_to_f32(red[lid]);
        bi = row;
        logits[p.out_offset + t * p.out_stride + row] = bv;
    }
    let best = best_index(lid, bv, bi);
    if (lid == 0u) { partial[t * ((p.n_vocab + WG / LANES - 1u) / (WG / LANES)) + wid.x] = best; }
}
