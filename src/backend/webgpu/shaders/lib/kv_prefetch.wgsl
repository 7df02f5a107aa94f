// What the decode qkv kernels (qkv_rope_decode.wgsl, qkv_attention_decode.wgsl) load for the kernels
// after them, from lib/qkv_decode.wgsl's kv_prefetch hook (after their weight loads), xor-ed into one
// word that the kernel keeps until its end (a store that never happens, p.rn_zero being 0), so that
// the compiler keeps the loads and nothing waits for them before then:
// - KV_PREFETCH: the cache rows [0, pos0) that attention reads, one word per KV_PF_STRIDE (64
//   bytes), so that they are in L2 when attention starts (between two visits of a layer the weights
//   stream through L2 and evict them). Each invocation loads at most one word of K and one of V
//   (rows up to WG * groups * KV_PF_STRIDE / row words). H100 tg128 +0.9%
//   (src/backend/webgpu/README.md);
// - lib/weight_prefetch.wgsl's words of a later kernel's weight.
// The including kernel declares k_cache, v_cache, K_F16, V_F16, WG and a uniform p with n_embd_kv,
// pos0, k_offset, v_offset.
override KV_PREFETCH: bool = true;
override KV_PF_STRIDE: u32 = 16u;

fn kv_cache_prefetch(lid: u32, g: u32) -> u32 {
    if (!KV_PREFETCH) { return kernel_prefetch(lid, g); }
    let kw    = select(p.n_embd_kv, p.n_embd_kv / 2u, K_F16);  // u32 words per cache row
    let vw    = select(p.n_embd_kv, p.n_embd_kv / 2u, V_F16);
    let i     = (g * WG + lid) * KV_PF_STRIDE;
    var acc   = kernel_prefetch(lid, g);
    if (i < p.pos0 * kw) { acc ^= k_cache[select(p.k_offset, p.k_offset / 2u, K_F16) + i]; }
    if (i < p.pos0 * vw) { acc ^= v_cache[select(p.v_offset, p.v_offset / 2u, V_F16) + i]; }
    return acc;
}

