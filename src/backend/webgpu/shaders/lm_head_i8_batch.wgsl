requires packed_4x8_integer_dot_product;

// lm_head_i8_batch: the greedy LM head over T columns at once (a batched decoding step, issue 53):
// the int8 copy of the F16 table (head_i8_pack.wgsl) is streamed once for all columns, each
// column's winner recomputed exactly from the F16 table, so every column's id is the one that
// lm_head_i8_argmax.wgsl (EXACT_TAIL) gives for that column alone, and the exact head's argmax.
//
// head_grid_batch.wgsl first puts each column's input h on its 16-bit grid (a, b int8 words) with
// its norms (P, Q, S). Here a row's value and bound in column c are
//   f = (s S) (256 sum q a + sum q b),   B = c P + sq Q   (the row's info (s, c, sq, 0))
// as lm_head_i8_argmax.wgsl's store_row computes them (see head_grid_batch.wgsl for the bound).
//
// A workgroup owns RW = 4 TR rows x CW = 4 TC columns; invocation (tr, tc) = (lid / TC, lid % TC)
// sums rows 4 tr .. 4 tr + 3 against columns 4 tc .. 4 tc + 3: 32 integer dot4 chains (a and b).
// K is walked in chunks of KW = 16 words (64 elements): the rows' code words as [word][row] and the
// columns' grid words as [word][column] are staged in workgroup memory (through registers, one
// chunk ahead), so each chunk word costs three vec4 loads for 32 dot4s.
// Then, as lm_head_i8_argmax.wgsl's exact tail does per column: the workgroup's largest lower bound
// f - B of each column is published with an atomicMax on the column's threshold slot, T' (the
// largest published so far, a lower bound of some row's exact logit in that column) comes back,
// and the rows with f + B >= T' are listed per column (at most CAP; more: every row of the
// workgroup, slow but exact) and recomputed exactly, with h staged in workgroup memory, in the
// order and with the bits of lib/head_exact_row.wgsl's exact_row. Each workgroup's best (value
// bits, row) per column goes to partial[column][workgroup] for argmax_final.wgsl.
//
//   q8: [n_vocab][K / 16] vec4<u32>   info: [n_vocab] (s, c, sq, 0) f32   grid: head_grid_batch's
//   h: [K, T] f32 (column stride h_stride)   head: the F16 table, rows of K / 8 vec4<u32>
//   thr: [T] u32 (zeroed by head_grid_batch)   partial: [T][n_row_groups] (value bits, row)
// Bindings: 0 q8, 1 info, 2 grid, 3 h, 4 head (read), 5 thr, 6 partial (read_write), 7 params
// Dispatch: (ceil(n_vocab / RW), ceil(T / CW), 1).

// #include "lib/numerics.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/wg_reduce.wgsl"

override K: u32 = 2560u;  // elements per row, a multiple of 16
override TC: u32 = 16u;   // invocations along the columns: 4, 8 or 16
override TR: u32 = 256u / TC;
override WG: u32 = 256u;  // TR TC
override RW: u32 = 4u * TR;
override CW: u32 = 4u * TC;
override CAP: u32 = 32u;  // listed rows per column
const KW = 16u;           // u32 words per chunk (64 elements)
// Workgroup memory (vec4 words): the tiles, [KW][TR] rows then [2][KW][TC] grid words; later h
// (K / 4) and the candidate lists (CW CAP u32 from CB).
override QW: u32 = KW * TR;
override CB: u32 = K / 4u;
override SMEM: u32 = max(KW * (TR + 2u * TC), CB + (CW * CAP + 3u) / 4u);
override QL: u32 = (RW * (KW / 4u) + WG - 1u) / WG;  // vec4 row loads per invocation per chunk
override GL: u32 = (CW * KW * 2u + WG - 1u) / WG;    // grid word loads per invocation per chunk

struct Params {
    n_vocab: u32,
    n_cols: u32,
    h_offset: u32,     // f32 index of h[0, 0]
    h_stride: u32,
    round_input: u32,  // 1: h rounded to f16 (as the grid was made)
    n_row_groups: u32, // workgroups along the rows (partial's stride)
    rn_zero: u32,      // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q8: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> info: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> grid: array<u32>;
@group(0) @binding(3) var<storage, read> h: array<f32>;
@group(0) @binding(4) var<storage, read> head: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> thr: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> smem: array<vec4<u32>, SMEM>;
var<workgroup> wthr: array<atomic<u32>, 64>;   // per column: the workgroup's largest lower-bound key
var<workgroup> n_listed: array<atomic<u32>, 64>;  // per column: rows listed
var<workgroup> tcol: array<u32, 64>;           // per column: T' as a key
var<workgroup> ncol: array<u32, 64>;           // per column: rows listed (plain, for uniform loads)

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

fn h_word(col: u32, i: u32) -> vec4<f32> {
    let o = p.h_offset + col * p.h_stride + 4u * i;
    var v = vec4<f32>(h[o], h[o + 1u], h[o + 2u], h[o + 3u]);
    if (p.round_input != 0u) { v = vec4<f32>(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w)); }
    return v;
}

// lib/head_input.wgsl's head_pair_exact and lib/head_exact_row.wgsl's exact_word / exact_row (that
// file needs the single-column kernels' bindings): the same operations in the same order.
fn pair_exact(acc: vec2<f32>, e: vec2<f32>, hv: vec2<f32>, round_in: bool) -> vec2<f32> {
    if (round_in) {
        return df_add_f(df_add_f(acc, e.x * hv.x), e.y * hv.y);
    }
    return df_fma(df_fma(acc, e.x, hv.x), e.y, hv.y);
}

