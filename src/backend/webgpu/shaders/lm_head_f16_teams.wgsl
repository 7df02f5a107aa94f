// lm_head_f16_teams: the exact logits of one token over an F16 table, as lm_head_f16_decode.wgsl
// (not ARGMAX_ONLY) computes them, streamed the way lm_head_i8_argmax.wgsl streams the int8 copy:
// a few workgroups per compute unit that stay resident, teams of 32 lanes (subgroups with TEAM_SG)
// each summing one row at a time, no barrier in the stream where the teams are subgroups, and each
// segment's words (at most 10 per lane) loaded into named registers, every load issued before the
// first sum: no arrays, so few registers per lane and more workgroups resident (H200: 303.8 vs
// 444.5 us per token for 2B4T's head against the former form, which kept two 16-word arrays per
// lane to load the next segment while summing the current one). AHEAD (the default) keeps that
// next segment in a second set of named registers instead: H200 288.9 us with 5-word segments
// (283.2 at three workgroups per unit) vs 303.6; the same rows summed as plain f32 chains took
// 167.3, so the exact sums' operations, not the loads, are what is left. lm_head_f16_decode.wgsl, one
// workgroup per 64 rows with every row's words loaded ahead and a workgroup-memory reduction, ran
// the 2B4T head (657 MB) at ~1 TB/s on an H200 (680 us per token).
//
//   head: [n_vocab][K] f16 (K % 8 == 0, K <= 4096)   x: [K] f32 (h itself when NORM = false)   nw: [K] f32
//   logits: [n_vocab] f32   partial: [groups][8] (f32 value bits, u32 index): each team's best row
//   row_max: [n_vocab] f32, max |e| of each row (head_row_max.wgsl; read with OFFSET_SUM only)
// Bindings: 0 head (read, vec4<u32>), 1 x (read), 2 nw (read; any buffer when NORM = false),
//           3 logits (read_write), 4 partial (read_write), 5 row_max (read; any buffer without
//           OFFSET_SUM), 6 params (uniform, lib/head_params.wgsl)
// Dispatch: (groups, 1, 1), any number; team row rr of workgroup w is rows (rr groups + w) 8 .. + 7
// (row_of), ITERS team rows per workgroup. 256 threads = 8 teams of 32 lanes; lane l sums vec4
// words l, l + 32, ... of its team's row (8 halves each) in SEGS segments of SEG words.
//
// Sums (lm_head_f16_decode.wgsl's order): each lane keeps four chains (one per u32 of its words),
// the chains are added (c0 + c1) + (c2 + c3) in double-float, then the 32 lanes by the halving tree
// (lane i + s onto lane i, s = 16 .. 1: a subgroupShuffleXor butterfly with TEAM_SG, workgroup
// memory otherwise; lane 0's operands are the same either way), and the f32 nearest the pair is the
// logit. Each chain step adds two products:
//   * h not rounded to f16: head_pair_exact (double-float, renormalised every add), as
//     lm_head_f16_decode.wgsl;
//   * h rounded to f16 (the products of two halves are exact in f32): Ogita-Rump-Oishi's Sum2,
//     hi = fl(hi + p) with its exact error (two_sum) added into an f32 lo, renormalised once per
//     row (two_sum(hi, lo)); 8 floating-point operations per product instead of 11 (the renormalised
//     pairs gave the same bits and ran no faster: H100 492.6 vs 490.3 us per token). Its error
//     (<= u |sum| + gamma_n^2 sum |p| with n = 2 K / 256 products per chain) is of the same order as
//     the renormalised pairs'; both stand for the CPU's double sum (cpu::dot_f32) and round to its
//     f32 except where the exact sum is within ~2^-40 (relative) of a rounding boundary.
//   * h rounded to f16 and OFFSET_SUM (head_exact_form 2; session 8's a16a37a, lost then while the
//     loads bounded the kernel, retried now that the Sum2 operations do: plain f32 chains 167 vs 280
//     us): each chain starts at a power of two sigma > 2 B, where B = m_e sum |h| bounds the sum of
//     the chain's |products| (m_e the row's max |e| from row_max, sum |h| over the chain's elements
//     of h); every partial sum T then stays within sigma / 2 of sigma (less lo's share, <= n 2^-24
//     sigma, covered by the 2^-16 margin on B), so |T| >= |p| for each product p: Dekker's Fast2Sum
//     is error-free without ordering, and with the exact product folded in by fma it is 5 operations
//     per product (T' = fma(e, h, T), q = T' - T, lo += fma(e, h, -q); q and the error are exact)
//     instead of Sum2's 8. The chain is (T - sigma) + lo, T - sigma exact (Sterbenz). Its error is
//     lo's f32 sum of n errors below 2^-24 sigma, <= n^2 2^-48 sigma, larger than Sum2's and far
//     larger where a row's max |e| meets small h (an outlier weight). So each row is certified:
//     with the chains' errors (sum over the row's chains <= 4 n^2 2^-48 m_e ||h||_1), the tree's
//     double-float errors and the CPU's own double sum's (each <= 2^-41 m_e ||h||_1 for K <= 4096)
//     bounded by E = m_e ||h||_1 (4.01 n^2 2^-48 + 2^-39), lane 0 checks that every value within E
//     of the team's total rounds to the same f32; a row that fails is summed again with Sum2
//     (row_sum2), the bits of head_exact_form 1. Without TEAM_SG the whole workgroup sums again
//     when any team needs it (the tree has barriers).

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/head_input.wgsl"
// #include "lib/head_params.wgsl"

