// argmax: ids[t] = argmax_v logits[v, t], the lowest index among equal maxima (as the CPU).
//
//   logits: [n_vocab, T] f32   ids: [T] i32
// Bindings: 0 logits (read), 1 ids (read_write), 2 params (uniform)
// Dispatch: (T, 1, 1). One workgroup per token; thread i scans v = i, i + WG, ..., then a tree
// reduction keeps (value, index) with ties going to the lower index.

override WG: u32 = 256u;  // a power of two

struct Params {
    n_vocab: u32,
    logits_offset: u32,  // f32 index of logits[0, 0]
    logits_stride: u32,
    ids_offset: u32,     // i32 index of ids[0]
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> ids: array<i32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t    = wid.x;
    let base = p.logits_offset + t * p.logits_stride;
    var bv   = bitcast<f32>(0xff7fffffu);
    var bi   = 0xffffffffu;
    for (var v = lid; v < p.n_vocab; v += WG) {
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
            let mine_empty = best_i[lid] == 0xffffffffu;
            if (oi != 0xffffffffu && (mine_empty || ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid]))) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) { ids[p.ids_offset + t] = i32(best_i[0]); }
}
