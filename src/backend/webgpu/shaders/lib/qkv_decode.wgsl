// The body of the one-token qkv kernels (qkv_rope_decode.wgsl, and phase A of layer_decode.wgsl):
// workgroup g's WG / lanes slots of one head (lib/qkv_store.wgsl's slot order) dotted with the
// activations of width k staged by lib/act_stage.wgsl, the bitlinear epilogue with the weight's row
// scales at u32 `so` and output scales at `oso`, then RoPE and the stores of store_qkv_unit.
// Invocation u < rows / 4 finishes slots 4u .. 4u + 3. Every invocation must call it (barriers).
// The including kernel declares `override HD` = p.head_dim and three hooks for loads whose words the
// kernel keeps (or 0): kv_prefetch(lid, g) -> u32, the cache rows attention reads next, called after
// the weight loads; weight_prefetch_at(spot, lid, g) -> u32, a later kernel's weight, called at
// lib/weight_prefetch.wgsl's three spots (kernel_prefetch_at); and kv_prefetch_use(pf), called at
// the end with both.

var<workgroup> slot_dots: array<i32, WG>;

fn qkv_decode_rows(lid: u32, g: u32, lanes: u32, k: u32, so: u32, oso: u32) {
    let rows  = WG / lanes;
    let hd    = HD;          // (a constant: a division by p.head_dim would sit before the weight loads)
    let slot0 = g * rows;    // global slot of the workgroup's first row
    let head  = slot0 / hd;  // q heads, then k heads, then v heads
    let j0    = slot0 % hd;
    let lane  = lid % lanes;
    let row   = head * hd + slot_dim(j0 + lid / lanes);
    var pf = weight_prefetch_at(0u, lid, g);
    var xin: StageInput;
    if (X_FIRST) { xin = stage_load(lid, k); }
    let w     = prefetch_row(row, lane, lanes, k);
    if (!X_FIRST) { xin = stage_load(lid, k); }
    let j     = j0 + 4u * lid;  // the first slot this invocation finishes (lid < rows / 4)
    var sc: array<vec2<f32>, 4>;  // their scales and RoPE pairs, loaded with the weights
    var cs: vec4<f32>;
    if (lid < rows / 4u) {
        for (var e = 0u; e < 4u; e++) { sc[e] = row_scales_at(head * hd + slot_dim(j + e), so, oso); }
        cs = rope_of_unit(head, j, p.pos0);
    }
    // (The cache rows stay here whatever KPF_AT: attention waits for them.)
    pf ^= kv_prefetch(lid, g);
    pf ^= weight_prefetch_at(1u, lid, g);
    let as_   = stage_activations_from(lid, k, xin);
    pf ^= weight_prefetch_at(2u, lid, g);
    slot_dots[lid] = reduce_rows(lid, row_dot(w, lane, lanes, k), lanes);
    workgroupBarrier();
    if (lid < rows / 4u) {
        var v: array<f32, 4>;
        for (var e = 0u; e < 4u; e++) { v[e] = row_product_scaled(slot_dots[4u * lid + e], as_, sc[e]); }
        store_qkv_unit_rope(head, j, 0u, p.pos0, v, cs);
    }
    kv_prefetch_use(pf);
}
