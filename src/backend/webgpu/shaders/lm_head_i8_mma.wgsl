enable subgroups;
enable chromium_experimental_subgroup_matrix;

// lm_head_i8_mma: lm_head_i8_batch.wgsl on the subgroup matrices (int8 x int8 -> i32 on an NVIDIA
// GPU's tensor cores, as ternary_gemm_mma.wgsl), with the same bindings, parameters and results bit
// for bit: sum q a and sum q b are exact integers in any order, and (f, B), the thresholds and the
// block bounds are computed from them by lm_head_i8_batch's expressions.
//
// The product is the int8 table [n_vocab][K] (rows, the left operand, row-major) times the grid
// [K][2T] (the right operand, column-major: head_grid_batch.wgsl writes each column's a words and
// then its b words, K / 4 each, so "virtual column" v = 2 c + h is column c's half h, K bytes in a
// row). A workgroup is SGM x SGN subgroups of 32 and owns BM = 32 SGM rows x BN = 32 SGN virtual
// columns (BN / 2 columns); subgroup s takes the 32 x 32 block of rows 32 (s % SGM).., virtual
// columns 32 (s / SGM).. (2 x 2 results of 16 x 16). K is walked in chunks of 64 bytes: the
// chunk's rows and virtual columns (4 vec4 each) go through registers (one chunk ahead) into
// workgroup memory (rows padded to RS words), then each subgroup adds 2 (K steps of 32) x 4
// products. At the end each subgroup stores half its block at a time to workgroup memory as
// [virtual column][row], and each lane takes one row of 8 of its 16 columns: (f, B) to fb, and the
// columns' largest lower bounds (shuffles over the rows) to the workgroup's slots, then to thr and
// wmax as lm_head_i8_batch does.
//
//   q8: [n_vocab][K / 16] vec4<u32>   info: [n_vocab] (s, c, sq, 0) f32   grid: head_grid_batch's
//   fb: [T][n_vocab] (f, B) f32   thr: [T] u32   wmax: [T][n_row_groups] u32 (n_row_groups = ceil(n_vocab / BM))
// Bindings: 0 q8, 1 info, 2 grid (read), 3 fb, 4 thr, 5 wmax (read_write), 6 params (uniform)
// Dispatch: (ceil(n_vocab / BM), ceil(2 T / BN), 1). The host checks that K is a multiple of 64,
// that subgroups are 32 wide and that the workgroup memory fits: max((BM + BN) RS, 512 SGM SGN)
// words and 64 slots (16 KiB for 2 x 4).
// The builtins count the i8 operands' offsets and strides in MU bytes (WebGpuBackend::mma_unit).

// #include "lib/numerics.wgsl"

const SUB = 32u;               // rows and virtual columns of one subgroup's block
const CV  = 4u;                // vec4 words per row (or virtual column) per chunk (64 bytes)
override K: u32 = 2560u;       // elements per row, a multiple of 64
override SGM: u32 = 2u;        // subgroups along the rows
override SGN: u32 = 4u;        // subgroups along the virtual columns (1..4: at most 64 columns)
override BM: u32 = SUB * SGM;  // rows per workgroup
override BN: u32 = SUB * SGN;  // virtual columns per workgroup
override WG: u32 = 32u * SGM * SGN;
override MU: u32 = 4u;
override RS: u32 = 20u;        // words per operand row in workgroup memory (16 + padding)
override LD: u32 = ((BM + BN) * CV + WG - 1u) / WG;  // vec4 loads per invocation per chunk (<= 8)
override SMEM: u32 = max((BM + BN) * RS, SGM * SGN * SUB * SUB / 2u);

