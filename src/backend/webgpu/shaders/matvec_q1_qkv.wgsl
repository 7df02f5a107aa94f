requires packed_4x8_integer_dot_product;

// matvec_q1_qkv: one token's [q; k; v] projection of a Q1_0 weight (also Q2_0 / PQ2_0: GpuLinear's
// 2-bit codes) with rope_kv_family.wgsl's work in its epilogue, bit for bit as the CPU reference
// computes the chain it replaces (rms_norm + quantize_q8_0 + the matvec, then rope_kv_append):
//   prologue  h = rms_norm(x) * nw (NORM), else x, as Q8_0 blocks staged in workgroup memory
//             (lib/quarters_q8_0.wgsl, exactly as matvec_q8.wgsl);
//   terms     per (row, weight group) cpu::dot_lowbit_q8_0's s = sum of d_a * sumi over the group's
//             blocks in order, times the group's scale (matvec_q8.wgsl's WTYPE 7);
//   sums      one invocation per row adds its terms in order;
//   epilogue  a workgroup is one head (ROWS = head_dim rows, so that a head's norm and its NeoX
//             pairs (i, i + n_rot/2) are its own): Qwen3's per-head RMS norm of q and k (Q_NORM /
//             K_NORM; cpu::rms_norm_row: squares in the block-halving order, 1 / sqrt(sum / hd + eps),
//             (x * w) * that), RoPE on q and k ("norm" pairs (2i, 2i+1) or NeoX pairs, n_rot of
//             head_dim dims) with the host's (cos, sin) table, q into q_out, k and v into the caches
//             at row p.pos: rope_kv_family.wgsl's expressions on the same values.
// One dispatch per layer instead of matvec_q8 + rope_kv_family.
//
//   w: GpuLinear's words as vec4<u32> (webgpu_weights.h): codes [N][K/64] vec4 (code word c =
//      elements 16c .. 16c + 15, (c >> 2s) & 0x03030303 the codes (value + 1) of elements 16c + 4s
//      .. + 3), the f32 group scales [N][K/GROUP] from u32 index scales_offset
//   x: [K] f32   nw: [K] f32 (NORM)   rope: [pos][n_rot/2] (cos, sin)
//   qkn: [2 hd] f32, q_norm then k_norm (any values where Q_NORM / K_NORM is off)
//   q_out: [n_head hd] f32   k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32, as u32 words
// Bindings: 0 w, 1 x, 2 nw, 3 rope, 4 qkn (read); 5 q_out, 6 k_cache, 7 v_cache (read_write);
// 8 params (uniform)
// Dispatch: (n_head + 2 n_head_kv, 1, 1): a workgroup per head, WG / ROWS lanes on each row.

// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/acts_q8_0.wgsl"
// #include "lib/quarters_q8_0.wgsl"
// #include "lib/codes_q8_0.wgsl"

override WG: u32 = 256u;     // a power of two, >= ROWS; NORM needs K <= 32 WG (NB <= WG)
override ROWS: u32 = 128u;   // head_dim: weight rows per workgroup (even)
override NB: u32 = 64u;      // K / 32
override QPT: u32 = 1u;      // ceil(4 NB / WG), at most 8 (lib/quarters_q8_0.wgsl)
override GROUP: u32 = 128u;  // values per weight group (a multiple of 64)
override NT: u32 = 16u;      // terms per row: K / GROUP
override NORM: bool = true;
override Q_NORM: bool = false;
override K_NORM: bool = false;
override NORM_MODE: bool = false;  // pairs (2i, 2i+1); else NeoX
override K_F16: bool = true;
override V_F16: bool = true;

