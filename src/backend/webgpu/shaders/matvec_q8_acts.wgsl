requires packed_4x8_integer_dot_product;

// matvec_q8_acts: matvec_q8.wgsl without its prologue. The activations' Q8_0 blocks (and their code
// sums) come from act_q8_0.wgsl, made once per token instead of once per workgroup, so a workgroup
// only streams its rows: per (row, term) the same integer dot and scale products as matvec_q8.wgsl
// (matmul.wgsl's block_term; cpu::dot_lowbit_q8_0 for the 2-bit codes), each row's terms added in
// order by one invocation (the reference's order), then the same epilogue (GLU's gate, ACCUMULATE's
// residual add). Same bits as matvec_q8.wgsl.
//
//   w, ws: as matvec_q8.wgsl (Q8_0 [N][K/32][2] vec4<u32> | Q4_0 [N][K/32] vec4<u32> | 2-bit codes
//      [N][K/64] vec4<u32>; f32 block scales [N][K/32] | GpuLinear's words, group scales from
//      scales_offset)
//   acodes: [T][K/32][2] vec4<u32>   adq: [T][K/32] f32   asum: [T][K/32] i32 (act_q8_0.wgsl)
//   y: [N, T] f32, or [n_ff, T] f32 (GLU)
// Bindings: 0 w, 1 ws, 2 acodes, 3 adq, 4 asum (read); 5 y (read_write); 6 params (uniform)
// Dispatch: (ceil(n_rows / ROWS), T, 1). A workgroup computes MROWS weight rows (ROWS, or 2 ROWS
// with GLU: its gate rows, then their up rows), WG / MROWS lanes on each row; a lane loads LOADS of
// its terms' weights at once before it multiplies them.

// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"

override WG: u32 = 256u;     // a power of two
override ROWS: u32 = 16u;    // output rows per workgroup
override MROWS: u32 = 16u;   // weight rows per workgroup: ROWS, or 2 ROWS with GLU (the host sets it)
override NB: u32 = 64u;      // K / 32
override WTYPE: u32 = 4u;    // 3 q8_0, 4 q4_0 (matmul.wgsl's numbering), 7 GpuLinear 2-bit codes
override GROUP: u32 = 32u;   // values per term: 32, or the weight group (64 / 128) for WTYPE 7
override NT: u32 = 64u;      // terms per row: K / GROUP (the host sets it)
override GLU: bool = false;
override ACCUMULATE: bool = false;

const LOADS: u32 = 4u;       // Q4_0 / Q8_0 blocks a lane loads before it multiplies them

struct Params {
    n_rows: u32,         // output rows (GLU: n_ff)
    y_offset: u32,       // f32 index of y[0, 0]
    y_stride: u32,       // f32 elements between tokens of y
    scales_offset: u32,  // WTYPE 7: u32 index of the group scales in ws
    up_row: u32,         // GLU: the weight row of up row 0 (n_ff)
    activation: u32,     // GLU: 0 ReLU², 1 SiLU (ffn_gate)
    rn_zero: u32,        // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> ws: array<f32>;
@group(0) @binding(2) var<storage, read> acodes: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> adq: array<f32>;
@group(0) @binding(4) var<storage, read> asum: array<i32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

// The terms, a row every NT + 1 (odd: the row sums' reads fall on different banks).
var<workgroup> terms: array<f32, MROWS * (NT + 1u)>;

// Q4_0 nibbles n (0..15, one per byte) as int8 n - 8 (matvec_q8.wgsl's centred).
fn centred(nibbles: u32) -> u32 {
    return ((nibbles | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
}

// sum over the token's block a (elements 32 b .. 32 b + 31) of (code - 1) * activation for two code
// words (matvec_q8.wgsl's codes_sumi).
fn codes_sumi(c0: u32, c1: u32, a: u32) -> i32 {
    let a0 = acodes[2u * a];
    let a1 = acodes[2u * a + 1u];
    var sumi = -asum[a];
    for (var s = 0u; s < 4u; s++) {
        sumi += dot4_i8((c0 >> (2u * s)) & 0x03030303u, a0[s]) + dot4_i8((c1 >> (2u * s)) & 0x03030303u, a1[s]);
    }
    return sumi;
}

// Weight group g of the 2-bit codes of `row` against the token's blocks from a0 (matvec_q8.wgsl's
// block_term for WTYPE 7).
fn group_term(row: u32, g: u32, a0: u32) -> f32 {
    var s = 0.0;
    for (var j = 0u; j < GROUP / 32u; j += 2u) {
        let blk = g * (GROUP / 32u) + j;  // an even block: it and the next are one vec4
        let cv  = w[row * (NB / 2u) + blk / 2u];
        s = s + mul_rn(adq[a0 + blk], f32(codes_sumi(cv.x, cv.y, a0 + blk)));
        s = s + mul_rn(adq[a0 + blk + 1u], f32(codes_sumi(cv.z, cv.w, a0 + blk + 1u)));
    }
    return mul_rn(ws[p.scales_offset + row * NT + g], s);
}

// The term of the token's block a from its weight words (Q8_0: w0, w1; Q4_0: w0) and scale d_w
// (matvec_q8.wgsl's q_term).
fn q_term(w0: vec4<u32>, w1: vec4<u32>, d_w: f32, a: u32) -> f32 {
    let a0 = acodes[2u * a];
    let a1 = acodes[2u * a + 1u];
    var sumi = 0;
    if (WTYPE == 3u) {
        for (var i = 0u; i < 4u; i++) { sumi += dot4_i8(w0[i], a0[i]) + dot4_i8(w1[i], a1[i]); }
        return f32(sumi) * (d_w * adq[a]);
    }
    // Q4_0: byte j of the 16 holds element j (low nibble) and j + 16 (high nibble).
    for (var i = 0u; i < 4u; i++) {
        sumi += dot4_i8(centred(w0[i] & 0x0f0f0f0fu), a0[i]) + dot4_i8(centred((w0[i] >> 4u) & 0x0f0f0f0fu), a1[i]);
    }
    return (f32(sumi) * d_w) * adq[a];
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
    let a0    = t * NB;  // the token's first activation block
    let r0    = wid.x * ROWS;
    let lanes = WG / MROWS;
    let m     = lid / lanes;
    let lane  = lid % lanes;
    let live  = m < MROWS && r0 + select(m, m - ROWS, GLU && m >= ROWS) < p.n_rows;
    let row   = weight_row(r0, m);
    if (live) {
        if (WTYPE == 7u) {
            for (var g = lane; g < NT; g += lanes) { terms[m * (NT + 1u) + g] = group_term(row, g, a0); }
        } else {
            // Blocks lane + i lanes, LOADS at a time: their words and scales first, then the terms.
            for (var i0 = 0u; i0 < NT; i0 += LOADS * lanes) {
                var wa: array<vec4<u32>, LOADS>;
                var wb: array<vec4<u32>, LOADS>;
                var sc: array<f32, LOADS>;
                for (var j = 0u; j < LOADS; j++) {
                    let b = i0 + lane + j * lanes;
                    if (b < NT) {
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
                    if (b < NT) { terms[m * (NT + 1u) + b] = q_term(wa[j], wb[j], sc[j], a0 + b); }
                }
            }
        }
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
