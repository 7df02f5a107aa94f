requires packed_4x8_integer_dot_product;

// matvec_q8_acts: matvec_q8.wgsl without its prologue, for Q4_0 / Q8_0 weights. The activations'
// Q8_0 blocks come from act_q8_0.wgsl, made once per token instead of once per workgroup, so a
// workgroup only streams its rows: per (row, block) the same integer dot and scale products as
// matvec_q8.wgsl (matmul.wgsl's block_term), each row's terms added in order by one invocation (the
// reference's order), then the same epilogue (GLU's gate, ACCUMULATE's residual add). Same bits as
// matvec_q8.wgsl. With QOUT (GLU, ROWS a multiple of 32) the epilogue also writes the gate's outputs
// as Q8_0 blocks into oacts, as act_q8_0.wgsl would make them for the down projection (a
// workgroup's rows are whole blocks), so that no act_q8_0 runs before it. With ROPE (one token's
// [q; k; v] projection of a family without a QK-norm, all head_dim rotated) the epilogue does
// rope_kv_family.wgsl's work on its rows instead of writing them: RoPE on q and k with the host's
// (cos, sin) table, q into y (q_out), k and v into the KV cache at row p.pos; same expressions, same
// bits, one dispatch fewer per layer. Its workgroups own whole rotation pairs: "norm" pairs
// (2i, 2i+1) are neighbouring rows; for NeoX pairs (i, i + hd/2) workgroup row m stands for
// (pair m / 2 of the workgroup, its half m % 2), so that 4 rows are dims (i, i + hd/2, i + 1,
// i + 1 + hd/2) of one head (i even) and the f16 cache words (i, i + 1) are the workgroup's own.
// With PROLOGUE (one token; the host: a normed [q; k; v], its lanes' blocks all loaded at once, LOADS
// lanes >= NB) there is no acts input: each workgroup makes h's Q8_0 blocks from x (NORM: rms_norm
// with nw) in its prologue, after its weight loads are issued, into workgroup memory with act_q8_0.wgsl's
// code (lib/quarters_q8_0.wgsl), so the same bits and no act_q8_0 dispatch before it.
//
//   w, ws: as matvec_q8.wgsl (Q8_0 [N][K/32][2] vec4<u32> | Q4_0 [N][K/32] vec4<u32>; f32 block
//      scales [N][K/32])
//   acts: [T] tokens of K/32 blocks (lib/acts_q8_0.wgsl)   oacts: [T] tokens of n_rows/32 blocks (QOUT)
//   y: [N, T] f32, or [n_ff, T] f32 (GLU)
//   ROPE: rope [pos][hd/2] (cos, sin); k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32, as
//      u32 words (rope_kv_family.wgsl's); y: q_out [n_head hd]
// Bindings: 0 w, 1 ws, 2 acts, 3 rope (read); 4 y, 5 oacts, 6 k_cache, 7 v_cache (read_write);
// 8 x, 9 nw (read; PROLOGUE); 10 params (uniform). (Without ROPE, 3, 6 and 7 are any buffers, without
// PROLOGUE 8 and 9 (and with it 2): nothing reads or writes them.)
// Dispatch: (ceil(n_rows / ROWS), T, 1). A workgroup computes MROWS weight rows (ROWS, or 2 ROWS
// with GLU: its gate rows, then their up rows), WG / MROWS lanes on each row; a lane loads LOADS of
// its blocks' weights at once before it multiplies them.

// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/acts_q8_0.wgsl"
// #include "lib/quarters_q8_0.wgsl"

override WG: u32 = 256u;     // a power of two
override ROWS: u32 = 16u;    // output rows per workgroup
override MROWS: u32 = 16u;   // weight rows per workgroup: ROWS, or 2 ROWS with GLU (the host sets it)
override NB: u32 = 64u;      // K / 32
override WTYPE: u32 = 4u;    // 3 q8_0, 4 q4_0 (matmul.wgsl's numbering)
override GLU: bool = false;
override ACCUMULATE: bool = false;
override QOUT: bool = false;  // GLU: also the outputs' Q8_0 blocks (ROWS a multiple of 32)
override NBO: u32 = 1u;       // QOUT: n_rows / 32, the down projection's blocks
override ROPE: bool = false;  // [q; k; v] rows: RoPE, q into y, k and v into the cache (ROWS even)
override NORM_MODE: bool = true;  // ROPE: pairs (2i, 2i+1); else NeoX (ROWS a multiple of 4)
override K_F16: bool = true;  // ROPE: the caches' element types
override V_F16: bool = true;
override PROLOGUE: bool = false;  // h's blocks made from x in the prologue (T = 1), not read from acts
override NORM: bool = false;      // PROLOGUE: h = rms_norm(x) * nw, else x
override QPT: u32 = 1u;           // PROLOGUE: ceil(4 NB / WG), at most 4 (NB <= WG)

