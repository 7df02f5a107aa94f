// head_exact_batch: the batched greedy head's second stage (after lm_head_i8_batch.wgsl): per
// column, the rows whose bound reaches the column's threshold T (the largest lower bound f - B of
// any row, so below some row's exact logit) are recomputed exactly from the F16 table; a row with
// f + B < T cannot be the column's argmax. The exact logit is lib/head_exact_row.wgsl's exact_row
// (the same operations in the same order, so the same bits as the single-column greedy head).
// A workgroup scans CHUNK rows of one column, lists its candidates (at most CAP; more, a
// degenerate table: every row of the chunk, slow but exact), stages h and recomputes them one
// after another, and writes its best (value bits, row), ties to the lowest row, for argmax_final.
// TOP_K (a sampler that looks only at the k largest logits, HeadOutput::top_k): T is instead a key
// that at least k rows' exact logits reach (head_topk_batch.wgsl), so every row that can be among
// the k largest is listed; the workgroup writes the listed rows' exact logits and -inf for the
// others of its chunk to `logits` (no winner), and appends each listed row (row, value bits) to
// its column's list (count first, zeroed by head_topk_batch.wgsl; rows past the list's room are
// counted, not written: the reader then takes the logits).
//
//   fb: [T][n_vocab] (f, B)   thr: [T] u32 keys   h: [K, T] f32 (column stride h_stride), the exact
//   head's input (rounded to f16 here with round_input, as lm_head.wgsl does)   head: the F16
//   table, rows of K / 8 vec4<u32>   partial: [T][n_chunks] (value bits, row)
//   logits (TOP_K): [n_vocab, T] f32 (out_offset, out_stride)
//   list (TOP_K): column c's at list_offset + c list_stride: [count, 0, (row, value bits) x room],
//   room = (list_stride - 2) / 2 (untouched without TOP_K)
// Bindings: 0 fb, 1 thr, 2 h, 3 head (read), 4 partial, 5 logits, 6 list (read_write), 7 params (uniform)
// Dispatch: (n_chunks = ceil(n_vocab / CHUNK), T, 1).

// #include "lib/numerics.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/wg_reduce.wgsl"

override K: u32 = 2560u;      // elements per row, a multiple of 8, at most 16 WG
override WG: u32 = 256u;      // a power of two
override CHUNK: u32 = 4096u;  // rows per workgroup
override CAP: u32 = 256u;     // listed rows
override TOP_K: bool = false;

struct Params {
    n_vocab: u32,
    h_offset: u32,     // f32 index of h[0, 0]
    h_stride: u32,
    round_input: u32,  // 1: round h to f16 first
    n_chunks: u32,
    out_offset: u32,   // (TOP_K) f32 index of logits[0, 0]
    out_stride: u32,
    list_offset: u32,  // (TOP_K) u32 index of column 0's list
    list_stride: u32,  // (TOP_K) u32 per column's list
    rn_zero: u32,      // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> fb: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read> thr: array<u32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
@group(0) @binding(3) var<storage, read> head: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read_write> logits: array<f32>;
@group(0) @binding(6) var<storage, read_write> list: array<atomic<u32>>;
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> hs: array<vec4<f32>, K / 4u>;
var<workgroup> listed: array<u32, CAP>;
var<workgroup> n_listed: atomic<u32>;
var<workgroup> n_plain: u32;

// lm_head_i8_batch.wgsl's keys: the order of the values, -0 as +0.
fn bound_key(v: f32) -> u32 {
    return order_key(select(v, 0.0, v == 0.0));
}

// lib/head_input.wgsl's head_pair_exact.
fn pair_exact(acc: vec2<f32>, e: vec2<f32>, hv: vec2<f32>, round_in: bool) -> vec2<f32> {
    if (round_in) {
        return df_add_f(df_add_f(acc, e.x * hv.x), e.y * hv.y);
    }
    return df_fma(df_fma(acc, e.x, hv.x), e.y, hv.y);
}

// lib/head_exact_row.wgsl's exact_row over hs (that file needs the single-column kernels'
// bindings). Every invocation calls it (barriers).
fn exact_logit(lid: u32, row: u32, round_in: bool) -> f32 {
    let words = K / 8u;
    var a = vec2<f32>(0.0, 0.0);
    for (var i = lid; i < words; i += WG) {
        let w  = head[row * words + i];
        let ha = hs[2u * i];
        let hb = hs[2u * i + 1u];
        a = pair_exact(a, unpack2x16float(w.x), ha.xy, round_in);
        a = pair_exact(a, unpack2x16float(w.y), ha.zw, round_in);
        a = pair_exact(a, unpack2x16float(w.z), hb.xy, round_in);
        a = pair_exact(a, unpack2x16float(w.w), hb.zw, round_in);
    }
    let v = df_to_f32(wg_df_sum(lid, a));
    workgroupBarrier();  // (the next call's wg_df_sum writes its slots again)
    return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let col  = wid.y;
    let row0 = wid.x * CHUNK;
    let t    = thr[col];
    if (lid == 0u) { atomicStore(&n_listed, 0u); }
    workgroupBarrier();
    for (var r = lid; r < CHUNK; r += WG) {
        let row = row0 + r;
        if (row >= p.n_vocab) { break; }
        let v = fb[col * p.n_vocab + row];
        if (bound_key(v.x + v.y) >= t) {
            let slot = atomicAdd(&n_listed, 1u);
            if (slot < CAP) { listed[slot] = r; }
        }
    }
    if (TOP_K) {  // -inf everywhere first; the listed rows get their exact logits below
        for (var r = lid; r < CHUNK; r += WG) {
            let row = row0 + r;
            if (row >= p.n_vocab) { break; }
            logits[p.out_offset + col * p.out_stride + row] = bitcast<f32>(0xff800000u ^ p.rn_zero);  // (-inf, at run time)
        }
    }
    workgroupBarrier();
    if (lid == 0u) { n_plain = atomicLoad(&n_listed); }
    let n = workgroupUniformLoad(&n_plain);
    var bv = 0.0;
    var bi = 0xffffffffu;
    if (n > 0u) {
        let round_in = p.round_input != 0u;
        for (var i = lid; i < K / 4u; i += WG) {
            let o = p.h_offset + col * p.h_stride + 4u * i;
            var v = vec4<f32>(h[o], h[o + 1u], h[o + 2u], h[o + 3u]);
            if (round_in) { v = vec4<f32>(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w)); }
            hs[i] = v;
        }
        workgroupBarrier();
        let all = n > CAP;
        let m   = select(n, min(CHUNK, p.n_vocab - row0), all);
        for (var c = 0u; c < m; c++) {
            var r = c;
            if (!all) { r = listed[c]; }
            let row = row0 + r;
            let v   = exact_logit(lid, row, round_in);
            // (the invocation that wrote this row's -inf: the same invocation's stores stay in order)
            if (TOP_K && lid == r % WG) {
                logits[p.out_offset + col * p.out_stride + row] = v;
                let base = p.list_offset + col * p.list_stride;
                let slot = atomicAdd(&list[base], 1u);
                if (2u + 2u * slot + 1u < p.list_stride) {
                    atomicStore(&list[base + 2u + 2u * slot], row);
                    atomicStore(&list[base + 3u + 2u * slot], bitcast<u32>(v));
                }
            }
            if (beats(v, row, bv, bi)) {
                bv = v;
                bi = row;
            }
        }
    }
    if (!TOP_K && lid == 0u) { partial[col * p.n_chunks + wid.x] = vec2<u32>(bitcast<u32>(bv), bi); }
}