struct Params {
    k: u32,              // K (NORM)
    eps: f32,            // NORM
    x_offset: u32,       // f32 index of x[0]
    nw_offset: u32,      // f32 index of nw[0]
    scales_offset: u32,  // u32 index of the group scales in w
    n_rot: u32,
    n_head: u32,
    n_head_kv: u32,
    pos: u32,            // the token's position (its (cos, sin) row and cache row)
    q_offset: u32,       // f32 index of q_out[0]
    k_offset: u32,       // element index of k_cache[0, 0] (even for f16)
    v_offset: u32,
    n_embd_kv: u32,      // cache elements per position
    qk_eps: f32,         // Q_NORM / K_NORM
    rn_zero: u32,        // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
@group(0) @binding(3) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read> qkn: array<f32>;
@group(0) @binding(5) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(8) var<uniform> p: Params;

// The activations' Q8_0 blocks (as matvec_q8.wgsl): codes, f16 scales as f32, sums of the codes.
var<workgroup> acodes: array<vec4<u32>, 2u * NB>;
var<workgroup> adq: array<f32, NB>;
var<workgroup> asum: array<i32, NB>;
var<workgroup> part_sum: array<i32, 4u * NB>;
// The terms, a row every NT + 1 (odd: the row sums' reads fall on different banks).
var<workgroup> terms: array<f32, ROWS * (NT + 1u)>;
// The head's rows: the sums, then after the norm and the rotation.
var<workgroup> fo: array<f32, ROWS>;
var<workgroup> rot: array<f32, ROWS>;
var<workgroup> head_inv: f32;
var<workgroup> block_sq: array<f32, 8>;  // the head's blocks of 32 squares, each summed

fn stage_q8_0(lid: u32, x0: u32) {
    let qs = quarters_q8_0(lid, x0);
    for (var u = 0u; u < QPT; u++) {
        let g = lid + u * WG;
        if (g < 4u * NB) {
            acodes[g / 2u][2u * (g % 2u)]      = qs[u].w0;
            acodes[g / 2u][2u * (g % 2u) + 1u] = qs[u].w1;
            part_sum[g] = qs[u].csum;
            if (g % 4u == 0u) { adq[g / 4u] = round_f16(qs[u].d); }
        }
    }
    if (Q8_TOTAL_SG && WG_REDUCE_SG && SG32) {
        block_csums(lid, qs);
        return;
    }
    workgroupBarrier();
    for (var b = lid; b < NB; b += WG) {
        asum[b] = part_sum[4u * b] + part_sum[4u * b + 1u] + part_sum[4u * b + 2u] + part_sum[4u * b + 3u];
    }
}

// Weight group g of weight row `row` (cpu::dot_lowbit_q8_0).
fn group_term(row: u32, g: u32) -> f32 {
    var s = 0.0;
    for (var j = 0u; j < GROUP / 32u; j += 2u) {
        let blk = g * (GROUP / 32u) + j;  // an even block: it and the next are one vec4
        let cv  = w[row * (NB / 2u) + blk / 2u];
        s = s + mul_rn(adq[blk], f32(codes_sumi(cv.x, cv.y, blk)));
        s = s + mul_rn(adq[blk + 1u], f32(codes_sumi(cv.z, cv.w, blk + 1u)));
    }
    let si = p.scales_offset + row * NT + g;
    return mul_rn(bitcast<f32>(w[si / 4u][si % 4u]), s);
}

fn row_sum(m: u32) -> f32 {
    var s = 0.0;
    for (var b = 0u; b < NT; b++) { s = s + terms[m * (NT + 1u) + b]; }
    return s;
}

// cpu::sum_squares of the head's sums, as rope_kv_family.wgsl's head_sum_squares on fo, in two
// parts: block b's 32 squares in the halving order (invocation b, block_square_sum), then the block
// sums, zero-padded to a power of two, in the halving order (one invocation, head_sum_squares).
fn block_square_sum(b: u32) -> f32 {
    var t: array<f32, 32>;
    for (var e = 0u; e < 32u; e++) {
        let i = b * 32u + e;
        var v = 0.0;
        if (i < ROWS) { v = fo[i]; }
        t[e] = mul_rn(v, v);
    }
    for (var h = 16u; h >= 1u; h /= 2u) {
        for (var i = 0u; i < h; i++) { t[i] = t[i] + t[i + h]; }
    }
    return t[0];
}
fn head_sum_squares() -> f32 {
    let nb = (ROWS + 31u) / 32u;
    var bs: array<f32, 8>;
    for (var b = 0u; b < 8u; b++) { bs[b] = select(0.0, block_sq[b], b < nb); }
    var pw = 1u;
    while (pw < nb) { pw *= 2u; }
    for (var h = pw / 2u; h >= 1u; h /= 2u) {
        for (var i = 0u; i < h; i++) { bs[i] = bs[i] + bs[i + h]; }
    }
    return bs[0];
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let head  = wid.x;
    let hd    = ROWS;
    let r0    = head * ROWS;
    let lanes = WG / ROWS;
    let m     = lid / lanes;
    let lane  = lid % lanes;
    stage_q8_0(lid, p.x_offset);
    workgroupBarrier();
    if (m < ROWS) {
        for (var g = lane; g < NT; g += lanes) { terms[m * (NT + 1u) + g] = group_term(r0 + m, g); }
    }
    workgroupBarrier();
    if (lid < ROWS) { fo[lid] = row_sum(lid); }
    workgroupBarrier();

    // rope_kv_family.wgsl from here, on fo instead of qkv.
    let is_q   = head < p.n_head;
    let is_v   = head >= p.n_head + p.n_head_kv;
    let normed = (is_q && Q_NORM) || (!is_q && !is_v && K_NORM);
    if (normed && lid < (hd + 31u) / 32u) { block_sq[lid] = block_square_sum(lid); }
    workgroupBarrier();
    if (normed && lid == 0u) { head_inv = inv_root_rn(div_rn(head_sum_squares(), f32(hd)) + p.qk_eps); }
    workgroupBarrier();
    let inv  = select(1.0, head_inv, normed);
    let half = p.n_rot / 2u;
    let j    = lid;
    if (j < hd / 2u) {
        var i0 = 2u * j;
        var i1 = 2u * j + 1u;
        if (!NORM_MODE) {
            i0 = select(p.n_rot + 2u * (j - half), j, j < half);
            i1 = select(i0 + 1u, j + half, j < half);
        }
        var x0 = fo[i0];
        var x1 = fo[i1];
        if (normed) {
            x0 = mul_rn(x0, select(qkn[hd + i0], qkn[i0], is_q)) * inv;
            x1 = mul_rn(x1, select(qkn[hd + i1], qkn[i1], is_q)) * inv;
        }
        if (!is_v && j < half) {
            let cs = rope[p.pos * half + j];
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
        let o = p.q_offset + head * hd;
        q_out[o + d]      = rot[d];
        q_out[o + d + 1u] = rot[d + 1u];
        return;
    }
    let f16 = select(K_F16, V_F16, is_v);
    let kvh = select(head - p.n_head, head - p.n_head - p.n_head_kv, is_v);
    let e0  = select(p.k_offset, p.v_offset, is_v) + p.pos * p.n_embd_kv + kvh * hd;
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
