// Workgroup reduction of (value, index) candidates to the largest value, ties to the lowest index;
// index 0xffffffff marks "no candidate". Shared by argmax_partial.wgsl and argmax_final.wgsl, which
// declare `override WG: u32` (a power of two) and call best_index() from every invocation.

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

// Whether candidate (v, i) beats (bv, bi).
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return i != 0xffffffffu && (bi == 0xffffffffu || v > bv || (v == bv && i < bi));
}

// Reduces every invocation's (v, i) and returns the workgroup's best (value bits, index).
fn best_index(lid: u32, v: f32, i: u32) -> vec2<u32> {
    best_v[lid] = v;
    best_i[lid] = i;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s && beats(best_v[lid + s], best_i[lid + s], best_v[lid], best_i[lid])) {
            best_v[lid] = best_v[lid + s];
            best_i[lid] = best_i[lid + s];
        }
        workgroupBarrier();
    }
    return vec2<u32>(bitcast<u32>(best_v[0]), best_i[0]);
}
