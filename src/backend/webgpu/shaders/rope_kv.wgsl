// rope_kv: the epilogue of qkv_rope.wgsl on its own, for prefill, where the [q; k; v] products come
// from ternary_gemm.wgsl (into a scratch buffer) instead of being computed here: NeoX RoPE on the q
// and k heads at positions pos0 + t, q to `q_out`, k and v into the KV cache at those positions
// (f16, rounded to nearest even like core/fp16.h, or f32). Same rope table, same expressions, same
// f16 packing as qkv_rope.wgsl, so the results are bit-identical to it (and to the CPU).
// With PAGED (a batch of sequences in a paged cache, backend.h: KvBatch) column t's position and
// cache row come from the column table instead: cols[4 t] and cols[4 t + 2].
//
//   x: [N, T] f32, N = (n_head + 2 n_head_kv) hd   rope: [pos][n_rot/2] (cos, sin) f32
//   q_out: [n_head hd, T] f32   k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32, as u32 words
//   cols: [T][4] i32 (PAGED; any buffer otherwise)
// Bindings: 0 x, 1 rope (read); 2 q_out, 3 k_cache, 4 v_cache (read_write); 5 cols (read); 6 params
// Dispatch: (ceil(N / 4 / WG), T, 1). One thread per (unit of 4 slots of a head, token); slots and
// the RoPE + store arithmetic: lib/qkv_store.wgsl.

// #include "lib/numerics.wgsl"
// #include "lib/qkv_store.wgsl"

override WG: u32 = 64u;
override K_F16: bool = true;  // cache element types
override V_F16: bool = true;
override PAGED: bool = false;

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
    cols_offset: u32, // PAGED: i32 index of cols[0]
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(5) var<storage, read> cols: array<i32>;
@group(0) @binding(6) var<uniform> p: Params;

fn store_q(tok: u32, i: u32, v: f32) { q_out[p.q_offset + tok * p.q_stride + i] = v; }

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
    if (PAGED) {
        let c = p.cols_offset + 4u * t;
        store_qkv_unit(head, j, t, u32(cols[c]), u32(cols[c + 2u]), v);
    } else {
        store_qkv_unit(head, j, t, p.pos0 + t, p.pos0 + t, v);
    }
}
