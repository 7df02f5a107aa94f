requires packed_4x8_integer_dot_product;

// matvec_q8: a matrix-vector form of matmul.wgsl for the weight types that multiply Q8_0
// activation blocks (Q4_0, Q8_0: one token; Q1_0, Q2_0, PQ2_0 in GpuLinear's 2-bit codes: any number
// of tokens, a workgroup row per token), with the activations' preparation fused in front and the
// FFN's gate in the epilogue, bit for bit as the CPU reference computes the chain it replaces:
//   NORM   h = rms_norm(x) * nw exactly as rms_norm.wgsl, else h = x; then h's Q8_0 blocks
//          exactly as quantize_q8_0.wgsl, staged in workgroup memory (every workgroup quantizes
//          the whole vector: no separate norm or quantize dispatch), in one pass over memory
//          (lib/quarters_q8_0.wgsl, as act_q8_0.wgsl);
//   terms  per (row, block) the integer dot (dot4 on packed int8; Q4_0's nibbles become int8 n - 8)
//          times the scales in matmul.wgsl's order; for the 2-bit codes per (row, weight group)
//          s = sum of d_a * sumi over the group's blocks in order, times the group's scale
//          (cpu::dot_lowbit_q8_0); into workgroup memory;
//   sums   one invocation per row adds its terms in order (the reference's order);
//   GLU    f = ffn_gate(g, u) of gate row r and up row up_row + r (glu.wgsl after matmul), else
//          y = s or y += s (ACCUMULATE: the residual add the reference does after the product).
//
//   w: Q8_0 [N][K/32][2] vec4<u32> | Q4_0 [N][K/32] vec4<u32> (GpuMatrix's words) | codes
//      [N][K/64] vec4<u32> (GpuLinear: code word c = elements 16c .. 16c + 15, (c >> 2s) & 0x03030303
//      the codes (value + 1) of elements 16c + 4s .. + 3)
//   ws: [N][K/32] f32 block scales (GpuMatrix) | GpuLinear's words, group scales from scales_offset
//   x: [K, T] f32   nw: [K] f32 (NORM)   y: [N, T] f32, or [n_ff, T] f32 (GLU)
// Bindings: 0 w, 1 ws, 2 x, 3 nw (read); 4 y (read_write); 5 params (uniform)
// Dispatch: (ceil(n_rows / ROWS), T, 1). A workgroup computes MROWS weight rows (ROWS, or 2 ROWS
// with GLU: its gate rows, then their up rows), WG / MROWS lanes on each row.

// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/acts_q8_0.wgsl"
// #include "lib/quarters_q8_0.wgsl"
// #include "lib/codes_q8_0.wgsl"

override WG: u32 = 256u;     // a power of two; NORM needs K <= 32 WG (NB <= WG)
override ROWS: u32 = 8u;     // output rows per workgroup
override MROWS: u32 = 8u;    // weight rows per workgroup: ROWS, or 2 ROWS with GLU (the host sets it)
override NB: u32 = 64u;      // K / 32
override QPT: u32 = 1u;      // ceil(4 NB / WG), at most 8 (lib/quarters_q8_0.wgsl)
override WTYPE: u32 = 4u;    // 3 q8_0, 4 q4_0 (matmul.wgsl's numbering), 7 GpuLinear 2-bit codes
override GROUP: u32 = 32u;   // values per term: 32, or the weight group (64 / 128) for WTYPE 7
override NT: u32 = 64u;      // terms per row: K / GROUP (the host sets it)
// Blocks per lane whose weights are loaded before the prologue, so that the norm and the
// quantization overlap the first loads (Q4_0: at most 8, Q8_0: 4; 0 for WTYPE 7).
override PF: u32 = 0u;
override NORM: bool = false;
override GLU: bool = false;
override ACCUMULATE: bool = false;

