// argmax_partial: first stage of the two-stage argmax. Workgroup c scans chunk c (CHUNK logits) of
// token t and writes the chunk's (max value, lowest index of it); argmax_final.wgsl finishes.
//
//   logits: [n_vocab, T] f32   partial: [T][n_chunks] (f32 value bits, u32 index) as vec2<u32>
// Bindings: 0 logits (read), 1 partial (read_write), 2 params (uniform)
// Dispatch: (n_chunks, T, 1), n_chunks = ceil(n_vocab / CHUNK).

// #include "lib/best_index.wgsl"

override WG: u32 = 256u;      // a power of two
override CHUNK: u32 = 4096u;  // logits per workgroup

struct Params {
    n_vocab: u32,
    logits_offset: u32,  // f32 index of logits[0, 0]
    logits_stride: u32,
    n_chunks: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t     = wid.y;
    let base  = p.logits_offset + t * p.logits_stride;
    let begin = wid.x * CHUNK;
    let end   = min(begin + CHUNK, p.n_vocab);
    var bv    = 0.0;
    var bi    = 0xffffffffu;
    for (var v = begin + lid; v < end; v += WG) {  // increasing v: the first maximum wins
        let x = logits[base + v];
        if (beats(x, v, bv, bi)) {
            bv = x;
            bi = v;
        }
    }
    let best = best_index(lid, bv, bi);
    if (lid == 0u) { partial[t * p.n_chunks + wid.x] = best; }
}