// The exact logit of `row` against the h staged in smem[0 .. K / 4). Every invocation calls it.
fn exact_logit(lid: u32, row: u32, round_in: bool) -> f32 {
    let words = K / 8u;
    var a = vec2<f32>(0.0, 0.0);
    for (var i = lid; i < words; i += WG) {
        let w  = head[row * words + i];
        let ha = bitcast<vec4<f32>>(smem[2u * i]);
        let hb = bitcast<vec4<f32>>(smem[2u * i + 1u]);
        a = pair_exact(a, unpack2x16float(w.x), ha.xy, round_in);
        a = pair_exact(a, unpack2x16float(w.y), ha.zw, round_in);
        a = pair_exact(a, unpack2x16float(w.z), hb.xy, round_in);
        a = pair_exact(a, unpack2x16float(w.w), hb.zw, round_in);
    }
    let v = df_to_f32(wg_df_sum(lid, a));
    workgroupBarrier();  // (the next call's wg_df_sum writes its slots again)
    return v;
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
    if (lid < 64u) {
        atomicStore(&wthr[lid], 0u);
        atomicStore(&n_listed[lid], 0u);
    }

    var rn: array<vec4<u32>, 4>;  // the next chunk, through registers (QL <= 4, GL <= 8 used)
    var gn: array<u32, 8>;
    for (var m = 0u; m < QL; m++) { rn[m] = load_rows(row0, lid + WG * m, 0u); }
    for (var m = 0u; m < GL; m++) { gn[m] = load_grid(col0, lid + WG * m, 0u); }

    var sa: array<i32, 16>;  // [row i][column j] at 4 i + j: sum q a, sum q b
    var sb: array<i32, 16>;
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
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    sa[4u * i + j] += dot4_i8(qv[i], av[j]);
                    sb[4u * i + j] += dot4_i8(qv[i], bv[j]);
                }
            }
        }
    }

    // Values, bounds, the workgroup's largest lower bound per column.
    var up: array<f32, 16>;  // f + B (valid pairs)
    var nrm: array<vec4<f32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        let col = min(col0 + 4u * tc + j, p.n_cols - 1u);
        let nb  = p.n_cols * (K / 2u) + 4u * col;
        nrm[j] = vec4<f32>(bitcast<f32>(grid[nb]), bitcast<f32>(grid[nb + 1u]), bitcast<f32>(grid[nb + 2u]), 0.0);
    }
    var kmax = vec4<u32>(0u);
    for (var i = 0u; i < 4u; i++) {
        let row = row0 + 4u * tr + i;
        let sc  = info[min(row, p.n_vocab - 1u)];
        for (var j = 0u; j < 4u; j++) {
            let f = (sc.x * nrm[j].z) * (256.0 * f32(sa[4u * i + j]) + f32(sb[4u * i + j]));
            let b = sc.y * nrm[j].x + sc.z * nrm[j].y;
            up[4u * i + j] = f + b;
            if (row < p.n_vocab) { kmax[j] = max(kmax[j], bound_key(f - b)); }
        }
    }
    for (var j = 0u; j < 4u; j++) {
        if (col0 + 4u * tc + j < p.n_cols) { atomicMax(&wthr[4u * tc + j], kmax[j]); }
    }
    workgroupBarrier();  // (also: every tile read is done, the lists may take their place)
    if (lid < CW && col0 + lid < p.n_cols) {
        let k   = atomicLoad(&wthr[lid]);
        let old = atomicMax(&thr[col0 + lid], k);
        tcol[lid] = max(old, k);
    }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) {
        let lr = 4u * tr + i;
        if (row0 + lr >= p.n_vocab) { break; }
        for (var j = 0u; j < 4u; j++) {
            let lc = 4u * tc + j;
            if (col0 + lc < p.n_cols && bound_key(up[4u * i + j]) >= tcol[lc]) {
                let slot = atomicAdd(&n_listed[lc], 1u);
                if (slot < CAP) {
                    let e = lc * CAP + slot;
                    smem[CB + e / 4u][e % 4u] = lr;
                }
            }
        }
    }
    workgroupBarrier();
    if (lid < 64u) { ncol[lid] = atomicLoad(&n_listed[lid]); }

    // Each column's listed rows, exactly.
    let round_in = p.round_input != 0u;
    for (var lc = 0u; lc < CW; lc++) {
        let col = col0 + lc;
        if (col >= p.n_cols) { break; }
        let n  = workgroupUniformLoad(&ncol[lc]);  // (its barrier also orders ncol's store)
        var bv = 0.0;
        var bi = 0xffffffffu;
        if (n > 0u) {
            for (var u = 0u; u < 4u; u++) {
                let i = lid + u * WG;
                if (i < K / 4u) { smem[i] = bitcast<vec4<u32>>(h_word(col, i)); }
            }
            workgroupBarrier();
            let listed = n <= CAP;
            let m      = select(RW, n, listed);
            for (var c = 0u; c < m; c++) {
                var lr = c;
                if (listed) {
                    let e = lc * CAP + c;
                    lr = smem[CB + e / 4u][e % 4u];
                }
                let row = row0 + lr;
                let v   = exact_logit(lid, min(row, p.n_vocab - 1u), round_in);
                if (row < p.n_vocab && beats(v, row, bv, bi)) {
                    bv = v;
                    bi = row;
                }
            }
        }
        if (lid == 0u) { partial[col * p.n_row_groups + wid.x] = vec2<u32>(bitcast<u32>(bv), bi); }
    }
}
