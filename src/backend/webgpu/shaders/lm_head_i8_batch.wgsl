requires packed_4x8_integer_dot_product;

// lm_head_i8_batch: the greedy LM head over T columns at once (a batched decoding step, issue 53),
// first stage: the int8 copy of the F16 table (head_i8_pack.wgsl) is streamed once for all columns.
// head_grid_batch.wgsl has put each column's input h on its 16-bit grid (a, b int8 words) with its
// norms (P, Q, S). Here a row's value and bound in column c are
//   f = (s S) (256 sum q a + sum q b),   B = c P + sq Q   (the row's info (s, c, sq, 0))
// as lm_head_i8_argmax.wgsl's store_row computes them (head_grid_batch.wgsl says why |f - exact|
// <= B). Each (f, B) goes to fb, and each column's largest lower bound f - B to its threshold slot
// (an atomicMax of order keys), for head_exact_batch.wgsl, which recomputes exactly the rows with
// f + B >= that threshold.
//
// A workgroup owns RW = 4 TR rows x CW = 4 TC columns; invocation (tr, tc) = (lid / TC, lid % TC)
// sums rows 4 tr .. 4 tr + 3 against columns 4 tc .. 4 tc + 3: 32 integer dot4 chains (a and b).
// K is walked in chunks of KW = 16 words (64 elements): the rows' code words as [word][row] and the
// columns' grid words as [word][column] are staged in workgroup memory (through registers, one
// chunk ahead), so each chunk word costs three vec4 loads for 32 dot4s.
//
//   q8: [n_vocab][K / 16] vec4<u32>   info: [n_vocab] (s, c, sq, 0) f32   grid: head_grid_batch's
//   fb: [T][n_vocab] (f, B) f32   thr: [T] u32 (zeroed by head_grid_batch)   wmax: [T][n_row_groups]
//   each workgroup's largest lower bound per column as a key (a top-k head's threshold comes from
//   these: each is some row's lower bound, head_topk_batch.wgsl)
// Bindings: 0 q8, 1 info, 2 grid (read), 3 fb, 4 thr, 5 wmax (read_write), 6 params (uniform)
// Dispatch: (ceil(n_vocab / RW), ceil(T / CW), 1).

// #include "lib/numerics.wgsl"
// #include "lib/dot4_native.wgsl"

override K: u32 = 2560u;  // elements per row, a multiple of 16
override TC: u32 = 16u;   // invocations along the columns: 4, 8 or 16
override TR: u32 = 256u / TC;
override WG: u32 = 256u;  // TR TC
override RW: u32 = 4u * TR;
override CW: u32 = 4u * TC;
const KW = 16u;           // u32 words per chunk (64 elements)
// Workgroup memory (vec4 words): [KW][TR] rows, then [2][KW][TC] grid words.
override QW: u32 = KW * TR;
override SMEM: u32 = KW * (TR + 2u * TC);
override QL: u32 = (RW * (KW / 4u) + WG - 1u) / WG;  // vec4 row loads per invocation per chunk
override GL: u32 = (CW * KW * 2u + WG - 1u) / WG;    // grid word loads per invocation per chunk

