// rope_kv: the epilogue of qkv_rope.wgsl on its own, for prefill, where the [q; k; v] products come
// from ternary_gemm.wgsl (into a scratch buffer) instead of being computed here: NeoX RoPE on the q
// and k heads at positions pos0 + t, q to `q_out`, k and v into the KV cache at those positions
// (f16, rounded to nearest even like core/fp16.h, or f32). Same rope table, same expressions, same
// f16 packing as qkv_rope.wgsl, so the results are bit-identical to it (and to the CPU).
//
//   x: [N, T] f32, N = (n_head + 2 n_head_kv) hd   rope: [pos][n_rot/2] (cos, sin) f32
//   q_out: [n_head hd, T] f32   k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32, as u32 words
// Bindings: 0 x, 1 rope (read); 2 q_out, 3 k_cache, 4 v_cache (read_write); 5 params (uniform)
// Dispatch: (ceil(N / 4 / WG), T, 1). One thread per (unit of 4 slots of a head, token); slots as in
// qkv_rope.wgsl: slot 4u + e (4u < n_rot) is dimension 2u, 2u+1, 2u+half, 2u+1+half for e = 0..3
// (half = n_rot / 2), slot j >= n_rot is dimension j. So a thread holds both members of two RoPE
// pairs and two whole f16 words of the cache.

// #include "lib/numerics.wgsl"

override WG: u32 = 64u;
override K_F16: bool = true;  // cache element types
override V_F16: bool = true;

struct Params {
    n_units: u32,     // N / 4
    head_dim: u32,
    n_rot: u32,       // rotated dimensions per head, a multiple of 4
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,        // position of token 0
    x_offset: u32,    // f32 index of x[0, 0]
    x_stride: u32,    // f32 elements between tokens of x
    q_offset: u32,    // f32 index of q_out[0, 0]
    q_stride: u32,    // f32 elements between tokens of q_out
    k_offset: u32,    // element index of k_cache[0, 0] (even for f16)
    v_offset: u32,    // element index of v_cache[0, 0]
    n_embd_kv: u32,   // cache elements per position
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

// Head-relative dimension of slot j.
fn slot_dim(j: u32) -> u32 {
    if (j >= p.n_rot) { return j; }
    let e = j & 3u;
    return 2u * (j >> 2u) + (e & 1u) + (e >> 1u) * (p.n_rot / 2u);
}

// Stores two consecutive cache elements (e even) of one position.
fn store_kv(is_k: bool, e: u32, a: f32, b: f32) {
    if (is_k) {
        if (K_F16) {
            k_cache[(p.k_offset + e) / 2u] = pack_f16x2(a, b);
        } else {
            k_cache[p.k_offset + e]      = bitcast<u32>(a);
            k_cache[p.k_offset + e + 1u] = bitcast<u32>(b);
        }
    } else {
        if (V_F16) {
            v_cache[(p.v_offset + e) / 2u] = pack_f16x2(a, b);
        } else {
            v_cache[p.v_offset + e]      = bitcast<u32>(a);
            v_cache[p.v_offset + e + 1u] = bitcast<u32>(b);
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let unit = gid.x;
    let t    = gid.y;
    if (unit >= p.n_units) { return; }
    let hd   = p.head_dim;
    let head = (4u * unit) / hd;     // q heads, then k heads, then v heads
    let j    = (4u * unit) % hd;     // first head-relative slot of the unit
    let xo   = p.x_offset + t * p.x_stride + head * hd;
    var v: array<f32, 4>;
    for (var e = 0u; e < 4u; e++) { v[e] = x[xo + slot_dim(j + e)]; }
    let pos   = p.pos0 + t;
    let is_qk = head < p.n_head + p.n_head_kv;
    let half  = p.n_rot / 2u;
    if (is_qk && j < p.n_rot) {
        // Pairs (2u', 2u'+half) and (2u'+1, 2u'+1+half): x0 * c - x1 * s, x0 * s + x1 * c.
        let i  = 2u * (j >> 2u);
        let c0 = rope[pos * half + i];
        let c1 = rope[pos * half + i + 1u];
        let a0 = v[0] * c0.x - v[2] * c0.y;
        let b0 = v[0] * c0.y + v[2] * c0.x;
        let a1 = v[1] * c1.x - v[3] * c1.y;
        let b1 = v[1] * c1.y + v[3] * c1.x;
        v[0] = a0; v[2] = b0; v[1] = a1; v[3] = b1;
    }
    // Dimensions held: (d0, d0 + 1) and (d2, d2 + 1).
    let d0 = slot_dim(j);
    let d2 = slot_dim(j + 2u);
    if (head < p.n_head) {
        let qo = p.q_offset + t * p.q_stride + head * hd;
        q_out[qo + d0]      = v[0];
        q_out[qo + d0 + 1u] = v[1];
        q_out[qo + d2]      = v[2];
        q_out[qo + d2 + 1u] = v[3];
    } else {
        let is_k = head < p.n_head + p.n_head_kv;
        let kvh  = select(head - p.n_head - p.n_head_kv, head - p.n_head, is_k);
        let e0   = pos * p.n_embd_kv + kvh * hd;
        store_kv(is_k, e0 + d0, v[0], v[1]);
        store_kv(is_k, e0 + d2, v[2], v[3]);
    }
}
