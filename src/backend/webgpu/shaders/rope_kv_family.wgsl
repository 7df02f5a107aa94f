// rope_kv_family: Backend::rope_kv_append for the llama / qwen3 / phi3 families, as the CPU's, bit
// for bit: from projected [q; k; v] columns, Qwen3's per-head RMS norm of q and k (cpu::rms_norm_row:
// squares in the block-halving order, 1 / sqrt(sum / hd + eps), (x * w) * that), RoPE on q and k
// ("norm" pairs (2i, 2i+1) or NeoX pairs (i, i + n_rot/2)) with the host's (cos, sin) table, which
// holds ggml's angle recurrence with rope_freqs divisors and linear scaling (cpu::rope_head), q to
// q_out, k and v into the KV cache at positions pos0 + t (f16 rounded to nearest even, or f32); with
// PAGED (rope_kv_append_paged) column t's position and cache row from the column table of a batch
// over a paged cache (backend.h: KvBatch::columns).
//
//   qkv: [(n_head + 2 n_head_kv) hd, T] f32   rope: [pos][n_rot/2] (cos, sin)   q_norm, k_norm: [hd]
//   q_out: [n_head hd, T] f32   k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32, as u32 words
//   cols: [T][4] i32 (PAGED: position, sequence, cache row, 0; any buffer otherwise)
// Bindings: 0 qkv, 1 rope, 2 q_norm, 3 k_norm, 4 cols (read); 5 q_out, 6 k_cache, 7 v_cache
// (read_write); 8 params (uniform)
// Dispatch: (n_head + 2 n_head_kv, T, 1). A workgroup per (head, token), an invocation per pair of
// dimensions (WG >= head_dim / 2); each invocation adds the head's squares itself (QK-norm).

// #include "lib/numerics.wgsl"

override WG: u32 = 64u;  // >= head_dim / 2
override K_F16: bool = true;
override V_F16: bool = true;
override Q_NORM: bool = false;
override K_NORM: bool = false;
override NORM_MODE: bool = false;  // pairs (2i, 2i+1); else NeoX
override PAGED: bool = false;
const HD_MAX: u32 = 256u;

struct Params {
    head_dim: u32,
    n_rot: u32,
    n_head: u32,
    n_head_kv: u32,
    pos0: u32,
    x_offset: u32,   // f32 index of qkv[0, 0]
    x_stride: u32,   // f32 elements between tokens of qkv
    q_offset: u32,
    q_stride: u32,
    k_offset: u32,   // element index of k_cache[0, 0] (even for f16)
    v_offset: u32,
    n_embd_kv: u32,  // cache elements per position
    eps: f32,
    cols_offset: u32,  // i32 index of cols[0] (PAGED)
    rn_zero: u32,    // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> q_norm: array<f32>;
@group(0) @binding(3) var<storage, read> k_norm: array<f32>;
@group(0) @binding(4) var<storage, read> cols: array<i32>;
@group(0) @binding(5) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(8) var<uniform> p: Params;

// Column t's position and the cache row its k and v go to.
fn column_place(t: u32) -> vec2<u32> {
    if (PAGED) { return vec2<u32>(u32(cols[p.cols_offset + 4u * t]), u32(cols[p.cols_offset + 4u * t + 2u])); }
    return vec2<u32>(p.pos0 + t, p.pos0 + t);
}

// cpu::sum_squares of the head at xo: each block of 32 squares in the halving order, then the block
// sums (zero-padded to a power of two) in the halving order.
fn head_sum_squares(xo: u32) -> f32 {
    let hd = p.head_dim;
    let nb = (hd + 31u) / 32u;
    var bs: array<f32, 8>;
    for (var b = 0u; b < 8u; b++) { bs[b] = 0.0; }
    for (var b = 0u; b < nb; b++) {
        var t: array<f32, 32>;
        for (var e = 0u; e < 32u; e++) {
            let i = b * 32u + e;
            var v = 0.0;
            if (i < hd) { v = qkv[xo + i]; }
            t[e] = mul_rn(v, v);
        }
        for (var h = 16u; h >= 1u; h /= 2u) {
            for (var i = 0u; i < h; i++) { t[i] = t[i] + t[i + h]; }
        }
        bs[b] = t[0];
    }
    var pw = 1u;
    while (pw < nb) { pw *= 2u; }
    for (var h = pw / 2u; h >= 1u; h /= 2u) {
        for (var i = 0u; i < h; i++) { bs[i] = bs[i] + bs[i + h]; }
    }
    return bs[0];
}

// The head's values after the norm and the rotation, for the stores of dimension pairs (2d, 2d + 1).
var<workgroup> rot: array<f32, HD_MAX>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let head = wid.x;
    let t    = wid.y;
    let hd   = p.head_dim;
    let xo    = p.x_offset + t * p.x_stride + head * hd;
    let is_q  = head < p.n_head;
    let is_v  = head >= p.n_head + p.n_head_kv;
    let normed = (is_q && Q_NORM) || (!is_q && !is_v && K_NORM);
    var inv = 1.0;
    if (normed) { inv = inv_root_rn(div_rn(head_sum_squares(xo), f32(hd)) + p.eps); }
    // Invocation j: a rotation pair (i0, i1) for j < n_rot / 2, else two dimensions past n_rot.
    let half = p.n_rot / 2u;
    let j    = lid;
    if (j < hd / 2u) {
        var i0 = 2u * j;
        var i1 = 2u * j + 1u;
        if (!NORM_MODE) {
            i0 = select(p.n_rot + 2u * (j - half), j, j < half);
            i1 = select(i0 + 1u, j + half, j < half);
        }
        var x0 = qkv[xo + i0];
        var x1 = qkv[xo + i1];
        if (normed) {
            x0 = mul_rn(x0, select(k_norm[i0], q_norm[i0], is_q)) * inv;
            x1 = mul_rn(x1, select(k_norm[i1], q_norm[i1], is_q)) * inv;
        }
        if (!is_v && j < half) {
            let cs = rope[column_place(t).x * half + j];
            let turned = rope_rotate(x0, x1, cs);
            x0 = turned.x;
            x1 = turned.y;
        }
        rot[i0] = x0;
        rot[i1] = x1;
    }
    workgroupBarrier();
    if (j >= hd / 2u) { return; }
    let d = 2u * j;
    if (is_q) {
        let o = p.q_offset + t * p.q_stride + head * hd;
        q_out[o + d]      = rot[d];
        q_out[o + d + 1u] = rot[d + 1u];
        return;
    }
    let pos = column_place(t).y;  // the cache row
    let f16 = select(K_F16, V_F16, is_v);
    let kvh = select(head - p.n_head, head - p.n_head - p.n_head_kv, is_v);
    let e0  = select(p.k_offset, p.v_offset, is_v) + pos * p.n_embd_kv + kvh * hd;
    if (f16) {
        let word = pack_f16x2(rot[d], rot[d + 1u]);
        if (is_v) { v_cache[(e0 + d) / 2u] = word; } else { k_cache[(e0 + d) / 2u] = word; }
    } else if (is_v) {
        v_cache[e0 + d]      = bitcast<u32>(rot[d]);
        v_cache[e0 + d + 1u] = bitcast<u32>(rot[d + 1u]);
    } else {
        k_cache[e0 + d]      = bitcast<u32>(rot[d]);
        k_cache[e0 + d + 1u] = bitcast<u32>(rot[d + 1u]);
    }
}
