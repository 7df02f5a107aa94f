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
// Bindings: 0 head (read, vec4<u32>), 1 x (read), 2 nw (read; any buffer when NORM = false),
//           3 logits (read_write), 4 partial (read_write), 5 params (uniform, lib/head_params.wgsl)
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
// Which of the two is a pipeline constant (ROUND_IN), so the other is compiled out: read from the
// uniform (p.round_input), both forms were in the loop, and the head took 281.5 us per token against
// 219.4 (H200, GPU profile of 128 top-p tokens; the same bits).

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
override ROUND_IN: bool = false; // h is rounded to f16 (lib/head_input.wgsl)

@group(0) @binding(0) var<storage, read> head: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> nw: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> red: array<vec2<f32>, WG>;  // the lanes' sums (without TEAM_SG)
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
fn sum_word(c: ptr<function, array<vec2<f32>, 4>>, w: vec4<u32>, i: u32, v: u32, sum2: bool) {
    if (v >= SEG || i >= K / 8u) { return; }
    let ha = hs[2u * i];
    let hb = hs[2u * i + 1u];
    (*c)[0] = chain((*c)[0], unpack2x16float(w.x), ha.xy, sum2);
    (*c)[1] = chain((*c)[1], unpack2x16float(w.y), ha.zw, sum2);
    (*c)[2] = chain((*c)[2], unpack2x16float(w.z), hb.xy, sum2);
    (*c)[3] = chain((*c)[3], unpack2x16float(w.w), hb.zw, sum2);
}

// A segment's words w0 .. w9 (word i + 32 v in wv), summed in order.
fn sum_seg_words(c: ptr<function, array<vec2<f32>, 4>>, i: u32, w0: vec4<u32>, w1: vec4<u32>, w2: vec4<u32>,
                 w3: vec4<u32>, w4: vec4<u32>, w5: vec4<u32>, w6: vec4<u32>, w7: vec4<u32>, w8: vec4<u32>,
                 w9: vec4<u32>, sum2: bool) {
    sum_word(c, w0, i, 0u, sum2);
    sum_word(c, w1, i + 32u, 1u, sum2);
    sum_word(c, w2, i + 64u, 2u, sum2);
    sum_word(c, w3, i + 96u, 3u, sum2);
    sum_word(c, w4, i + 128u, 4u, sum2);
    sum_word(c, w5, i + 160u, 5u, sum2);
    sum_word(c, w6, i + 192u, 6u, sum2);
    sum_word(c, w7, i + 224u, 7u, sum2);
    sum_word(c, w8, i + 256u, 8u, sum2);
    sum_word(c, w9, i + 288u, 9u, sum2);
}

// Segment s of the lane's words of `row`, all loads issued before the first sum.
fn sum_seg_direct(c: ptr<function, array<vec2<f32>, 4>>, row: u32, s: u32, lane: u32, sum2: bool) {
    let i = lane + 32u * s * SEG;
    sum_seg_words(c, i, load_word(row, i, 0u), load_word(row, i + 32u, 1u), load_word(row, i + 64u, 2u),
                  load_word(row, i + 96u, 3u), load_word(row, i + 128u, 4u), load_word(row, i + 160u, 5u),
                  load_word(row, i + 192u, 6u), load_word(row, i + 224u, 7u), load_word(row, i + 256u, 8u),
                  load_word(row, i + 288u, 9u), sum2);
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
                 sum2: bool) {
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
    sum_seg_words(c, lane + 32u * s * SEG, w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, sum2);
}

// Sum2's step: (hi, lo) + q with hi = fl(hi + q) and its exact error into lo.
fn sum2_add(acc: vec2<f32>, q: f32) -> vec2<f32> {
    let t = two_sum(acc.x, q);
    return vec2<f32>(t.x, acc.y + t.y);
}

// One step of a chain: acc + e.x h.x + e.y h.y.
fn chain(acc: vec2<f32>, e: vec2<f32>, h: vec2<f32>, sum2: bool) -> vec2<f32> {
    if (sum2) { return sum2_add(sum2_add(acc, e.x * h.x), e.y * h.y); }
    return head_pair_exact(acc, e, h);
}

// A chain as a double-float pair.
fn chain_df(c: vec2<f32>, sum2: bool) -> vec2<f32> {
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

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    n_groups   = groups.x;
    let team   = lid / 32u;
    let lane   = lid % 32u;
    let sum2   = ROUND_IN;  // Sum2 chains (see above)
    let n_segs = ITERS * SEGS;
    if (AHEAD) { load_next(wid.x, 0u, team, lane); }  // issued before h is staged
    stage_head_input(lid);
    var bv = 0.0;  // the team's best (value, row) so far (lane 0)
    var bi = 0xffffffffu;
    var c  = array<vec2<f32>, 4>();
    for (var j = 0u; j < n_segs; j++) {
        let rr = j / SEGS;
        let s  = j % SEGS;
        if (AHEAD) {
            sum_seg_ahead(&c, wid.x, j, team, s, lane, sum2);
        } else {
            sum_seg_direct(&c, row_of(wid.x, rr, team), s, lane, sum2);
        }
        if (s + 1u < SEGS) { continue; }
        let a = df_add(df_add(chain_df(c[0], sum2), chain_df(c[1], sum2)),
                       df_add(chain_df(c[2], sum2), chain_df(c[3], sum2)));
        c = array<vec2<f32>, 4>();  // a new sum per row
        let t   = team_df_sum(lid, lane, a);
        let row = row_of(wid.x, rr, team);
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
