requires packed_4x8_integer_dot_product;

// lm_head_i8_argmax: greedy decoding's LM head over the int8 copy of an F16 table
// (head_i8_pack.wgsl), which is half the bytes: per row an f32 value f and a bound B on its
// distance to the exact head's logit, in the form lm_head_f16_decode.wgsl's ARGMAX_ONLY writes them,
// so argmax_exact.wgsl then recomputes exactly (from the F16 table) the few rows with
// f + B >= max (f - B), and the greedy token is the exact head's.
//
// h = rms_norm(x) * nw (NORM), optionally rounded to f16, is staged as lib/head_input.wgsl does,
// then put on a 16-bit grid: H = round(h / S), S = max|h| / 32639, split as H = 256 a + b with a
// and b int8, so that a row's sum is two exact integer dot4 sums: f = (s S) (256 sum q a + sum q b).
// With eta = h - S H (|eta_i| <= 0.51 S, so ||eta|| <= 0.51 S sqrt(K)) and the row's (s, c, s ||q||):
//   |f - exact| <= ||e - s q|| ||h|| + s ||q|| ||eta|| + (the rounding of f and of the exact logit)
//               <= c (||h|| + ||eta||) + s ||q|| ||eta||  =  B
// (head_i8_pack.wgsl's c already holds ||e - s q||, (K + 3) u s ||q|| for roundings and u ||e||.)
//
//   q8: [n_vocab][K / 16] vec4<u32> (16 int8 each)   info: [n_vocab] (s, c, s ||q||, 0) f32
//   x: [K] f32   nw: [K] f32   logits: [n_vocab] f32 (f)   partial: [n_vocab] (bits(B), 0), then
//   [workgroups] (bits(max of f - B over the workgroup's rows), index)
// Bindings: 0 q8 (read), 1 info (read), 2 x (read), 3 nw (read), 4 logits (read_write),
//           5 partial (read_write), 6 head (read), 7 exact_out (read_write), 8 params (uniform)
// Dispatch: (groups, 1, 1), any number of workgroups (the host takes two per compute unit), which
// the table's team rows of 8 rows are dealt to in turn (row_of): team row rr of workgroup w is rows
// (rr groups + w) 8 .. + 7, ITERS team rows per workgroup. 256 threads = 8 teams of 32 lanes; team t
// computes row 8 (rr groups + w) + t of each team row; lane l reads vec4 words l, l + 32, ... of
// each row. TEAM_SG (subgroups of exactly 32 invocations, so a team is a subgroup): each row's lanes
// are summed by one subgroupAdd and the team keeps its best row in registers, so the stream has no
// barrier; otherwise each block of 8 team rows (64 rows) is reduced in workgroup memory.
// H100 tg128 (three alternating rounds each, one machine per call): 909.2-912.0 tokens/s against
// 905.7-909.6 for blocks of 64 rows per workgroup; three workgroups per unit 899.3-901.0, one
// 894.1-896.0. (Each workgroup on a contiguous slice of the table rather than the workgroups
// sweeping it together: 716 against 725-728 on an H100. Each lane also touching rows ahead, so that
// more bytes are in flight: 890.6-894.0 against 905.7-909.6.)
//
// EXACT_TAIL (greedy decoding): the kernel also does argmax_exact.wgsl's work, for its own rows, so
// that dispatch goes. While streaming, each team (or the block reduction) publishes its best lower
// bound f - B with an atomicMax into threshold slot p.thr_slot of `exact_out`; at the end every
// workgroup reads that slot, T' (the largest bound published so far: a lower bound of some row's
// exact logit, whatever the other workgroups have reached), lists its rows with f + B >= T', and
// recomputes them exactly (lib/head_exact_row.wgsl, argmax_exact's order and bits, with h's words
// loaded again from x and nw: h staged in workgroup memory, 10 KB more per workgroup, made the
// stream ~1.6% slower on an H100). A row below T' is below some row's exact logit, so the global
// best (largest, lowest index on ties) is among the workgroups' listed rows, and each workgroup
// writes its best (value bits, index) to exact_out[2 + 2 w] for argmax_final.wgsl /
// embed_argmax.wgsl. Workgroup 0 first zeroes the other slot (the lowest key: every row a
// candidate) for the next token's head. exact_out: u32 [slot 0, slot 1, then (value bits, index)
// per workgroup].