override K: u32 = 2560u;         // elements per row (n_embd), a multiple of 8, at most 4096
override NORM: bool = true;      // h = rms_norm(x) * nw first
override WG: u32 = 256u;         // fixed (8 teams; lib/inv_rms.wgsl and lib/best_index.wgsl size by it)
override TEAM_SG: bool = false;  // the host sets it when subgroups are exactly 32 invocations
override ITERS: u32 = 8u;        // team rows per workgroup
override PER_LANE: u32 = (K / 8u + 31u) / 32u;  // vec4 words per lane per row (<= 16)
override SEG: u32 = 5u;          // words per lane loaded together (<= 10; WebGpuTuning::head_exact_seg)
override SEGS: u32 = (PER_LANE + SEG - 1u) / SEG;
override AHEAD: bool = false;    // the next segment's words loaded into a second set of named registers
                                 // while the current one is summed (WebGpuTuning::head_exact_ahead)
override OFFSET_SUM: bool = false;  // offset Fast2Sum chains where h is rounded to f16 (see above)

@group(0) @binding(0) var<storage, read> head: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read> row_max: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> red: array<vec2<f32>, WG>;  // the lanes' sums (without TEAM_SG)
var<workgroup> redo_team: array<u32, 8>;   // OFFSET_SUM without TEAM_SG: team t's row is summed again
var<workgroup> redo_any: u32;              // ... some team's is
var<private> n_groups: u32;

fn row_of(wid: u32, rr: u32, team: u32) -> u32 {
    return (rr * n_groups + wid) * 8u + team;
}

// Word i = lane + 32 v of `row` (v < SEG; zero past the row, the table or SEG).
fn load_word(row: u32, i: u32, v: u32) -> vec4<u32> {
    let words = K / 8u;
    if (v < SEG && row < p.n_vocab && i < words) { return head[row * words + i]; }
    return vec4<u32>();
}

// The chains' steps for word i (w): its four u32s' halves, each chain in turn.
fn sum_word(c: ptr<function, array<vec2<f32>, 4>>, w: vec4<u32>, i: u32, v: u32, sum2: bool, round_in: bool) {
    if (v >= SEG || i >= K / 8u) { return; }
    let ha = hs[2u * i];
    let hb = hs[2u * i + 1u];
    (*c)[0] = chain((*c)[0], unpack2x16float(w.x), ha.xy, sum2, round_in);
    (*c)[1] = chain((*c)[1], unpack2x16float(w.y), ha.zw, sum2, round_in);
    (*c)[2] = chain((*c)[2], unpack2x16float(w.z), hb.xy, sum2, round_in);
    (*c)[3] = chain((*c)[3], unpack2x16float(w.w), hb.zw, sum2, round_in);
}

// A segment's words w0 .. w9 (word i + 32 v in wv), summed in order.
fn sum_seg_words(c: ptr<function, array<vec2<f32>, 4>>, i: u32, w0: vec4<u32>, w1: vec4<u32>, w2: vec4<u32>,
                 w3: vec4<u32>, w4: vec4<u32>, w5: vec4<u32>, w6: vec4<u32>, w7: vec4<u32>, w8: vec4<u32>,
                 w9: vec4<u32>, sum2: bool, round_in: bool) {
    sum_word(c, w0, i, 0u, sum2, round_in);
    sum_word(c, w1, i + 32u, 1u, sum2, round_in);
    sum_word(c, w2, i + 64u, 2u, sum2, round_in);
    sum_word(c, w3, i + 96u, 3u, sum2, round_in);
    sum_word(c, w4, i + 128u, 4u, sum2, round_in);
    sum_word(c, w5, i + 160u, 5u, sum2, round_in);
    sum_word(c, w6, i + 192u, 6u, sum2, round_in);
    sum_word(c, w7, i + 224u, 7u, sum2, round_in);
    sum_word(c, w8, i + 256u, 8u, sum2, round_in);
    sum_word(c, w9, i + 288u, 9u, sum2, round_in);
}

