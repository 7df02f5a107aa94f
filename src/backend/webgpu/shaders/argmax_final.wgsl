// argmax_final: second stage of the two-stage argmax (argmax_partial.wgsl): reduces token t's
// n_chunks (value, index) pairs, ties to the lower index, and writes ids[t] (what the next step's
// embed reads when greedy decoding stays on the device).
//
//   partial: [T][n_chunks] vec2<u32> from p.chunks_offset   ids: [T] i32
// Bindings: 0 partial (read), 1 ids (read_write), 2 params (uniform)
// Dispatch: (T, 1, 1).

// #include "lib/best_index.wgsl"

override WG: u32 = 256u;  // a power of two

struct Params {
    n_chunks: u32,
    ids_offset: u32,     // i32 index of ids[0]
    chunks_offset: u32,  // vec2 index of partial[0] (0 where the caller's struct stops before it)
}

@group(0) @binding(0) var<storage, read> partial: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read_write> ids: array<i32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.x;
    var bv = 0.0;
    var bi = 0xffffffffu;
    for (var c = lid; c < p.n_chunks; c += WG) {
        let e = partial[p.chunks_offset + t * p.n_chunks + c];
        if (beats(bitcast<f32>(e.x), e.y, bv, bi)) {
            bv = bitcast<f32>(e.x);
            bi = e.y;
        }
    }
    let best = best_index(lid, bv, bi);
    if (lid == 0u) { ids[p.ids_offset + t] = i32(best.y); }
}