// #include "lib/numerics.wgsl"
// #include "lib/inv_rms.wgsl"
// #include "lib/best_index.wgsl"
// #include "lib/head_input.wgsl"
// #include "lib/head_exact_row.wgsl"
// #include "lib/head_params.wgsl"

// #include "lib/dot4_native.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/sum_squares.wgsl"

override K: u32 = 2560u;      // elements per row, a multiple of 16, at most 4096
override NORM: bool = true;   // h = rms_norm(x) * nw first
override ROUND_IN: bool = false;  // h rounded to f16 first (lib/head_input.wgsl)
override PER_LANE: u32 = (K / 16u + 31u) / 32u;  // vec4 loads per lane per row (<= 8)
override WG: u32 = 256u;      // fixed (the teams; lib/inv_rms.wgsl and lib/best_index.wgsl size by it)
override TEAM_SG: bool = false;  // the host sets it when subgroups are exactly 32 invocations
override EXACT_TAIL: bool = false;
override TABLE_F32: bool = false;  // head is an f32 table (lib/head_exact_row.wgsl)
// Team rows per workgroup (without TEAM_SG a multiple of 8: the blocks that are reduced together).
override ITERS: u32 = 8u;
// The grid from g = x nw rather than from h = rms_norm(x) nw rounded to f16: the grid's
// scale needs only max |g| and the bound ||g||, one workgroup reduction of both together, and the
// norm factor inv, which f and B need only when the first row is summed, is computed after the grid,
// while that row is on its way. f = inv (s S) (256 sum q a + sum q b) with H = round(g / S) now, and
// the exact head's h differs from inv g by its own roundings:
//   |h_i - inv g_i| <= rho inv |g_i| + tau,  rho = 2^-11 + 2^-20 (f16, and the f32 products),
//   tau = 2^-25 (f16 subnormals; rho = 2^-20 and tau = 0 without the f16 rounding),
// so with ||e|| <= sq + c (c >= ||e - s q||, sq >= s ||q||: head_i8_pack.wgsl)
//   |f - exact| <= inv (c (||g|| + ||eta||) + sq ||eta||) + (sq + c) (rho inv ||g|| + tau sqrt(K)) = B.
// The extra term widens B by ~5% for rows like 2B4T's (2^-11 ||e|| against c ~ ||e - s q||).
// The lanes' words of the grid are held in registers (the same words for every row a lane visits):
// H200 tg128 955.7-959.5 tokens/s against 954.7-956.5 read from workgroup memory for every row.
var<private> n_groups: u32;  // workgroups in the dispatch


@group(0) @binding(0) var<storage, read> q8: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> info: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> nw: array<f32>;
@group(0) @binding(4) var<storage, read_write> logits: array<f32>;
@group(0) @binding(5) var<storage, read_write> partial: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read> head: array<vec4<u32>>;  // the F16 table (EXACT_TAIL)
@group(0) @binding(7) var<storage, read_write> exact_out: array<atomic<u32>>;  // (EXACT_TAIL) see above
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> red: array<vec2<i32>, 1024>;  // [team][row r][lane % 16]
var<workgroup> h_hi: array<vec4<u32>, K / 16u>;  // a = the high int8 of H, 16 per vec4
var<workgroup> h_lo: array<vec4<u32>, K / 16u>;  // b = H - 256 a

fn load_row(row: u32, lane: u32) -> array<vec4<u32>, 8> {
    var wv: array<vec4<u32>, 8>;
    let words = K / 16u;
    if (row < p.n_vocab) {
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (i < words) { wv[v] = q8[row * words + i]; }
        }
    }
    return wv;
}

// Team `team`'s row rr (0 .. ITERS - 1) of this workgroup; rr = j / 8, team = j % 8 for
// j = 0 .. 8 ITERS - 1 visits the workgroup's rows.
fn row_of(wid: u32, rr: u32, team: u32) -> u32 {
    return (rr * n_groups + wid) * 8u + team;
}