struct Params {
    n_vocab: u32,
    n_cols: u32,
    n_row_groups: u32,  // workgroups along the rows (wmax's stride)
    rn_zero: u32,       // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q8: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> info: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> grid: array<u32>;
@group(0) @binding(3) var<storage, read_write> fb: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> thr: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> wmax: array<u32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> smem: array<vec4<u32>, SMEM>;
var<workgroup> wthr: array<atomic<u32>, 64>;  // per column: the workgroup's largest lower-bound key

// Row item `it` of a chunk (row it / 4, vec4 it % 4 of the chunk's 4), zero past the table.
fn load_rows(row0: u32, it: u32, c: u32) -> vec4<u32> {
    let r = row0 + it / 4u;
    let v = c * (KW / 4u) + it % 4u;
    if (it >= RW * 4u || r >= p.n_vocab || v >= K / 16u) { return vec4<u32>(0u); }
    return q8[r * (K / 16u) + v];
}

// Grid item `it` of a chunk (column it / 32, half (it / 16) % 2, word it % 16), zero past T.
fn load_grid(col0: u32, it: u32, c: u32) -> u32 {
    let col = col0 + it / 32u;
    let w   = c * KW + it % 16u;
    if (it >= CW * KW * 2u || col >= p.n_cols || w >= K / 4u) { return 0u; }
    return grid[col * (K / 2u) + ((it / 16u) % 2u) * (K / 4u) + w];
}

// One code word against four columns' grid words.
fn dot4_row(q: u32, g: vec4<u32>) -> vec4<i32> {
    return vec4<i32>(dot4_i8(q, g.x), dot4_i8(q, g.y), dot4_i8(q, g.z), dot4_i8(q, g.w));
}

// lm_head_i8_argmax.wgsl's bound keys: the order of the values, -0 as +0; key 0 below every value.
fn bound_key(v: f32) -> u32 {
    return order_key(select(v, 0.0, v == 0.0));
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let tr   = lid / TC;
    let tc   = lid % TC;
    let row0 = wid.x * RW;
    let col0 = wid.y * CW;
    let n_chunks = (K / 4u + KW - 1u) / KW;
    if (lid < 64u) { atomicStore(&wthr[lid], 0u); }

    var rn: array<vec4<u32>, 4>;  // the next chunk, through registers (QL <= 4, GL <= 8 used)
    var gn: array<u32, 8>;
    for (var m = 0u; m < QL; m++) { rn[m] = load_rows(row0, lid + WG * m, 0u); }
    for (var m = 0u; m < GL; m++) { gn[m] = load_grid(col0, lid + WG * m, 0u); }

    // sum q a and sum q b: row i's four columns in sa_i / sb_i (named vectors, no indexed arrays:
    // registers, whatever the compiler unrolls)
    var sa0 = vec4<i32>(0); var sa1 = vec4<i32>(0); var sa2 = vec4<i32>(0); var sa3 = vec4<i32>(0);
    var sb0 = vec4<i32>(0); var sb1 = vec4<i32>(0); var sb2 = vec4<i32>(0); var sb3 = vec4<i32>(0);
    for (var c = 0u; c < n_chunks; c++) {
        workgroupBarrier();  // everyone is done with the previous chunk
        for (var m = 0u; m < QL; m++) {
            let it = lid + WG * m;
            if (it < RW * 4u) {
                let r  = it / 4u;
                let w0 = 4u * (it % 4u);
                for (var q = 0u; q < 4u; q++) { smem[(w0 + q) * TR + r / 4u][r % 4u] = rn[m][q]; }
            }
        }
        for (var m = 0u; m < GL; m++) {
            let it = lid + WG * m;
            if (it < CW * KW * 2u) {
                let col = it / 32u;
                smem[QW + ((it / 16u) % 2u) * KW * TC + (it % 16u) * TC + col / 4u][col % 4u] = gn[m];
            }
        }
        workgroupBarrier();
        if (c + 1u < n_chunks) {
            for (var m = 0u; m < QL; m++) { rn[m] = load_rows(row0, lid + WG * m, c + 1u); }
            for (var m = 0u; m < GL; m++) { gn[m] = load_grid(col0, lid + WG * m, c + 1u); }
        }
        for (var w = 0u; w < KW; w++) {
            let qv = smem[w * TR + tr];
            let av = smem[QW + w * TC + tc];
            let bv = smem[QW + KW * TC + w * TC + tc];
            sa0 += dot4_row(qv.x, av);
            sa1 += dot4_row(qv.y, av);
            sa2 += dot4_row(qv.z, av);
            sa3 += dot4_row(qv.w, av);
            sb0 += dot4_row(qv.x, bv);
            sb1 += dot4_row(qv.y, bv);
            sb2 += dot4_row(qv.z, bv);
            sb3 += dot4_row(qv.w, bv);
        }
    }

    let sa = array<vec4<i32>, 4>(sa0, sa1, sa2, sa3);
    let sb = array<vec4<i32>, 4>(sb0, sb1, sb2, sb3);
    // Values and bounds; the workgroup's largest lower bound per column, then the column's slot.
    var nrm: array<vec4<f32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        let col = min(col0 + 4u * tc + j, p.n_cols - 1u);
        let nb  = p.n_cols * (K / 2u) + 4u * col;
        nrm[j] = vec4<f32>(bitcast<f32>(grid[nb]), bitcast<f32>(grid[nb + 1u]), bitcast<f32>(grid[nb + 2u]), 0.0);
    }
    var kmax = vec4<u32>(0u);
    for (var i = 0u; i < 4u; i++) {
        let row = row0 + 4u * tr + i;
        if (row >= p.n_vocab) { break; }
        let sc = info[row];
        for (var j = 0u; j < 4u; j++) {
            let col = col0 + 4u * tc + j;
            if (col >= p.n_cols) { break; }
            let f = (sc.x * nrm[j].z) * (256.0 * f32(sa[i][j]) + f32(sb[i][j]));
            let b = sc.y * nrm[j].x + sc.z * nrm[j].y;
            fb[col * p.n_vocab + row] = vec2<f32>(f, b);
            kmax[j] = max(kmax[j], bound_key(f - b));
        }
    }
    for (var j = 0u; j < 4u; j++) {
        if (col0 + 4u * tc + j < p.n_cols) { atomicMax(&wthr[4u * tc + j], kmax[j]); }
    }
    workgroupBarrier();
    if (lid < CW && col0 + lid < p.n_cols) {
        let k = atomicLoad(&wthr[lid]);
        atomicMax(&thr[col0 + lid], k);
        wmax[(col0 + lid) * p.n_row_groups + wid.x] = k;
    }
}
