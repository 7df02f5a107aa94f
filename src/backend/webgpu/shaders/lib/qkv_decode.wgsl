// The body of the one-token qkv kernel (qkv_rope_decode.wgsl):
// workgroup g's WG / lanes slots of one head (lib/qkv_store.wgsl's slot order) dotted with the
// activations of width k staged by lib/act_stage.wgsl, the bitlinear epilogue with the weight's row
// scales at u32 `so` and output scales at `oso`, then RoPE and the stores of store_qkv_unit.
// Invocation u < rows / 4 finishes slots 4u .. 4u + 3. Every invocation must call it (barriers).
// The including kernel declares `override HD` = p.head_dim, includes lib/weight_prefetch.wgsl and
// declares two hooks: kv_prefetch(lid, g) -> u32, loads of the cache rows attention reads next,
// called after the weight loads; and kv_prefetch_use(pf), called at the end with those words and
// kernel_prefetch's.

var<workgroup> slot_dots: array<i32, WG>;

fn qkv_decode_rows(lid: u32, g: u32, lanes: u32, k: u32, so: u32, oso: u32) {
    let rows  = WG / lanes;
    let hd    = HD;          // (a constant: a division by p.head_dim would sit before the weight loads)
    let slot0 = g * rows;    // global slot of the workgroup's first row
    let head  = slot0 / hd;  // q heads, then k heads, then v heads
    let j0    = slot0 % hd;
    let lane  = lid % lanes;
    let row   = head * hd + slot_dim(j0 + lid / lanes);
    var pf = 0u;  // (kv_prefetch, lib/weight_prefetch.wgsl)
    var xin: StageInput;
    xin = stage_load(lid, k);  // (x and the norm weights first: the norm is the longer chain)
    let w     = prefetch_row(row, lane, lanes, k);
    let j     = j0 + 4u * lid;  // the first slot this invocation finishes (lid < rows / 4)
    var sc: array<vec2<f32>, 4>;  // their scales and RoPE pairs, loaded with the weights
    var cs: vec4<f32>;
    if (lid < rows / 4u) {
        for (var e = 0u; e < 4u; e++) { sc[e] = row_scales_at(head * hd + slot_dim(j + e), so, oso); }
        cs = rope_of_unit(head, j, p.pos0);
    }
    // (The cache rows' prefetch goes here: attention waits for them.)
    pf ^= kv_prefetch(lid, g);
    let as_   = stage_activations_from(lid, k, xin);
    pf ^= kernel_prefetch(lid, g);  // (once x and the weights have arrived)
    slot_dots[lid] = reduce_rows(lid, row_dot(w, lane, lanes, k), lanes);
    workgroupBarrier();
    if (lid < rows / 4u) {
        var v: array<f32, 4>;
        for (var e = 0u; e < 4u; e++) { v[e] = row_product_scaled(slot_dots[4u * lid + e], as_, sc[e]); }
        store_qkv_unit_rope(head, j, 0u, p.pos0, v, cs);
    }
    kv_prefetch_use(pf);
}