// The 16-bit grid of this invocation's words v (lid + u WG) in h_hi / h_lo, from the workgroup's
// max |v| and (an f32 sum of) sum v^2; returns (||v||, ||eta||, S), bounds from above. Every
// invocation calls it (a barrier).
fn grid_of(lid: u32, v: array<vec4<f32>, 4>, vmax: f32, tot: f32) -> vec3<f32> {
    let inv  = select(32639.0 / vmax, 0.0, vmax == 0.0);
    let step = select(vmax / 32639.0, 0.0, vmax == 0.0);
    for (var u = 0u; u < 4u; u++) {
        let i = lid + u * WG;
        if (i < K / 4u) { stage_grid_word(i, v[u], inv); }
    }
    workgroupBarrier();
    // An f32 sum of K <= 4096 squares is within K u <= 2^-12 of exact: 1 + 2^-8 covers it and sqrt.
    let margin = 1.0 + 1.0 / 256.0;
    return vec3<f32>(sqrt(tot) * margin, 0.51 * step * sqrt(f32(K)) * margin, step);
}

// The grid of g = x nw (NORM; else x) in h_hi / h_lo, from one reduction of max |g| and
// sum g^2; returns (||g||, ||eta||, S) as stage_grid does (bounds from above). With SG32 the norm's
// block sums are published before the same barrier (publish_block_sums_sg) and totalled by
// head_norm_factor after the grid. Every invocation calls it (barriers).
fn stage_grid_g(lid: u32) -> vec3<f32> {
    let words = head_x_nw_words(lid);
    let xs    = words.xs;
    var g     = xs;
    if (NORM) {
        for (var u = 0u; u < 4u; u++) { g[u] = xs[u] * words.ws[u]; }
    }
    var sq = 0.0;
    var mx = 0.0;
    for (var u = 0u; u < 4u; u++) {
        let v = g[u];  // (zero where absent)
        sq += dot(v, v);
        mx = max(mx, max_abs4(v));
    }
    if (NORM && WG_REDUCE_SG && SG32) {
        var s2: array<vec4<f32>, 8>;  // slots 4..7 stay zero, as do absent words
        for (var u = 0u; u < 4u; u++) { s2[u] = squares4(xs[u]); }
        publish_block_sums_sg(lid, s2, (K / 4u + WG - 1u) / WG);
    }
    let ms = wg_max_sum(lid, mx, sq);
    return grid_of(lid, g, ms.x, ms.y);
}

// The norm factor (head_inv, for the exact rows too: inv_rms's bits), after stage_grid_g.
// Every invocation calls it (barriers without SG32).
fn head_norm_factor(lid: u32) -> f32 {
    var inv = 1.0;
    if (NORM) {
        if (WG_REDUCE_SG && SG32) {
            inv = inv_rms_of(block_sums_total_sg(lid, (K + NORM_BLOCK - 1u) / NORM_BLOCK));
        } else {
            inv = inv_rms(lid, p.x_offset);
        }
    }
    head_inv = inv;
    return inv;
}

// stage_grid_g's (||g||, ||eta||, S) with the norm factor as store_row takes them:
// (P, Q, S inv) with B = c P + sq Q (the formula above: the f32 roundings of P and Q are within the
// 2^-8 margins of ||g|| and ||eta||).
fn head_g_norms(n: vec3<f32>, inv: f32) -> vec3<f32> {
    let rho = select(1.0 / 1048576.0, 1.0 / 2048.0 + 1.0 / 1048576.0, ROUND_IN);
    let tau = select(0.0, sqrt(f32(K)) / 33554432.0, ROUND_IN);
    let a3  = rho * (inv * n.x) + tau;
    return vec3<f32>(inv * (n.x + n.y) + a3, inv * n.y + a3, n.z * inv);
}

