// argmax_exact: the exact argmax of the LM head from its fast form (lm_head_f16_decode.wgsl with
// ARGMAX_ONLY): every row's f32 logit f and bound B (|f - exact| <= B) are there, and the largest
// lower bound T = max (f - B). Only rows with f + B >= T can hold the maximum; this kernel
// recomputes those rows exactly (double-float sums, as the exact LM head) and keeps the best
// (largest value, lowest index). So greedy decoding picks the same token as the exact head, while
// the 657 MB table is streamed with plain f32 arithmetic.
//
//   head: [K, n_vocab] f16 as vec4<u32>   x: [K] f32 (h itself when NORM = false)   nw: [K] f32
//   logits: [n_vocab] f32 (the fast sums)   aux: [n_vocab] (bits(B), 0), then [n_chunks] (bits(max of
//   f - B over a 64-row block), index)   out: [n_groups] (value bits, index) for argmax_final.wgsl
//   (u32 pairs, written atomically: TOP_K appends to it from every workgroup)
// Bindings: 0 head, 1 x, 2 nw (read), 3 logits (read_write: TOP_K writes it), 4 aux (read);
//           5 out (read_write); 6 params (uniform)
// Dispatch: (n_groups, 1, 1). Workgroup g scans rows [g rows_per_group, (g + 1) rows_per_group):
// candidates go to a list in workgroup memory; then, if there are any, it stages h and computes
// each candidate's dot with all its threads. With more than 256 candidates in a group (a
// degenerate table, e.g. all rows equal) it recomputes every row of the group: slow, still exact.
//
// TOP_K = k > 0 (WebGpuBackend::norm_lm_head_top_k, for a sampler whose first stage is top-k): T is
// instead the k-th largest of the n_chunks lower bounds (at most MAX_BOUNDS; ties by index). Each is
// some row's lower bound, so at least k rows have exact logits >= T, and a row with f + B < T has
// an exact logit below the k-th largest: it cannot be among the top k. The kernel writes into
// `logits` the exact value of every row with f + B >= T and -inf for the others, and lists those
// rows in `out` instead of the argmax: out[0] counts them (the host zeroes it first), and row i of
// the list is (row, value bits) at out[2 + 2 i] (in no particular order; rows past the list's room
// are counted, not listed: the host then reads the logits).

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/head_input.wgsl"
// #include "lib/head_exact_row.wgsl"

override K: u32 = 2560u;      // elements per row, a multiple of 8
override NORM: bool = false;  // h = rms_norm(x) * nw first
override ROUND_IN: bool = false;  // h rounded to f16 first (lib/head_input.wgsl)
override WG: u32 = 256u;      // a power of two
override TOP_K: u32 = 0u;     // 0: the argmax; k: the exact logits of the rows that can be the top k
override TABLE_F32: bool = false;  // head is an f32 table (lib/head_exact_row.wgsl)
const MAX_BOUNDS = 1024u;     // lower bounds (n_chunks) the TOP_K mode ranks

