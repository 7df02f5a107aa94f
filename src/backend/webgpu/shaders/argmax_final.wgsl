// argmax_final: second stage of the two-stage argmax (argmax_partial.wgsl): reduces token t's
// n_chunks (value, index) pairs, ties to the lower index, and writes ids[t].
//
//   partial: [T][n_chunks] vec2<u32>   ids: [T] i32
// Bindings: 0 partial (read), 1 ids (read_write), 2 params (uniform)
// Dispatch: (T, 1, 1).

override WG: u32 = 256u;  // a power of two

struct Params {
    n_chunks: u32,
    ids_offset: u32,  // i32 index of ids[0]
}

@group(0) @binding(0) var<storage, read> partial: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read_write> ids: array<i32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t  = wid.x;
    var bv = bitcast<f32>(0xff7fffffu);
    var bi = 0xffffffffu;
    for (var c = lid; c < p.n_chunks; c += WG) {
        let e = partial[t * p.n_chunks + c];
        let v = bitcast<f32>(e.x);
        if (e.y != 0xffffffffu && (bi == 0xffffffffu || v > bv || (v == bv && e.y < bi))) {
            bv = v;
            bi = e.y;
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
    if (lid == 0u) { ids[p.ids_offset + t] = i32(best_i[0]); }
}