// Segment s of the lane's words of `row`, all loads issued before the first sum.
fn sum_seg_direct(c: ptr<function, array<vec2<f32>, 4>>, row: u32, s: u32, lane: u32, sum2: bool, round_in: bool) {
    let i = lane + 32u * s * SEG;
    sum_seg_words(c, i, load_word(row, i, 0u), load_word(row, i + 32u, 1u), load_word(row, i + 64u, 2u),
                  load_word(row, i + 96u, 3u), load_word(row, i + 128u, 4u), load_word(row, i + 160u, 5u),
                  load_word(row, i + 192u, 6u), load_word(row, i + 224u, 7u), load_word(row, i + 256u, 8u),
                  load_word(row, i + 288u, 9u), sum2, round_in);
}

// AHEAD: the lane's words of segment j (of the flattened team rows x segments), loaded into the named
// registers n0 .. n9 (private variables: never indexed, so they stay registers).
var<private> n0: vec4<u32>;
var<private> n1: vec4<u32>;
var<private> n2: vec4<u32>;
var<private> n3: vec4<u32>;
var<private> n4: vec4<u32>;
var<private> n5: vec4<u32>;
var<private> n6: vec4<u32>;
var<private> n7: vec4<u32>;
var<private> n8: vec4<u32>;
var<private> n9: vec4<u32>;

fn load_next(wid: u32, j: u32, team: u32, lane: u32) {
    let row = row_of(wid, j / SEGS, team);  // (past the workgroup's rows: past the table, zeros)
    let i   = lane + 32u * (j % SEGS) * SEG;
    n0 = load_word(row, i, 0u);
    n1 = load_word(row, i + 32u, 1u);
    n2 = load_word(row, i + 64u, 2u);
    n3 = load_word(row, i + 96u, 3u);
    n4 = load_word(row, i + 128u, 4u);
    n5 = load_word(row, i + 160u, 5u);
    n6 = load_word(row, i + 192u, 6u);
    n7 = load_word(row, i + 224u, 7u);
    n8 = load_word(row, i + 256u, 8u);
    n9 = load_word(row, i + 288u, 9u);
}

// AHEAD: segment s, whose words are in n0 .. n9, summed while the words of segment j + 1 load.
fn sum_seg_ahead(c: ptr<function, array<vec2<f32>, 4>>, wid: u32, j: u32, team: u32, s: u32, lane: u32,
                 sum2: bool, round_in: bool) {
    let w0 = n0;
    let w1 = n1;
    let w2 = n2;
    let w3 = n3;
    let w4 = n4;
    let w5 = n5;
    let w6 = n6;
    let w7 = n7;
    let w8 = n8;
    let w9 = n9;
    load_next(wid, j + 1u, team, lane);
    sum_seg_words(c, lane + 32u * s * SEG, w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, sum2, round_in);
}

// Sum2's step: (hi, lo) + q with hi = fl(hi + q) and its exact error into lo.
fn sum2_add(acc: vec2<f32>, q: f32) -> vec2<f32> {
    let t = two_sum(acc.x, q);
    return vec2<f32>(t.x, acc.y + t.y);
}

// Max |e| of a row (zero past the table).
fn row_max_of(row: u32) -> f32 {
    if (row < p.n_vocab) { return row_max[row]; }
    return 0.0;
}

// (T, lo) + e h where sigma / 2 <= |T| and |e h| <= |T| (OFFSET_SUM): Fast2Sum with the exact
// product folded in. T' is opaque so that T' - T cannot be simplified to e h.
fn offset_add(acc: vec2<f32>, e: f32, h: f32) -> vec2<f32> {
    let t = opq(fma(e, h, acc.x));
    return vec2<f32>(t, acc.y + fma(e, h, -(t - acc.x)));
}