struct Params {
    n_vocab: u32,
    x_offset: u32,        // f32 index of x[0]
    logits_offset: u32,   // f32 index of logits[0]
    k: u32,               // = K (for lib/inv_rms.wgsl)
    eps: f32,             // NORM only
    n_chunks: u32,        // 64-row blocks of the head
    rows_per_group: u32,
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> head: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;
@group(0) @binding(4) var<storage, read> aux: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read_write> out: array<atomic<u32>>;  // pairs: see above
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> cand: array<u32, 256>;
var<workgroup> n_cand: atomic<u32>;
var<workgroup> n_cand_plain: u32;
var<workgroup> bounds: array<f32, MAX_BOUNDS>;  // TOP_K: the lower bounds
var<workgroup> kth_plain: f32;

// TOP_K: the k-th largest of the n_chunks lower bounds (ties by index; a missing bound counts as
// the lowest float). Every invocation calls it (barriers).
fn kth_bound(lid: u32) -> f32 {
    let lowest = bitcast<f32>(0xff7fffffu);
    for (var c = lid; c < p.n_chunks; c += WG) {
        let e = aux[p.n_vocab + c];
        bounds[c] = select(lowest, bitcast<f32>(e.x), e.y != 0xffffffffu);
    }
    if (lid == 0u) { kth_plain = lowest; }  // (kept only if no rank is k - 1: NaN bounds)
    workgroupBarrier();
    for (var c = lid; c < p.n_chunks; c += WG) {
        let v = bounds[c];
        var above = 0u;  // bounds ranked before c
        for (var j = 0u; j < p.n_chunks; j++) {
            let u = bounds[j];
            above += select(0u, 1u, u > v || (u == v && j < c));
        }
        if (above == TOP_K - 1u) { kth_plain = v; }
    }
    return workgroupUniformLoad(&kth_plain);
}
@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    // Every load that does not wait on another is issued first: this invocation's first lower bound
    // and first row's (f, B), then x and the norm weights (head_input_words).
    var t = bitcast<f32>(0xff7fffffu);
    if (lid < p.n_chunks) {
        let e = aux[p.n_vocab + lid];
        if (e.y != 0xffffffffu) { t = bitcast<f32>(e.x); }
    }
    let r0 = wid.x * p.rows_per_group;
    let r1 = min(r0 + p.rows_per_group, p.n_vocab);
    var fb = vec2<f32>(0.0);  // row r0 + lid's f + B
    if (r0 + lid < r1) { fb = vec2<f32>(logits[p.logits_offset + r0 + lid], bitcast<f32>(aux[r0 + lid].x)); }
    if (lid == 0u) { atomicStore(&n_cand, 0u); }
    let h = head_input_words(lid);

    // T: the largest lower bound over all blocks (TOP_K: the k-th largest).
    var th: f32;
    if (TOP_K == 0u) {
        for (var c = lid + WG; c < p.n_chunks; c += WG) {
            let e = aux[p.n_vocab + c];
            if (e.y != 0xffffffffu) { t = max(t, bitcast<f32>(e.x)); }
        }
        th = wg_max(lid, t);
    } else {
        th = kth_bound(lid);
    }
    // Candidates of this group's rows.
    for (var r = r0 + lid; r < r1; r += WG) {
        var v = fb.x + fb.y;
        if (r != r0 + lid) { v = logits[p.logits_offset + r] + bitcast<f32>(aux[r].x); }
        if (v >= th) {
            let slot = atomicAdd(&n_cand, 1u);
            if (slot < 256u) { cand[slot] = r; }
        } else if (TOP_K > 0u) {
            // -inf (built at run time: a constant -inf is not a WGSL value): not among the top k
            logits[p.logits_offset + r] = bitcast<f32>(0xff800000u ^ p.rn_zero);
        }
    }
    workgroupBarrier();
    if (lid == 0u) { n_cand_plain = atomicLoad(&n_cand); }
    let nc = workgroupUniformLoad(&n_cand_plain);
    var bv = 0.0;
    var bi = 0xffffffffu;
    if (nc > 0u) {
        for (var u = 0u; u < 4u; u++) {
            let i = lid + u * WG;
            if (i < K / 4u) { hs[i] = h[u]; }
        }
        workgroupBarrier();
        let listed = nc <= 256u;
        let n_rows = select(r1 - r0, nc, listed);
        for (var j = 0u; j < n_rows; j++) {
            var row = r0 + j;
            if (listed) { row = cand[j]; }
            let v = exact_row(lid, row);
            if (TOP_K > 0u && lid == 0u) {
                logits[p.logits_offset + row] = v;
                let slot = atomicAdd(&out[0], 1u);
                if (2u * slot + 3u < arrayLength(&out)) {
                    atomicStore(&out[2u * slot + 2u], row);
                    atomicStore(&out[2u * slot + 3u], bitcast<u32>(v));
                }
            }
            if (beats(v, row, bv, bi)) {
                bv = v;
                bi = row;
            }
        }
    }
    if (TOP_K == 0u && lid == 0u) {
        atomicStore(&out[2u * wid.x], bitcast<u32>(bv));
        atomicStore(&out[2u * wid.x + 1u], bi);
    }
}