// Word i of the 16-bit grid of v (scale 1 / inv): H = round(v inv) in [-32639, 32639] as a (h_hi)
// and b (h_lo).
fn stage_grid_word(i: u32, v: vec4<f32>, inv: f32) {
    let hq = vec4<i32>(clamp(round(v * inv), vec4<f32>(-32639.0), vec4<f32>(32639.0)));
    let a  = (hq + vec4<i32>(128)) >> vec4<u32>(8u);
    let b  = hq - a * 256;
    let ab = bitcast<vec4<u32>>(a) & vec4<u32>(0xffu);
    let bb = bitcast<vec4<u32>>(b) & vec4<u32>(0xffu);
    h_hi[i / 4u][i % 4u] = ab.x | (ab.y << 8u) | (ab.z << 16u) | (ab.w << 24u);
    h_lo[i / 4u][i % 4u] = bb.x | (bb.y << 8u) | (bb.z << 16u) | (bb.w << 24u);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    n_groups  = groups.x;
    let team  = lid / 32u;
    let lane  = lid % 32u;
    let words = K / 16u;
    let iters = ITERS;
    var next  = load_row(row_of(wid.x, 0u, team), lane);  // issued before h is staged
    if (EXACT_TAIL && wid.x == 0u && lid == 0u) { atomicStore(&exact_out[1u - p.thr_slot], 0u); }
    // (B = c norms.x + sq norms.y, f = s norms.z (...)): store_row
    var norms = stage_grid_g(lid);  // (||g||, ||eta||, S); the norm factor once the grid is staged

    // This lane's words of the grid (the same for every row it visits) held in registers.
    var ra: array<vec4<u32>, 8>;
    var rb: array<vec4<u32>, 8>;
    for (var v = 0u; v < PER_LANE; v++) {
        let i = min(lane + 32u * v, words - 1u);
        ra[v] = h_hi[i];
        rb[v] = h_lo[i];
    }
    norms = head_g_norms(norms, head_norm_factor(lid));
    let team_sg = TEAM_SG && WG_REDUCE_SG;
    var next_info = vec4<f32>(0.0);  // (team_sg) the next row's info, loaded with its words
    var bv = 0.0;                    // the best (f - B, row) so far: the team's (team_sg, lane 0)
    var bi = 0xffffffffu;            // or the blocks' (invocation 0)
    if (team_sg) { next_info = load_info(row_of(wid.x, 0u, team)); }

    var acc: array<vec2<i32>, 8>;  // (sum q a, sum q b) of the block's rows
    for (var rr = 0u; rr < iters; rr++) {
        let wv = next;
        let sc_row = next_info;
        if (rr + 1u < iters) {
            next = load_row(row_of(wid.x, rr + 1u, team), lane);
            if (team_sg) { next_info = load_info(row_of(wid.x, rr + 1u, team)); }
        }
        var ia = 0;
        var ib = 0;
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (i >= words) { break; }
            let w  = wv[v];
            let ha = ra[v];
            let hb = rb[v];
            ia += dot4_i8(w.x, ha.x) + dot4_i8(w.y, ha.y) + dot4_i8(w.z, ha.z) + dot4_i8(w.w, ha.w);
            ib += dot4_i8(w.x, hb.x) + dot4_i8(w.y, hb.y) + dot4_i8(w.z, hb.z) + dot4_i8(w.w, hb.w);
        }
        if (team_sg) {
            let sum = team_isum(vec2<i32>(ia, ib));  // the row's sums, in every lane of the team
            let row = row_of(wid.x, rr, team);
            if (lane == 0u && row < p.n_vocab) {
                let fb = store_row(row, sc_row, sum, norms);
                if (beats(fb.x - fb.y, row, bv, bi)) {
                    bv = fb.x - fb.y;
                    bi = row;
                }
            }
            if (EXACT_TAIL && lane == 0u && (rr % 8u == 7u || rr + 1u == iters)) { publish_bound(bv, bi); }  // (each block)
            continue;
        }
        acc[rr % 8u] = vec2<i32>(ia, ib);
        if (rr % 8u != 7u) { continue; }

        // The block's 64 rows: lanes summed (integers, exact), values, bounds and the block's best.
        // (Lanes 16..31 first hand their sums to lanes 0..15: half the workgroup memory.)
        if (lane >= 16u) {
            for (var r = 0u; r < 8u; r++) { red[(team * 8u + r) * 16u + lane - 16u] = acc[r]; }
        }
        workgroupBarrier();
        if (lane < 16u) {
            for (var r = 0u; r < 8u; r++) {
                let i = (team * 8u + r) * 16u + lane;
                red[i] = red[i] + acc[r];
            }
        }
        workgroupBarrier();
        for (var s = 8u; s > 0u; s >>= 1u) {
            if (lane < s) {
                for (var r = 0u; r < 8u; r++) {
                    let i = (team * 8u + r) * 16u + lane;
                    red[i] = red[i] + red[i + s];
                }
            }
            workgroupBarrier();
        }
        var rv = 0.0;
        var ri = 0xffffffffu;
        if (lane < 8u) {
            let row = row_of(wid.x, rr - 7u + lane, team);
            if (row < p.n_vocab) {
                let fb = store_row(row, info[row], red[(team * 8u + lane) * 16u], norms);
                rv = fb.x - fb.y;
                ri = row;
            }
        }
        let best = best_index(lid, rv, ri);  // (ends with a barrier before red is written again)
        if (lid == 0u && beats(bitcast<f32>(best.x), best.y, bv, bi)) {
            bv = bitcast<f32>(best.x);
            bi = best.y;
        }
        if (EXACT_TAIL && lid == 0u) { publish_bound(bv, bi); }
    }
    if (EXACT_TAIL) {
        exact_tail(lid, wid.x);
        return;
    }
    // The workgroup's best (f - B, row), for argmax_exact.wgsl's threshold: across the teams, or
    // invocation 0's running best of the blocks.
    var best = vec2<u32>(bitcast<u32>(bv), bi);
    if (team_sg) { best = best_index(lid, bv, bi); }
    if (lid == 0u) { partial[p.partial_offset + p.n_vocab + wid.x] = best; }
}