// The offsets of four chains whose sums of |h| are h_abs and whose |e| are at most m_e: powers of
// two above 2 m_e h_abs (1 + 2^-16) (a zero bound gives 2^-126; no bound above 2^100).
fn offsets_of(h_abs: vec4<f32>, m_e: f32) -> vec4<f32> {
    let b = min((2.0 * m_e) * h_abs * (1.0 + exp2(-16.0)), vec4<f32>(0x1p100f));
    return bitcast<vec4<f32>>((bitcast<vec4<u32>>(b) & vec4<u32>(0x7f800000u)) + vec4<u32>(0x00800000u));
}

// One step of a chain: acc + e.x h.x + e.y h.y.
fn chain(acc: vec2<f32>, e: vec2<f32>, h: vec2<f32>, sum2: bool, round_in: bool) -> vec2<f32> {
    if (sum2 && OFFSET_SUM) { return offset_add(offset_add(acc, e.x, h.x), e.y, h.y); }
    if (sum2) { return sum2_add(sum2_add(acc, e.x * h.x), e.y * h.y); }
    return head_pair_exact(acc, e, h, round_in);
}

// A chain as a double-float pair (sigma: its offset with OFFSET_SUM).
fn chain_df(c: vec2<f32>, sum2: bool, sigma: f32) -> vec2<f32> {
    if (sum2 && OFFSET_SUM) { return two_sum(c.x - sigma, c.y); }
    if (sum2) { return two_sum(c.x, c.y); }
    return c;
}

// Lane 0's total of the team's 32 pairs (the halving tree). Every invocation calls it (barriers
// without TEAM_SG).
fn team_df_sum(lid: u32, lane: u32, a_in: vec2<f32>) -> vec2<f32> {
    var a = a_in;
    if (TEAM_SG && WG_REDUCE_SG) {
        for (var s = 16u; s > 0u; s >>= 1u) {
            a = df_add(a, vec2<f32>(sg_shuffle_xor(a.x, s), sg_shuffle_xor(a.y, s)));
        }
        return a;
    }
    red[lid] = a;
    workgroupBarrier();
    for (var s = 16u; s > 0u; s >>= 1u) {
        if (lane < s) { red[lid] = df_add(red[lid], red[lid + s]); }
        workgroupBarrier();
    }
    a = red[lid - lane];
    workgroupBarrier();  // (the next row writes red again)
    return a;
}

// Lane 0's total of the team's 32 pairs with subgroup shuffles only (TEAM_SG), for a row summed
// again: the control flow is uniform in the subgroup (the decision is lane 0's, shuffled to all).
@diagnostic(off, subgroup_uniformity)
fn team_df_sum_sg(a_in: vec2<f32>) -> vec2<f32> {
    var a = a_in;
    for (var s = 16u; s > 0u; s >>= 1u) {
        a = df_add(a, vec2<f32>(sg_shuffle_xor(a.x, s), sg_shuffle_xor(a.y, s)));
    }
    return a;
}

// The lane's pair of `row` by Sum2 chains (as head_exact_form 1 sums it), its words read again.
fn row_sum2(row: u32, lane: u32) -> vec2<f32> {
    let words = K / 8u;
    var c = array<vec2<f32>, 4>();
    if (row < p.n_vocab) {
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (i >= words) { break; }
            let w  = head[row * words + i];
            let ha = hs[2u * i];
            let hb = hs[2u * i + 1u];
            let e0 = unpack2x16float(w.x);
            let e1 = unpack2x16float(w.y);
            let e2 = unpack2x16float(w.z);
            let e3 = unpack2x16float(w.w);
            c[0] = sum2_add(sum2_add(c[0], e0.x * ha.x), e0.y * ha.y);
            c[1] = sum2_add(sum2_add(c[1], e1.x * ha.z), e1.y * ha.w);
            c[2] = sum2_add(sum2_add(c[2], e2.x * hb.x), e2.y * hb.y);
            c[3] = sum2_add(sum2_add(c[3], e3.x * hb.z), e3.y * hb.w);
        }
    }
    return df_add(df_add(two_sum(c[0].x, c[0].y), two_sum(c[1].x, c[1].y)),
                  df_add(two_sum(c[2].x, c[2].y), two_sum(c[3].x, c[3].y)));
}

// Whether every value within err of the pair t rounds to the f32 that t rounds to (and it is finite).
fn certain(t: vec2<f32>, err: f32) -> bool {
    let f = df_to_f32(t);
    return abs(f) <= 3.0e38 && df_to_f32(df_add_f(t, err)) == f && df_to_f32(df_add_f(t, -err)) == f;
}

