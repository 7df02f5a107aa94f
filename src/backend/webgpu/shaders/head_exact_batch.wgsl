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
//   head's input (rounded to f16 here with ROUND_IN, as lm_head.wgsl does)   head: the F16
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
override ROUND_IN: bool = false;  // h rounded to f16 first (a pipeline constant: pair_exact's other form
                                  // is compiled out of the loops)
override TEAMS: bool = false;    // the listed rows recomputed by 8 teams of 32 lanes, a row each at a time
                                 // (WebGpuTuning::head_batch_teams; see team_logit), instead of the
                                 // whole workgroup per row
override TEAM_SG: bool = false;  // (TEAMS) the host sets it when subgroups are exactly 32 invocations

struct Params {
    n_vocab: u32,
    h_offset: u32,     // f32 index of h[0, 0]
    h_stride: u32,
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
var<workgroup> team_red: array<vec2<f32>, WG>;  // (TEAMS without TEAM_SG) the lanes' pairs

// lm_head_i8_batch.wgsl's keys: the order of the values, -0 as +0.
fn bound_key(v: f32) -> u32 {
    return order_key(select(v, 0.0, v == 0.0));
}

// lib/head_input.wgsl's head_pair_exact.
fn pair_exact(acc: vec2<f32>, e: vec2<f32>, hv: vec2<f32>) -> vec2<f32> {
    if (ROUND_IN) {
        return df_add_f(df_add_f(acc, e.x * hv.x), e.y * hv.y);
    }
    return df_fma(df_fma(acc, e.x, hv.x), e.y, hv.y);
}

// lib/head_exact_row.wgsl's exact_row over hs (that file needs the single-column kernels'
// bindings). Every invocation calls it (barriers).
fn exact_logit(lid: u32, row: u32) -> f32 {
    let words = K / 8u;
    var a = vec2<f32>(0.0, 0.0);
    for (var i = lid; i < words; i += WG) {
        let w  = head[row * words + i];
        let ha = hs[2u * i];
        let hb = hs[2u * i + 1u];
        a = pair_exact(a, unpack2x16float(w.x), ha.xy);
        a = pair_exact(a, unpack2x16float(w.y), ha.zw);
        a = pair_exact(a, unpack2x16float(w.z), hb.xy);
        a = pair_exact(a, unpack2x16float(w.w), hb.zw);
    }
    let v = df_to_f32(wg_df_sum(lid, a));
    workgroupBarrier();  // (the next call's wg_df_sum writes its slots again)
    return v;
}

// TEAMS: lane `lane`'s pair of `row` (valid) by four chains of pair_exact, one per u32 of its words
// lane, lane + 32, ... (each chain a double-float sum, as exact_logit's one chain per invocation:
// any order of such sums rounds to the CPU's double sum's f32 except within ~2^-40 of a boundary),
// the chains added (c0 + c1) + (c2 + c3); then the team's 32 pairs by the halving tree (lane i + s
// onto lane i, s = 16 .. 1), lane 0's total as exact_logit's. Every invocation calls it (barriers
// without TEAM_SG).
fn team_logit(lid: u32, lane: u32, row: u32, valid: bool) -> f32 {
    let words = K / 8u;
    var c0 = vec2<f32>(0.0, 0.0);
    var c1 = vec2<f32>(0.0, 0.0);
    var c2 = vec2<f32>(0.0, 0.0);
    var c3 = vec2<f32>(0.0, 0.0);
    if (valid) {
        for (var i = lane; i < words; i += 32u) {
            let w  = head[row * words + i];
            let ha = hs[2u * i];
            let hb = hs[2u * i + 1u];
            c0 = pair_exact(c0, unpack2x16float(w.x), ha.xy);
            c1 = pair_exact(c1, unpack2x16float(w.y), ha.zw);
            c2 = pair_exact(c2, unpack2x16float(w.z), hb.xy);
            c3 = pair_exact(c3, unpack2x16float(w.w), hb.zw);
        }
    }
    var a = df_add(df_add(c0, c1), df_add(c2, c3));
    if (TEAM_SG && WG_REDUCE_SG) {
        for (var s = 16u; s > 0u; s >>= 1u) {
            a = df_add(a, vec2<f32>(sg_shuffle_xor(a.x, s), sg_shuffle_xor(a.y, s)));
        }
        return df_to_f32(a);
    }
    team_red[lid] = a;
    workgroupBarrier();
    for (var s = 16u; s > 0u; s >>= 1u) {
        if (lane < s) { team_red[lid] = df_add(team_red[lid], team_red[lid + s]); }
        workgroupBarrier();
    }
    a = team_red[lid - lane];
    workgroupBarrier();  // (the next row writes team_red again)
    return df_to_f32(a);
}

// The exact logit v of listed row `row` of column col: written over its -inf and appended to the
// column's list (TOP_K).
fn keep_row(col: u32, row: u32, v: f32) {
    logits[p.out_offset + col * p.out_stride + row] = v;
    let base = p.list_offset + col * p.list_stride;
    let slot = atomicAdd(&list[base], 1u);
    if (2u + 2u * slot + 1u < p.list_stride) {
        atomicStore(&list[base + 2u + 2u * slot], row);
        atomicStore(&list[base + 3u + 2u * slot], bitcast<u32>(v));
    }
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
        for (var i = lid; i < K / 4u; i += WG) {
            let o = p.h_offset + col * p.h_stride + 4u * i;
            var v = vec4<f32>(h[o], h[o + 1u], h[o + 2u], h[o + 3u]);
            if (ROUND_IN) { v = vec4<f32>(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w)); }
            hs[i] = v;
        }
        workgroupBarrier();
        let all = n > CAP;
        let m   = select(n, min(CHUNK, p.n_vocab - row0), all);
        if (TEAMS) {
            // Team `team` takes listed rows team, team + 8, ... (rounds: the same count everywhere).
            // Its lane 0 writes a row's logit over the -inf another invocation wrote: the storage
            // barrier orders the two within the workgroup.
            storageBarrier();
            let team = lid / 32u;
            let lane = lid % 32u;
            for (var q = 0u; q < (m + 7u) / 8u; q++) {
                let c     = 8u * q + team;
                let valid = c < m;
                var r     = c;
                if (!all && valid) { r = listed[c]; }
                let row = row0 + r;
                let v   = team_logit(lid, lane, row, valid);
                if (valid && lane == 0u) {
                    if (TOP_K) { keep_row(col, row, v); }
                    if (beats(v, row, bv, bi)) {
                        bv = v;
                        bi = row;
                    }
                }
            }
        }
        for (var c = 0u; !TEAMS && c < m; c++) {
            var r = c;
            if (!all) { r = listed[c]; }
            let row = row0 + r;
            let v   = exact_logit(lid, row);
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
    if (TEAMS && !TOP_K) {  // the teams' bests (lane 0's; others hold none) to one
        let b = best_index(lid, bv, bi);
        if (lid == 0u) { partial[col * p.n_chunks + wid.x] = b; }
        return;
    }
    if (!TOP_K && lid == 0u) { partial[col * p.n_chunks + wid.x] = vec2<u32>(bitcast<u32>(bv), bi); }
}