// A row's info (s, c, s ||q||, 0), or zeros past the table.
fn load_info(row: u32) -> vec4<f32> {
    if (row < p.n_vocab) { return info[row]; }
    return vec4<f32>(0.0);
}

// The row's value f and bound B from its info, its two integer sums and (||h|| + ||eta||, ||eta||,
// S) (head_g_norms' (P, Q, S inv)), stored
// (logits[row] = f, partial[row] = bits(B)) and returned as (f, B).
fn store_row(row: u32, sc: vec4<f32>, sum: vec2<i32>, norms: vec3<f32>) -> vec2<f32> {
    let f = (sc.x * norms.z) * (256.0 * f32(sum.x) + f32(sum.y));
    let b = sc.y * norms.x + sc.z * norms.y;
    partial[p.partial_offset + row] = vec2<u32>(bitcast<u32>(b), 0u);
    logits[p.out_offset + row] = f;
    return vec2<f32>(f, b);
}

// EXACT_TAIL: bound keys in the order of the values (order_key, with -0 taken as +0, so that a row
// whose f + B is -0 still reaches a bound of +0); key 0 is below every value.
fn bound_key(v: f32) -> u32 {
    return order_key(select(v, 0.0, v == 0.0));
}

fn publish_bound(bv: f32, bi: u32) {
    if (bi != 0xffffffffu) { atomicMax(&exact_out[p.thr_slot], bound_key(bv)); }
}

var<workgroup> tail_n: atomic<u32>;
var<workgroup> tail_n_plain: u32;
var<workgroup> tail_rows: array<u32, 256>;

// EXACT_TAIL: this workgroup's rows with f + B >= T' recomputed exactly; its best to exact_out.
// (More than 256 such rows, a degenerate table: every row of the workgroup, slow but exact.)
// Every invocation calls it (barriers).
fn exact_tail(lid: u32, wid: u32) {
    if (lid == 0u) { atomicStore(&tail_n, 0u); }
    storageBarrier();  // the workgroup's f, B (written by each team's lane 0) and bounds
    workgroupBarrier();
    let t_key = atomicLoad(&exact_out[p.thr_slot]);
    let rows  = 8u * ITERS;
    for (var j = lid; j < rows; j += WG) {
        let row = row_of(wid, j / 8u, j % 8u);  // (every row of the workgroup once)
        if (row < p.n_vocab) {
            let f = logits[p.out_offset + row];
            let b = bitcast<f32>(partial[p.partial_offset + row].x);
            if (bound_key(f + b) >= t_key) {
                let slot = atomicAdd(&tail_n, 1u);
                if (slot < 256u) { tail_rows[slot] = row; }
            }
        }
    }
    workgroupBarrier();
    if (lid == 0u) { tail_n_plain = atomicLoad(&tail_n); }
    let nc       = workgroupUniformLoad(&tail_n_plain);
    let listed   = nc <= 256u;
    let n        = select(rows, nc, listed);
    var bv = 0.0;
    var bi = 0xffffffffu;
    for (var c = 0u; c < n; c++) {
        var row = row_of(wid, c / 8u, c % 8u);
        if (listed) { row = tail_rows[c]; }
        let v = exact_row_reloading_h(lid, min(row, p.n_vocab - 1u));
        if (row < p.n_vocab && beats(v, row, bv, bi)) {
            bv = v;
            bi = row;
        }
    }
    if (lid == 0u) {
        atomicStore(&exact_out[2u + 2u * wid], bitcast<u32>(bv));
        atomicStore(&exact_out[3u + 2u * wid], bi);
    }
}
