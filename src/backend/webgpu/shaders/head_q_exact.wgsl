// head_q_exact: the exact argmax of an LM head kept in its file's blocks (Q8_0, Q4_0, Q6_K) from
// lm_head_q.wgsl's ARGMAX_ONLY pass, as argmax_exact.wgsl does for F16 tables: every row's f32 sum
// f and bound B (|f - exact| <= B) are there, and the workgroups' largest f - B; T is the largest of
// those. Only rows with f + B >= T can hold the maximum; this kernel recomputes them exactly, with
// lm_head_q.wgsl's lanes, chunk sums and tree (the same bits as its logits, which are the CPU's),
// and keeps the best (largest value, lowest index). So greedy decoding picks the exact head's token
// while the table is streamed with f32 sums.
//
//   w, ws: GpuMatrix words and block scales   h: [K] f32 (the normed input; rounded to f16 first
//   with round_input)   logits: [n_vocab] f32 (the f32 sums)   aux: [n_vocab] (bits(B), 0), then
//   [n_chunks] (bits(max f - B of a chunk of rows), index or 0xffffffff)   out: [n_groups] (value
//   bits, index) for argmax_final.wgsl
// Bindings: 0 w, 1 ws, 2 h, 3 logits, 4 aux (read); 5 out (read_write); 6 params (uniform)
// Dispatch: (n_groups, 1, 1). Workgroup g scans rows [g rows_per_group, (g + 1) rows_per_group) into
// a candidate list; then, if there are any, it stages h and recomputes WG / LANES candidates at a
// time, a team of LANES lanes each. With more than 256 candidates in a group (a degenerate table,
// e.g. all rows equal) it recomputes every row of the group: slow, still exact.

// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/q_head_chunk.wgsl"

override WG: u32 = 256u;     // a power of two
override LANES: u32 = 8u;    // lm_head_q.wgsl's
override CPR: u32 = 64u;     // 32-value chunks per row (K / 32)
override WTYPE: u32 = 6u;    // 3 q8_0, 4 q4_0, 6 q6_k
override STAGE: bool = true;  // h staged in workgroup memory (as lm_head_q.wgsl: the same values)

struct Params {
    n_vocab: u32,
    h_offset: u32,        // f32 index of h[0]
    logits_offset: u32,   // f32 index of logits[0]
    round_input: u32,     // 1: round h to f16 first
    n_chunks: u32,        // lower bounds after the rows' bounds in aux
    rows_per_group: u32,
    rn_zero: u32,         // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> ws: array<f32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
@group(0) @binding(3) var<storage, read> logits: array<f32>;
@group(0) @binding(4) var<storage, read> aux: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read_write> out: array<vec2<u32>>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> cand: array<u32, 256>;
var<workgroup> n_cand: atomic<u32>;
var<workgroup> n_cand_plain: u32;
var<workgroup> red: array<vec2<f32>, WG>;
var<workgroup> hs: array<f32, select(1u, CPR * 32u, STAGE)>;

fn h_global(t: u32, i: u32) -> f32 {
    let v = h[p.h_offset + i];
    return select(v, round_f16(v), p.round_input != 0u);
}

fn h_val(t: u32, i: u32) -> f32 {
    if (STAGE) { return hs[i]; }
    return h_global(t, i);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (lid == 0u) { atomicStore(&n_cand, 0u); }
    // T: the largest lower bound over all chunks.
    var t = bitcast<f32>(0xff7fffffu);  // the lowest float
    for (var c = lid; c < p.n_chunks; c += WG) {
        let e = aux[p.n_vocab + c];
        if (e.y != 0xffffffffu) { t = max(t, bitcast<f32>(e.x)); }
    }
    let th = wg_max(lid, t);
    // Candidates of this group's rows.
    let r0 = wid.x * p.rows_per_group;
    let r1 = min(r0 + p.rows_per_group, p.n_vocab);
    for (var r = r0 + lid; r < r1; r += WG) {
        if (logits[p.logits_offset + r] + bitcast<f32>(aux[r].x) >= th) {
            let slot = atomicAdd(&n_cand, 1u);
            if (slot < 256u) { cand[slot] = r; }
        }
    }
    workgroupBarrier();
    if (lid == 0u) { n_cand_plain = atomicLoad(&n_cand); }
    let nc = workgroupUniformLoad(&n_cand_plain);
    var bv = 0.0;
    var bi = 0xffffffffu;
    if (nc > 0u) {
        if (STAGE) {
            for (var i = lid; i < CPR * 32u; i += WG) { hs[i] = h_global(0u, i); }
            workgroupBarrier();
        }
        let listed = nc <= 256u;
        let n_rows = select(r1 - r0, nc, listed);
        let team   = lid / LANES;
        let lane   = lid % LANES;
        for (var j0 = 0u; j0 < n_rows; j0 += WG / LANES) {
            let j = j0 + team;
            var row = 0xffffffffu;
            if (j < n_rows) { row = select(r0 + j, cand[min(j, 255u)], listed); }
            // lm_head_q.wgsl's row sum: the lane's chunks, then the tree.
            var acc = vec2<f32>(0.0, 0.0);
            if (row != 0xffffffffu) {
                for (var c = lane; c < CPR; c += LANES) { acc = chunk_dot(acc, chunk_words(row, c), c, 0u); }
            }
            red[lid] = acc;
            workgroupBarrier();
            for (var s = LANES / 2u; s > 0u; s >>= 1u) {
                if (lane < s) { red[lid] = df_add(red[lid], red[lid + s]); }
                workgroupBarrier();
            }
            if (lane == 0u && row != 0xffffffffu) {
                let v = df_to_f32(red[lid]);
                if (beats(v, row, bv, bi)) {
                    bv = v;
                    bi = row;
                }
            }
            workgroupBarrier();  // (the next rows write red again)
        }
    }
    let best = best_index(lid, bv, bi);
    if (lid == 0u) { out[wid.x] = best; }
}