struct Params {
    n_rows: u32,      // output rows (GLU: n_ff)
    k: u32,           // K (NORM)
    eps: f32,         // NORM
    x_offset: u32,    // f32 index of x[0, 0]
    x_stride: u32,    // f32 elements between tokens of x
    nw_offset: u32,   // f32 index of nw[0]
    y_offset: u32,    // f32 index of y[0, 0]
    y_stride: u32,    // f32 elements between tokens of y
    scales_offset: u32,  // WTYPE 7: u32 index of the group scales in ws
    up_row: u32,      // GLU: the weight row of up row 0 (n_ff)
    activation: u32,  // GLU: 0 ReLU², 1 SiLU (ffn_gate)
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> ws: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> nw: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

// The activations' Q8_0 blocks: codes (block b: vec4s 2b, 2b + 1 = elements 0..15, 16..31) and
// the f16 scales as f32, and the sums of the codes (WTYPE 7: the codes are value + 1).
var<workgroup> acodes: array<vec4<u32>, 2u * NB>;
var<workgroup> adq: array<f32, NB>;
var<workgroup> asum: array<i32, NB>;
var<workgroup> part_sum: array<i32, 4u * NB>;  // per 8 values (stage_q8_0)
// The terms, a row every NT + 1 (odd: the row sums' reads fall on different banks).
var<workgroup> terms: array<f32, MROWS * (NT + 1u)>;

// Q4_0 nibbles n (0..15, one per byte) as int8 n - 8: set bit 7, subtract 8 (no borrow crosses a
// byte), flip bit 7 back.
fn centred(nibbles: u32) -> u32 {
    return ((nibbles | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
}

// Stages h's Q8_0 blocks (lib/quarters_q8_0.wgsl: one pass over memory): invocation i's quarters
// i + u WG (values 8 g .. 8 g + 7 of block g / 4) as two code words and their sum, the block's f16 d
// (WTYPE 7: the blocks' code sums, by a pass over part_sum after a barrier, or with Q8_TOTAL_SG by
// shuffles).
fn stage_q8_0(lid: u32, x0: u32) {
    let qs = quarters_q8_0(lid, x0);
    for (var u = 0u; u < QPT; u++) {
        let g = lid + u * WG;
        if (g < 4u * NB) {
            acodes[g / 2u][2u * (g % 2u)]      = qs[u].w0;  // (words 2 g, 2 g + 1)
            acodes[g / 2u][2u * (g % 2u) + 1u] = qs[u].w1;
            part_sum[g] = qs[u].csum;
            if (g % 4u == 0u) { adq[g / 4u] = round_f16(qs[u].d); }
        }
    }
    if (WTYPE == 7u && !(Q8_TOTAL_SG && WG_REDUCE_SG && SG32)) {
        workgroupBarrier();
        for (var b = lid; b < NB; b += WG) {
            asum[b] = part_sum[4u * b] + part_sum[4u * b + 1u] + part_sum[4u * b + 2u] + part_sum[4u * b + 3u];
        }
    } else if (WTYPE == 7u) {
        block_csums(lid, qs);
    }
}

// The term of weight row `row`, term g: block g (matmul.wgsl's block_term), or weight group g of
// the 2-bit codes (cpu::dot_lowbit_q8_0).
fn block_term(row: u32, b: u32) -> f32 {
    if (WTYPE == 7u) {
        var s = 0.0;
        for (var j = 0u; j < GROUP / 32u; j += 2u) {
            let blk = b * (GROUP / 32u) + j;       // an even block: it and the next are one vec4
            let cv  = w[row * (NB / 2u) + blk / 2u];
            s = s + mul_rn(adq[blk], f32(codes_sumi(cv.x, cv.y, blk)));
            s = s + mul_rn(adq[blk + 1u], f32(codes_sumi(cv.z, cv.w, blk + 1u)));
        }
        return mul_rn(ws[p.scales_offset + row * NT + b], s);
    }
    if (WTYPE == 3u) { return q_term(w[2u * (row * NB + b)], w[2u * (row * NB + b) + 1u], ws[row * NB + b], b); }
    return q_term(w[row * NB + b], vec4<u32>(), ws[row * NB + b], b);
}

// The term of block b from its weight words (Q8_0: w0, w1; Q4_0: w0) and scale d_w.
fn q_term(w0: vec4<u32>, w1: vec4<u32>, d_w: f32, b: u32) -> f32 {
    let a0 = acodes[2u * b];
    let a1 = acodes[2u * b + 1u];
    var sumi = 0;
    if (WTYPE == 3u) {
        for (var i = 0u; i < 4u; i++) { sumi += dot4_i8(w0[i], a0[i]) + dot4_i8(w1[i], a1[i]); }
        return f32(sumi) * (d_w * adq[b]);
    }
    // Q4_0: byte j of the 16 holds element j (low nibble) and j + 16 (high nibble).
    for (var i = 0u; i < 4u; i++) {
        sumi += dot4_i8(centred(w0[i] & 0x0f0f0f0fu), a0[i]) + dot4_i8(centred((w0[i] >> 4u) & 0x0f0f0f0fu), a1[i]);
    }
    return (f32(sumi) * d_w) * adq[b];
}

// Weight row of the workgroup's matrix row m (GLU: gate rows, then up rows).
fn weight_row(r0: u32, m: u32) -> u32 {
    if (GLU && m >= ROWS) { return p.up_row + r0 + m - ROWS; }
    return r0 + m;
}

// The terms of matrix row m, added in block order.
fn row_sum(m: u32) -> f32 {
    var s = 0.0;
    for (var b = 0u; b < NT; b++) { s = s + terms[m * (NT + 1u) + b]; }
    return s;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t     = wid.y;
    let x0    = p.x_offset + t * p.x_stride;
    let r0    = wid.x * ROWS;
    let lanes = WG / MROWS;
    let m     = lid / lanes;
    let lane  = lid % lanes;
    let live  = m < MROWS && r0 + select(m, m - ROWS, GLU && m >= ROWS) < p.n_rows;
    let row   = weight_row(r0, m);
    // The lane's first PF blocks of weights, loaded before the prologue (Q4_0 / Q8_0).
    var wp: array<vec4<u32>, 8>;
    var sp: array<f32, 8>;
    if (live) {
        for (var i = 0u; i < PF; i++) {
            let b = lane + i * lanes;
            if (b < NB) {
                if (WTYPE == 3u) {
                    wp[min(2u * i, 7u)]      = w[2u * (row * NB + b)];
                    wp[min(2u * i + 1u, 7u)] = w[2u * (row * NB + b) + 1u];
                } else {
                    wp[i] = w[row * NB + b];
                }
                sp[i] = ws[row * NB + b];
            }
        }
    }
    stage_q8_0(lid, x0);
    workgroupBarrier();

    if (live) {
        for (var i = 0u; i < PF; i++) {
            let b = lane + i * lanes;
            if (b < NB) {
                let w0 = select(wp[i], wp[min(2u * i, 7u)], WTYPE == 3u);
                terms[m * (NT + 1u) + b] = q_term(w0, wp[min(2u * i + 1u, 7u)], sp[i], b);
            }
        }
        for (var b = lane + PF * lanes; b < NT; b += lanes) { terms[m * (NT + 1u) + b] = block_term(row, b); }
    }
    workgroupBarrier();

    let r = r0 + lid;
    if (lid >= ROWS || r >= p.n_rows) { return; }
    let o = p.y_offset + t * p.y_stride + r;
    if (GLU) {
        y[o] = ffn_gate(row_sum(lid), row_sum(ROWS + lid), p.activation);
    } else if (ACCUMULATE) {
        y[o] = y[o] + row_sum(lid);
    } else {
        y[o] = row_sum(lid);
    }
}
