requires packed_4x8_integer_dot_product;

// qkv_rope_decode: qkv_rope.wgsl for ONE token (decode): [q; k; v] = Wqkv a, RoPE on q and k, q to
// q_out, k and v appended to the cache at position pos0; the activations given or computed by the
// fused norm prologue (lib/act_stage.wgsl) as in bitlinear_decode.wgsl. One scale group per row.
//
//   wq: codes [N][K/64] vec4<u32> | scales [N] | output scales [N], N = (n_head + 2 n_head_kv) hd
//   rope: [pos][n_rot/2] (cos, sin) f32   q_out: [n_head hd] f32   k_cache, v_cache: as qkv_rope.wgsl
// Bindings: 0 wq, 1 src, 2 src_scale, 3 rope (read); 4 q_out, 5 k_cache, 6 v_cache, 7 norm_stats
//           (x's block sums of squares with STATS_IN, lib/act_stage.wgsl) (read_write); 8 pfw (read: a
//           weight to pull into L2, lib/weight_prefetch.wgsl); 9 params (uniform)
// Dispatch: (N / ROWS, 1, 1), ROWS = WG / LANES slots of one head (a multiple of 4 dividing
// head_dim); slots as in lib/qkv_store.wgsl; thread u < ROWS / 4 finishes slots 4u .. 4u + 3.

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/act_stage.wgsl"
// #include "lib/ternary_decode.wgsl"
// #include "lib/decode_io.wgsl"
// #include "lib/qkv_store.wgsl"
// #include "lib/qkv_decode.wgsl"
// #include "lib/weight_prefetch.wgsl"

override WG: u32 = 256u;
override LANES: u32 = 8u;
override K: u32 = 2560u;
override NORM: bool = true;
override K_F16: bool = true;
override V_F16: bool = true;
override HD: u32 = 128u;  // head_dim (= p.head_dim)

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
@group(0) @binding(9) var<uniform> p: Params;

fn store_q(tok: u32, i: u32, v: f32) { q_out[p.q_offset + tok * p.q_stride + i] = v; }

// The cache rows [0, pos0) that attention reads next are loaded, one word per
// KV_PF_STRIDE (64 bytes), so that they are in L2 when attention starts (between two visits of a
// layer the weights stream through L2 and evict them); their words are "used" at the end by a store
// that never happens (p.rn_zero is 0), so that the compiler keeps the loads but nothing waits for
// them before the kernel's end. Each invocation loads at most one word of K and one of V (rows up to
// WG * groups * KV_PF_STRIDE / row words). H100 tg128 +0.9%.
const KV_PF_STRIDE: u32 = 16u;
override KV_PF: bool = true;  // false (one query over a long context, WebGpuBackend::try_decode_qkv): none

fn kv_prefetch(lid: u32, g: u32) -> u32 {
    var acc = 0u;
    if (!KV_PF) { return acc; }
    let kw  = select(p.n_embd_kv, p.n_embd_kv / 2u, K_F16);  // u32 words per cache row
    let vw  = select(p.n_embd_kv, p.n_embd_kv / 2u, V_F16);
    let i   = (g * WG + lid) * KV_PF_STRIDE;
    if (i < p.pos0 * kw) { acc ^= k_cache[select(p.k_offset, p.k_offset / 2u, K_F16) + i]; }
    if (i < p.pos0 * vw) { acc ^= v_cache[select(p.v_offset, p.v_offset / 2u, V_F16) + i]; }
    return acc;
}

fn kv_prefetch_use(pf: u32) {
    if ((pf & p.rn_zero) != 0u) { norm_stats[0] = bitcast<f32>(pf); }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    qkv_decode_rows(lid, wid.x, LANES, K, p.scales_offset, p.oscales_offset);
}
