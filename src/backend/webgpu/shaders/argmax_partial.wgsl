// argmax_partial: first stage of a two-stage argmax over many workgroups. Workgroup c scans its
// chunk of CHUNK logits of token t and writes the chunk's (max value, lowest index of it).
//
//   logits: [n_vocab, T] f32   partial: [T][n_chunks] (f32 value bits, u32 index) as vec2<u32>
// Bindings: 0 logits (read), 1 partial (read_write), 2 params (uniform)
// Dispatch: (n_chunks, T, 1), n_chunks = ceil(n_vocab / CHUNK); argmax_final.wgsl finishes.

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

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t     = wid.y;
    let base  = p.logits_offset + t * p.logits_stride;
    let begin = wid.x * CHUNK;
    let end   = min(begin + CHUNK, p.n_vocab);
    var bv    = bitcast<f32>(0xff7fffffu);
    var bi    = 0xffffffffu;
    for (var v = begin + lid; v < end; v += WG) {  // increasing v: the first maximum wins
        let x = logits[base + v];
        if (bi == 0xffffffffu || x > bv) {
            bv = x;
            bi = v;
        }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let ov = best_v[lid + s];
            let oi = best_i[lid + s];
            if (oi != 0xffffffffu && (best_i[lid] == 0xffffffffu || ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid]))) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) { partial[t * p.n_chunks + wid.x] = vec2<u32>(bitcast<u32>(best_v[0]), best_i[0]); }
}
