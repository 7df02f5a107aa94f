// The pieces the one-token qkv kernels share (qkv_rope_decode.wgsl, and qkv_embed_decode.wgsl, which
// also makes x): their overrides, the hooks that lib/qkv_store.wgsl and lib/qkv_decode.wgsl call
// (q's store, the cache rows pulled ahead for attention, a later kernel's weight pulled into L2).
// Their uniform's struct and bindings 0-8 (qkv_rope_decode.wgsl's header says what they hold); the
// kernel binds the uniform p after its other bindings.

struct Params {
    eps: f32,
    src_offset: u32,
    scale_offset: u32,
    scales_offset: u32,   // u32 index of the row scales in wq
    oscales_offset: u32,  // u32 index of the output scales in wq
    head_dim: u32,
    n_rot: u32,
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,            // position of the token
    q_offset: u32,
    q_stride: u32,
    k_offset: u32,
    v_offset: u32,
    n_embd_kv: u32,
    stats_in: u32,        // as bitlinear_decode.wgsl (STATS_IN)
    stats_out: u32,       // (unused)
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
    ids_offset: u32,      // qkv_embed_decode.wgsl: i32 index of the token's slot in ids
    x_offset: u32,        // qkv_embed_decode.wgsl: vec4 index of x[0] in x_out
}

@group(0) @binding(0) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;  // (lib/decode_io.wgsl's words)
@group(0) @binding(2) var<storage, read> src_scale: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> norm_stats: array<f32>;
@group(0) @binding(8) var<storage, read> pfw: array<u32>;  // lib/weight_prefetch.wgsl (any buffer when off)

override WG: u32 = 256u;
override LANES: u32 = 8u;
override K: u32 = 2560u;
override NORM: bool = true;
override K_F16: bool = true;
override V_F16: bool = true;
override HD: u32 = 128u;  // head_dim (= p.head_dim)

fn store_q(tok: u32, i: u32, v: f32) { q_out[p.q_offset + tok * p.q_stride + i] = v; }
fn kv_word_stored(is_k: bool, w: u32, word: u32) {}

// KV_PREFETCH: the cache rows [0, pos0) that attention reads next are loaded, one word per
// KV_PF_STRIDE (64 bytes), so that they are in L2 when attention starts (between two visits of a
// layer the weights stream through L2 and evict them); their words are "used" at the end by a store
// that never happens (p.rn_zero is 0), so that the compiler keeps the loads but nothing waits for
// them before the kernel's end. Each invocation loads at most one word of K and one of V (rows up to
// WG * groups * KV_PF_STRIDE / row words). H100 tg128 +0.9% (src/backend/webgpu/README.md).
override KV_PREFETCH: bool = true;
override KV_PF_STRIDE: u32 = 16u;

fn kv_prefetch(lid: u32, g: u32) -> u32 {
    var acc = 0u;
    if (!KV_PREFETCH) { return acc; }
    let kw  = select(p.n_embd_kv, p.n_embd_kv / 2u, K_F16);  // u32 words per cache row
    let vw  = select(p.n_embd_kv, p.n_embd_kv / 2u, V_F16);
    let i   = (g * WG + lid) * KV_PF_STRIDE;
    if (i < p.pos0 * kw) { acc ^= k_cache[select(p.k_offset, p.k_offset / 2u, K_F16) + i]; }
    if (i < p.pos0 * vw) { acc ^= v_cache[select(p.v_offset, p.v_offset / 2u, V_F16) + i]; }
    return acc;
}

fn weight_prefetch_at(spot: u32, lid: u32, g: u32) -> u32 { return kernel_prefetch_at(spot, lid, g); }

fn kv_prefetch_use(pf: u32) {
    if ((KV_PREFETCH || KPF_WORDS != 0u) && (pf & p.rn_zero) != 0u) { norm_stats[0] = bitcast<f32>(pf); }
}