struct Params {
    n_vocab: u32,
    n_cols: u32,
    n_row_groups: u32,  // workgroups along the rows (wmax's stride)
    rn_zero: u32,       // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q8: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> info: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> grid: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> fb: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> thr: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> wmax: array<u32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> smem: array<i32, SMEM>;
var<workgroup> wthr: array<atomic<u32>, 64>;  // per column: the workgroup's largest lower-bound key

alias Left  = subgroup_matrix_left<i8, 32, 16>;
alias Right = subgroup_matrix_right<i8, 16, 32>;
alias Acc   = subgroup_matrix_result<i32, 16, 16>;

// Load item `it` of chunk c: rows first (it < 4 BM: row it / 4, vec4 it % 4), then the virtual
// columns; zero past the table, the columns and K.
fn load_item(row0: u32, vcol0: u32, it: u32, c: u32) -> vec4<u32> {
    let q = c * CV + it % 4u;
    if (it < 4u * BM) {
        let r = row0 + it / 4u;
        if (r >= p.n_vocab) { return vec4<u32>(0u); }
        return q8[r * (K / 16u) + q];
    }
    let v = vcol0 + (it - 4u * BM) / 4u;
    if (it >= 4u * (BM + BN) || v >= 2u * p.n_cols) { return vec4<u32>(0u); }
    return grid[v * (K / 16u) + q];
}

// lm_head_i8_batch.wgsl's bound keys: the order of the values, -0 as +0; key 0 below every value.
fn bound_key(v: f32) -> u32 {
    return order_key(select(v, 0.0, v == 0.0));
}

// Row block i of a subgroup's results (rows 16 i.., 32 virtual columns) into smem at `slot` as
// [virtual column][row] (16 words per column; every invocation calls it).
fn store_half(acc: array<Acc, 4>, i: u32, slot: u32) {
    for (var j = 0u; j < 2u; j++) {
        subgroupMatrixStore<col_major>(&smem, slot + (16u * j) * 16u, acc[2u * i + j], 16u);
    }
}

// Each lane's largest lower-bound keys (columns c_sub + 2 m + half) over the 16 lanes of its half,
// then lane lr = 0 of each half into the workgroup's slots (wthr[col - col0]).
@diagnostic(off, subgroup_uniformity)
fn reduce_bounds(kmax: ptr<function, array<u32, 8>>, half: u32, lr: u32, c_sub: u32, col0: u32) {
    for (var m = 0u; m < 8u; m++) {
        var k = (*kmax)[m];
        for (var x = 1u; x < 16u; x *= 2u) { k = max(k, subgroupShuffleXor(k, x)); }
        let col = c_sub + 2u * m + half;
        if (lr == 0u && col < p.n_cols) { atomicMax(&wthr[col - col0], k); }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let row0  = wid.x * BM;
    let vcol0 = wid.y * BN;
    let col0  = vcol0 / 2u;
    let n_chunks = K / 64u;
    let r0 = SUB * (sg % SGM);  // this subgroup's block: rows r0.., virtual columns t0..
    let t0 = SUB * (sg / SGM);
    if (lid < 64u) { atomicStore(&wthr[lid], 0u); }

    var acc: array<Acc, 4>;  // [row block i][column block j] at 2 i + j
    var nxt: array<vec4<u32>, 8>;
    for (var m = 0u; m < LD; m++) { nxt[m] = load_item(row0, vcol0, lid + WG * m, 0u); }

    for (var c = 0u; c < n_chunks; c++) {
        workgroupBarrier();  // everyone is done with the previous chunk
        for (var m = 0u; m < LD; m++) {
            let it = lid + WG * m;
            if (it < 4u * (BM + BN)) {
                let b = (it / 4u) * RS + 4u * (it % 4u);  // rows 0..BM-1, then the virtual columns
                let w = bitcast<vec4<i32>>(nxt[m]);
                smem[b] = w.x;
                smem[b + 1u] = w.y;
                smem[b + 2u] = w.z;
                smem[b + 3u] = w.w;
            }
        }
        workgroupBarrier();
        if (c + 1u < n_chunks) {
            for (var m = 0u; m < LD; m++) { nxt[m] = load_item(row0, vcol0, lid + WG * m, c + 1u); }
        }
        for (var kk = 0u; kk < 2u; kk++) {  // K steps of 32 bytes
            let l0 = subgroupMatrixLoad<Left, row_major>(&smem, (r0 * RS * 4u + 32u * kk) / MU, RS * 4u / MU);
            let l1 = subgroupMatrixLoad<Left, row_major>(&smem, ((r0 + 16u) * RS * 4u + 32u * kk) / MU, RS * 4u / MU);
            let b0 = subgroupMatrixLoad<Right, col_major>(&smem, ((BM + t0) * RS * 4u + 32u * kk) / MU, RS * 4u / MU);
            let b1 = subgroupMatrixLoad<Right, col_major>(&smem, ((BM + t0 + 16u) * RS * 4u + 32u * kk) / MU, RS * 4u / MU);
            acc[0] = subgroupMatrixMultiplyAccumulate(l0, b0, acc[0]);
            acc[1] = subgroupMatrixMultiplyAccumulate(l0, b1, acc[1]);
            acc[2] = subgroupMatrixMultiplyAccumulate(l1, b0, acc[2]);
            acc[3] = subgroupMatrixMultiplyAccumulate(l1, b1, acc[3]);
        }
    }

    // The epilogue in two rounds (row blocks i = 0, 1 of every subgroup's block): the subgroup's
    // 16 x 32 results to its slot as [virtual column][row], then lane (half, lr) takes row
    // 16 i + lr of columns 2 m + half (m < 8) of the subgroup's 16: (f, B) to fb, and its running
    // largest lower bound per column, reduced over the 16 rows by shuffles at the end.
    let half = lane / 16u;
    let lr   = lane % 16u;
    let slot = sg * (SUB * SUB / 2u);
    var kmax = array<u32, 8>();
    for (var i = 0u; i < 2u; i++) {
        workgroupBarrier();  // the tiles (or the previous round's results) are read
        store_half(acc, i, slot);
        workgroupBarrier();
        let row = row0 + r0 + 16u * i + lr;
        let vr  = row < p.n_vocab;
        let sc  = info[min(row, p.n_vocab - 1u)];
        for (var m = 0u; m < 8u; m++) {
            let jc  = 2u * m + half;  // the column within the subgroup's 16
            let col = col0 + t0 / 2u + jc;
            let vc  = col < p.n_cols;
            let nrm = grid[p.n_cols * (K / 8u) + min(col, p.n_cols - 1u)];  // its norms (bits)
            let sa  = smem[slot + (2u * jc) * 16u + lr];
            let sb  = smem[slot + (2u * jc + 1u) * 16u + lr];
            let f   = (sc.x * bitcast<f32>(nrm.z)) * (256.0 * f32(sa) + f32(sb));
            let b   = sc.y * bitcast<f32>(nrm.x) + sc.z * bitcast<f32>(nrm.y);
            if (vr && vc) {
                fb[col * p.n_vocab + row] = vec2<f32>(f, b);
                kmax[m] = max(kmax[m], bound_key(f - b));
            }
        }
    }
    reduce_bounds(&kmax, half, lr, col0 + t0 / 2u, col0);
    workgroupBarrier();
    if (lid < BN / 2u && col0 + lid < p.n_cols) {
        let k = atomicLoad(&wthr[lid]);
        atomicMax(&thr[col0 + lid], k);
        wmax[(col0 + lid) * p.n_row_groups + wid.x] = k;
    }
}