// The team's total of `row` (t: the offset sums' total, every lane's with lane 0's bits), or the
// Sum2 total where lane 0 could not certify t (redo). Every invocation calls it (barriers without
// TEAM_SG).
fn offset_total(lid: u32, lane: u32, team: u32, row: u32, redo: bool, t: vec2<f32>) -> vec2<f32> {
    var total = t;
    if (TEAM_SG && WG_REDUCE_SG) {
        if (sg_shuffle(select(0.0, 1.0, redo), 0u) != 0.0) { total = team_df_sum_sg(row_sum2(row, lane)); }
    } else {
        if (lane == 0u) { redo_team[team] = select(0u, 1u, redo); }
        workgroupBarrier();
        if (lid == 0u) {
            var any = 0u;
            for (var k = 0u; k < WG / 32u; k++) { any |= redo_team[k]; }
            redo_any = any;
        }
        if (workgroupUniformLoad(&redo_any) != 0u) {
            let t2 = team_df_sum(lid, lane, row_sum2(row, lane));
            if (redo_team[team] != 0u) { total = t2; }
        }
    }
    return total;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    n_groups   = groups.x;
    let team   = lid / 32u;
    let lane   = lid % 32u;
    let round_in = p.round_input != 0u;
    let sum2   = round_in;  // Sum2 chains (see above)
    let n_segs = ITERS * SEGS;
    if (AHEAD) { load_next(wid.x, 0u, team, lane); }  // issued before h is staged
    let offset = sum2 && OFFSET_SUM;
    var next_m = 0.0;  // the next row's max |e| (OFFSET_SUM)
    if (offset) { next_m = row_max_of(row_of(wid.x, 0u, team)); }
    stage_head_input(lid);
    let words = K / 8u;
    var h_abs = vec4<f32>(0.0);  // sum |h| over each chain's elements (OFFSET_SUM)
    var err_per_m = 0.0;  // E / m_e (see above)
    if (offset) {
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (i < words) {
                let ha = abs(hs[2u * i]);
                let hb = abs(hs[2u * i + 1u]);
                h_abs += vec4<f32>(ha.x + ha.y, ha.z + ha.w, hb.x + hb.y, hb.z + hb.w);
            }
        }
        let l1 = team_df_sum(lid, lane, vec2<f32>(h_abs.x + h_abs.y + h_abs.z + h_abs.w, 0.0)).x;
        let n  = f32(2u * PER_LANE);
        err_per_m = l1 * (4.01 * n * n * exp2(-48.0) + exp2(-39.0));
    }
    var sigma = vec4<f32>(0.0);
    var row_m = 0.0;  // the row's max |e|
    var bv = 0.0;  // the team's best (value, row) so far (lane 0)
    var bi = 0xffffffffu;
    var c  = array<vec2<f32>, 4>();
    for (var j = 0u; j < n_segs; j++) {
        let rr = j / SEGS;
        let s  = j % SEGS;
        if (offset && s == 0u) {  // a new row: its chains start at its offset; the next row's max asked for
            row_m = next_m;
            sigma = offsets_of(h_abs, row_m);
            c     = array<vec2<f32>, 4>(vec2<f32>(sigma.x, 0.0), vec2<f32>(sigma.y, 0.0), vec2<f32>(sigma.z, 0.0),
                                        vec2<f32>(sigma.w, 0.0));
            next_m = row_max_of(row_of(wid.x, rr + 1u, team));
        }
        if (AHEAD) {
            sum_seg_ahead(&c, wid.x, j, team, s, lane, sum2, round_in);
        } else {
            sum_seg_direct(&c, row_of(wid.x, rr, team), s, lane, sum2, round_in);
        }
        if (s + 1u < SEGS) { continue; }
        let a = df_add(df_add(chain_df(c[0], sum2, sigma.x), chain_df(c[1], sum2, sigma.y)),
                       df_add(chain_df(c[2], sum2, sigma.z), chain_df(c[3], sum2, sigma.w)));
        c = array<vec2<f32>, 4>();  // a new sum per row
        var t   = team_df_sum(lid, lane, a);
        let row = row_of(wid.x, rr, team);
        if (offset) { t = offset_total(lid, lane, team, row, lane == 0u && !certain(t, row_m * err_per_m), t); }
        if (lane == 0u && row < p.n_vocab) {
            let l = df_to_f32(t);
            logits[p.out_offset + row] = l;
            if (beats(l, row, bv, bi)) {  // (rows come in increasing order: ties keep the first)
                bv = l;
                bi = row;
            }
        }
    }
    if (lane == 0u) { partial[p.partial_offset + wid.x * 8u + team] = vec2<u32>(bitcast<u32>(bv), bi); }
}