// Q4_0 / Q8_0 blocks a lane loads before it multiplies them (the host: all of its blocks where
// that is at most MAX_LOADS, so a QOUT gate+up's lanes wait for memory once; the arrays are
// MAX_LOADS long, the loops LOADS, a constant when the pipeline is made, so the rest goes).
const MAX_LOADS: u32 = 12u;
override LOADS: u32 = 4u;  // 1 .. MAX_LOADS

struct Params {
    n_rows: u32,         // output rows (GLU: n_ff)
    y_offset: u32,       // f32 index of y[0, 0]
    y_stride: u32,       // f32 elements between tokens of y
    up_row: u32,         // GLU: the weight row of up row 0 (n_ff)
    activation: u32,     // GLU: 0 ReLU², 1 SiLU (ffn_gate)
    // ROPE (else zeros):
    head_dim: u32,
    n_q: u32,            // q rows (n_head head_dim); then n_kv k rows, n_kv v rows
    n_kv: u32,           // n_head_kv head_dim, cache elements per position
    pos: u32,            // the token's position and cache row
    k_offset: u32,       // element index of k_cache[0, 0] (even for f16)
    v_offset: u32,
    // PROLOGUE (else zeros):
    k: u32,              // K
    eps: f32,            // NORM
    x_offset: u32,       // f32 index of x[0]
    nw_offset: u32,      // f32 index of nw[0]
    rn_zero: u32,        // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> ws: array<f32>;
@group(0) @binding(2) var<storage, read> acts: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> rope: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> oacts: array<u32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(8) var<storage, read> x: array<f32>;
@group(0) @binding(9) var<storage, read> nw: array<f32>;
@group(0) @binding(10) var<uniform> p: Params;

// The terms, a row every NB + 1 (the row sums' reads fall on different banks for even NB).
var<workgroup> terms: array<f32, MROWS * (NB + 1u)>;
// QOUT: the workgroup's outputs and the max |f| per 8 of them.
// ROPE: the workgroup's rows after the rotation, in its row order.
var<workgroup> fo: array<f32, select(1u, ROWS, QOUT || ROPE)>;
var<workgroup> omax: array<f32, select(1u, ROWS / 8u, QOUT)>;
// PROLOGUE: h's blocks as acts holds them (codes [NB][8] u32, then each block's f16 d as f32).
var<workgroup> pcodes: array<vec4<u32>, select(1u, 2u * NB, PROLOGUE)>;
var<workgroup> pdq: array<f32, select(1u, NB, PROLOGUE)>;

// Q4_0 nibbles n (0..15, one per byte) as int8 n - 8 (matvec_q8.wgsl's centred).
fn centred(nibbles: u32) -> u32 {
    return ((nibbles | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
}

// Block b's scale d_a, of the token whose words start at vec4 a0.
fn a_dq(a0: u32, b: u32) -> f32 {
    if (PROLOGUE) { return pdq[b]; }
    return bitcast<f32>(acts[a0 + act_dq(NB) / 4u + b / 4u][b % 4u]);
}

// Code words 4 i .. 4 i + 3 of the token whose words start at vec4 a0.
fn a_codes(a0: u32, i: u32) -> vec4<u32> {
    if (PROLOGUE) { return pcodes[i]; }
    return acts[a0 + i];
}

// PROLOGUE: h's blocks into pcodes / pdq (act_q8_0.wgsl's stores). Every invocation calls it (barriers).
fn stage_h(lid: u32) {
    let qs = quarters_q8_0(lid, p.x_offset);
    for (var u = 0u; u < QPT; u++) {
        let g = lid + u * WG;  // words 2 g, 2 g + 1
        if (g < 4u * NB) {
            pcodes[g / 2u][2u * (g % 2u)]      = qs[u].w0;
            pcodes[g / 2u][2u * (g % 2u) + 1u] = qs[u].w1;
            if (g % 4u == 0u) { pdq[g / 4u] = round_f16(qs[u].d); }
        }
    }
}

// The term of block b from its weight words (Q8_0: w0, w1; Q4_0: w0) and scale d_w
// (matvec_q8.wgsl's q_term).
fn q_term(w0: vec4<u32>, w1: vec4<u32>, d_w: f32, a0: u32, b: u32) -> f32 {
    let x0 = a_codes(a0, 2u * b);
    let x1 = a_codes(a0, 2u * b + 1u);
    var sumi = 0;
    if (WTYPE == 3u) {
        for (var i = 0u; i < 4u; i++) { sumi += dot4_i8(w0[i], x0[i]) + dot4_i8(w1[i], x1[i]); }
        return f32(sumi) * (d_w * a_dq(a0, b));
    }
    // Q4_0: byte j of the 16 holds element j (low nibble) and j + 16 (high nibble).
    for (var i = 0u; i < 4u; i++) {
        sumi += dot4_i8(centred(w0[i] & 0x0f0f0f0fu), x0[i]) + dot4_i8(centred((w0[i] >> 4u) & 0x0f0f0f0fu), x1[i]);
    }
    return (f32(sumi) * d_w) * a_dq(a0, b);
}

// Weight row of the workgroup's matrix row m (GLU: gate rows, then up rows; ROPE NeoX: see above).
fn weight_row(r0: u32, m: u32) -> u32 {
    if (GLU && m >= ROWS) { return p.up_row + r0 + m - ROWS; }
    if (ROPE && !NORM_MODE) { return neox_row(r0 + m); }
    return r0 + m;
}

// ROPE NeoX: the [q; k; v] row of ordinal l (pair l / 2 in head order, its half l % 2).
fn neox_row(l: u32) -> u32 {
    let half = p.head_dim / 2u;
    let pair = l / 2u;
    return (pair / half) * p.head_dim + pair % half + (l % 2u) * half;
}

// The terms of matrix row m, added in block order.
fn row_sum(m: u32) -> f32 {
    var s = 0.0;
    for (var b = 0u; b < NB; b++) { s = s + terms[m * (NB + 1u) + b]; }
    return s;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t     = wid.y;
    let a0    = t * (act_words(NB) / 4u);  // the token's first activation vec4
    let r0    = wid.x * ROWS;
    let lanes = WG / MROWS;
    let m     = lid / lanes;
    let lane  = lid % lanes;
    let live  = m < MROWS && r0 + select(m, m - ROWS, GLU && m >= ROWS) < p.n_rows;
    let row   = weight_row(r0, m);
    if (PROLOGUE) {
        // The lane's blocks (all of them) loaded first, so their latency overlaps the prologue.
        var wa: array<vec4<u32>, MAX_LOADS>;
        var wb: array<vec4<u32>, MAX_LOADS>;
        var sc: array<f32, MAX_LOADS>;
        if (live) {
            for (var j = 0u; j < LOADS; j++) {
                let b = lane + j * lanes;
                if (b < NB) {
                    if (WTYPE == 3u) {
                        wa[j] = w[2u * (row * NB + b)];
                        wb[j] = w[2u * (row * NB + b) + 1u];
                    } else {
                        wa[j] = w[row * NB + b];
                    }
                    sc[j] = ws[row * NB + b];
                }
            }
        }
        stage_h(lid);
        workgroupBarrier();
        if (live) {
            for (var j = 0u; j < LOADS; j++) {
                let b = lane + j * lanes;
                if (b < NB) { terms[m * (NB + 1u) + b] = q_term(wa[j], wb[j], sc[j], a0, b); }
            }
        }
    } else if (live) {
        // Blocks lane + i lanes, LOADS at a time: their words and scales first, then the terms.
        for (var i0 = 0u; i0 < NB; i0 += LOADS * lanes) {
            var wa: array<vec4<u32>, MAX_LOADS>;
            var wb: array<vec4<u32>, MAX_LOADS>;
            var sc: array<f32, MAX_LOADS>;
            for (var j = 0u; j < LOADS; j++) {
                let b = i0 + lane + j * lanes;
                if (b < NB) {
                    if (WTYPE == 3u) {
                        wa[j] = w[2u * (row * NB + b)];
                        wb[j] = w[2u * (row * NB + b) + 1u];
                    } else {
                        wa[j] = w[row * NB + b];
                    }
                    sc[j] = ws[row * NB + b];
                }
            }
            for (var j = 0u; j < LOADS; j++) {
                let b = i0 + lane + j * lanes;
                if (b < NB) { terms[m * (NB + 1u) + b] = q_term(wa[j], wb[j], sc[j], a0, b); }
            }
        }
    }
    workgroupBarrier();

    let r    = r0 + lid;
    let here = lid < ROWS && r < p.n_rows;
    let o    = p.y_offset + t * p.y_stride + r;
    if (GLU) {
        var f = 0.0;
        if (here) {
            f    = ffn_gate(row_sum(lid), row_sum(ROWS + lid), p.activation);
            y[o] = f;
        }
        if (QOUT) { quantize_out(lid, t, r0, f); }
        return;
    }
    if (ROPE) {
        rope_out(lid, r0);
        return;
    }
    if (!here) { return; }
    if (ACCUMULATE) {
        y[o] = y[o] + row_sum(lid);
    } else {
        y[o] = row_sum(lid);
    }
}

// The workgroup's ROWS outputs f as Q8_0 blocks r0 / 32 .. of the token's oacts, with act_q8_0.wgsl's
// expressions (h = f): invocation g < ROWS / 8 owns outputs 8 g .. 8 g + 7, a quarter of a block.
// Every invocation calls it (barriers).
fn quantize_out(lid: u32, t: u32, r0: u32, f: f32) {
    if (lid < ROWS) { fo[lid] = f; }
    workgroupBarrier();
    let g    = lid;
    let live = g < ROWS / 8u && r0 + 8u * g < p.n_rows;
    if (live) {
        var m = 0.0;
        for (var j = 0u; j < 8u; j++) { m = max(m, abs(fo[8u * g + j])); }
        omax[g] = m;
    }
    workgroupBarrier();
    let o  = t * act_words(NBO);  // the token's first word
    let bl = g / 4u;              // the workgroup's block
    let b  = r0 / 32u + bl;       // the down projection's block
    if (live) {
        let amax = max(max(omax[4u * bl], omax[4u * bl + 1u]), max(omax[4u * bl + 2u], omax[4u * bl + 3u]));
        let d    = div_rn(amax, 127.0);
        let id   = select(0.0, div_rn(1.0, d), d != 0.0);
        for (var q = 0u; q < 2u; q++) {
            var word = 0u;
            for (var e = 0u; e < 4u; e++) {
                let c = i32(round_away(mul_rn(fo[8u * g + 4u * q + e], id)));
                word |= (bitcast<u32>(c) & 0xffu) << (8u * e);
            }
            oacts[o + 8u * b + 2u * (g % 4u) + q] = word;
        }
        if (g % 4u == 0u) { oacts[o + act_dq(NBO) + b] = bitcast<u32>(round_f16(d)); }
    }
}

// ROPE: rope_kv_family.wgsl's rotation and stores for the workgroup's rows (r0 .. r0 + ROWS - 1 in
// weight_row's order; the host makes n_rows a multiple of ROWS). Invocation i < ROWS / 2 rotates
// the pair of rows (2i, 2i + 1), then invocation i < ROWS / 2 stores the values of dims (d, d + 1)
// of one head: rows (2i, 2i + 1) for norm pairs, NeoX rows (4g + h, 4g + h + 2) (i = 2g + h).
// Every invocation calls it (a barrier).
fn rope_out(lid: u32, r0: u32) {
    let hd   = p.head_dim;
    let half = hd / 2u;
    if (lid < ROWS / 2u) {
        let row = weight_row(r0, 2u * lid);  // dim d0 of the pair; its partner d0 + 1 (norm) or + half
        var x0  = row_sum(2u * lid);
        var x1  = row_sum(2u * lid + 1u);
        let d0  = row % hd;
        if (row < p.n_q + p.n_kv) {  // q and k rotate
            let j  = select(d0, d0 / 2u, NORM_MODE);
            let cs = rope[p.pos * half + j];
            let turned = rope_rotate(x0, x1, cs);
            x0 = turned.x;
            x1 = turned.y;
        }
        fo[2u * lid]      = x0;
        fo[2u * lid + 1u] = x1;
    }
    workgroupBarrier();
    if (lid >= ROWS / 2u) { return; }
    var m0 = 2u * lid;  // the workgroup rows of dims (d, d + 1)
    var m1 = m0 + 1u;
    if (!NORM_MODE) {
        m0 = 4u * (lid / 2u) + lid % 2u;
        m1 = m0 + 2u;
    }
    store_pair(weight_row(r0, m0), fo[m0], fo[m1]);
}

// ROPE: the rotated values (a, b) of dims (d, d + 1) of the head of [q; k; v] row `row` (dim d) into
// q_out or the caches.
fn store_pair(row: u32, a: f32, b: f32) {
    let d = row % p.head_dim;
    if (row < p.n_q) {
        y[p.y_offset + row]      = a;
        y[p.y_offset + row + 1u] = b;
        return;
    }
    let is_v = row >= p.n_q + p.n_kv;
    let kvh  = (row - p.n_q - select(0u, p.n_kv, is_v)) / p.head_dim;
    let e0   = select(p.k_offset, p.v_offset, is_v) + p.pos * p.n_kv + kvh * p.head_dim + d;
    if (select(K_F16, V_F16, is_v)) {
        let word = pack_f16x2(a, b);
        if (is_v) { v_cache[e0 / 2u] = word; } else { k_cache[e0 / 2u] = word; }
    } else if (is_v) {
        v_cache[e0]      = bitcast<u32>(a);
        v_cache[e0 + 1u] = bitcast<u32>(b);
    } else {
        k_cache[e0]      = bitcast<u32>(a);
        k_cache[e0 + 1u] = bitcast<u32>(b);
    }
}
