// One token's int8 activations staged in workgroup memory, for the decode (T = 1) matmul kernels.
//
// NORM = true, the fused prologue: a = int8-quantize(rms_norm(x) * nw), computed by every workgroup
// from the f32 x itself with exactly the numerics of rms_norm_quant.wgsl (the CPU's rms_norm_row +
// quantize_act_row: f32 squares in the block-halving order, correctly rounded mean, root and
// 127 / max, y = (x nw) inv), so the separate norm dispatch disappears. NORM = false: a previous rms_norm_quant's
// words are copied. With STATS_IN the sum of squares comes from the block sums that the kernel which
// wrote x left (the norm statistics, lib/sum_squares.wgsl): only their total is left to add.
//
// Thread i owns activation words i, i + WG, ... (4 elements each, at most 8 words: k <= 32 WG).
// The including kernel includes lib/wg_reduce.wgsl and lib/sum_squares.wgsl and declares `override WG` (a power of two),
// `override K` (the largest k it stages, a multiple of 64), `override NORM`, a uniform `p` with
// `eps`, and where the inputs come from (lib/decode_io.wgsl):
//   stage_x4(j) -> vec4<f32>   x elements 4j .. 4j + 3             (NORM)
//   stage_nw4(j) -> vec4<f32>  norm weights 4j .. 4j + 3           (NORM)
//   stage_qword(j) -> u32      int8 activation word j              (!NORM)
//   stage_qscale() -> f32      its activation scale                (!NORM)
//   stage_stats(b) -> f32      the block sum of squares of x's block b (STATS_IN)

// 16 int8 per vec4, ordered for lib/ternary_decode.wgsl's row_dot: the 16 activations that word q
// of weight vec4 i multiplies (elements 64 i + 16 q .. 64 i + 16 q + 15) are vec4 q (k / 64) + i
// (act_slot). So the lanes of a row, which read neighbouring weight vec4s, read neighbouring
// activation vec4s, each lane of a quarter warp on its own banks. (In element order, vec4 4 i + q,
// lanes 2 apart hit the same banks: 2-way conflicts with 4 lanes per row, 4-way with 16.)
var<workgroup> acts: array<vec4<u32>, K / 16u>;

// The vec4 of `acts` that holds activation word j (elements 4 j .. 4 j + 3) of a k-element vector,
// at component j % 4.
fn act_slot(j: u32, k: u32) -> u32 {
    return ((j / 4u) % 4u) * (k / 64u) + j / 16u;
}

// sum(a) over the whole vector, taken once where the fused prologue quantizes it (with
// NORM): each invocation adds its codes, each subgroup its invocations' (one atomic add per subgroup,
// per invocation without subgroups), and after the quantization's barrier every invocation holds the
// total in `acts_total`. The dots (lib/ternary_decode.wgsl) then leave out the 4 dot4s with ones per
// weight word that summed a in every lane, and each row's first lane subtracts the total instead
// (sum(code * a) - sum(a), exact in integers). H200 tg128 863.1-865.1 tokens/s against 854.5-855.6
// with every lane summing a (three alternating rounds, medians of ten).
var<workgroup> acts_total_wg: atomic<i32>;
var<private> acts_total: i32;

fn asum_once() -> bool {
    return NORM;
}

// The invocation's share of sum(a) into acts_total_wg (every invocation calls it, in uniform
// control flow; acts_total_wg was zeroed before a barrier that precedes this).
fn add_acts_total(lid: u32, part: i32) {
    let s  = team_isum(vec2<i32>(part, 0)).x;   // the subgroup's sum (the part itself without subgroups)
    let sg = select(sg_size(), 32u, SG_EXACT32);  // (a constant where subgroups are 32 wide)
    if (lid % sg == 0u) { atomicAdd(&acts_total_wg, s); }
}

// The sum of squares from x's block sums (written by the kernel that wrote x) instead of from x.
override STATS_IN: bool = false;

// The words an invocation owns at most (K / 4 words over WG invocations, at most 8): the loops stop
// there, so that the slots past it are constant zeros.
override STAGE_U: u32 = (K / 4u + WG - 1u) / WG;

// This invocation's words of x and of the norm weights (NORM; nothing otherwise): the fused
// prologue's loads, which a kernel issues before its weight loads (the norm is the longer chain, so
// its inputs go first: H100 tg128 486-488 tokens/s, 476-478 with the weights first).
// With STATS_IN also its block sums: blocks lane, lane + 32, ... of its 32-invocation team (SG32,
// lib/sum_squares.wgsl: blocks_total_team), or block lid (blocks_total).
struct StageInput {
    xs: array<vec4<f32>, 8>,
    ws: array<vec4<f32>, 8>,
    st: array<f32, 8>,
}

fn stage_load(lid: u32, k: u32) -> StageInput {
    var in: StageInput;
    if (!NORM) { return in; }
    if (STATS_IN) {
        let nb = k / NORM_BLOCK;
        if (WG_REDUCE_SG && SG32) {
            for (var i = 0u; i < 8u; i++) {
                let b = lid % 32u + 32u * i;
                if (b < nb) { in.st[i] = stage_stats(b); }
            }
        } else if (lid < nb) {
            in.st[0] = stage_stats(lid);
        }
    }
    for (var i = 0u; i < STAGE_U; i++) {
        let j = lid + i * WG;
        if (j < k / 4u) {
            in.xs[i] = stage_x4(j);
            in.ws[i] = stage_nw4(j);
        }
    }
    return in;
}

// x's sum of squares in the block-halving order (every invocation calls it: barriers): from the
// block sums stage_load() read (STATS_IN); else from x's words in registers (SG32,
// sum_squares_words_sg), or with invocation b summing block b (its 8 words, read again: x is in the
// cache) and the workgroup adding the blocks (k <= 32 WG).
fn stage_sum_squares(lid: u32, k: u32, in: StageInput) -> f32 {
    if (STATS_IN) {
        if (WG_REDUCE_SG && SG32) { return blocks_total_team(lid, in.st); }
        return blocks_total(lid, in.st[0]);
    }
    if (WG_REDUCE_SG && SG32) {
        var sq: array<vec4<f32>, 8>;  // (stage_load leaves absent words zero)
        for (var i = 0u; i < STAGE_U; i++) { sq[i] = squares4(in.xs[i]); }
        return sum_squares_words_sg(lid, sq, STAGE_U, k / NORM_BLOCK);
    }
    var s = 0.0;
    if (lid < k / NORM_BLOCK) {
        var w: array<vec4<f32>, 8>;
        for (var r = 0u; r < 8u; r++) { w[r] = squares4(stage_x4(8u * lid + r)); }
        s = block_sum_words(w);
    }
    return blocks_total(lid, s);
}

// Fills `acts` with the k activations (every invocation must call it: it has barriers) and
// returns the activation scale.
fn stage_activations(lid: u32, k: u32) -> f32 {
    return stage_activations_from(lid, k, stage_load(lid, k));
}

// The same from inputs that stage_load() returned.
fn stage_activations_from(lid: u32, k: u32, in: StageInput) -> f32 {
    if (NORM) { return stage_norm_quant(lid, k, in); }
    return stage_copy(lid, k);
}

// The int8 words as they are (!NORM).
fn stage_copy(lid: u32, k: u32) -> f32 {
    for (var j = lid; j < k / 4u; j += WG) {
        acts[act_slot(j, k)][j % 4u] = stage_qword(j);
    }
    workgroupBarrier();
    return stage_qscale();
}

// The fused prologue (NORM): y = (x * nw) * inv with inv the norm factor, so max |y| =
// fl(max |g| inv) exactly for g = x * nw (rounding is monotonic and inv > 0), and the max of |g| is
// reduced while inv is computed: the max's barrier waits beside inv's chain instead of after it,
// and after inv only y = g inv and the codes remain (the same bits as inv first, then y and max |y|).
// Two H200s (tg128, medians of ten, four alternating rounds per call): 997.2-1,002.4 tokens/s
// against 972.7-998.8, and 998.4-1,001.4 against 990.6-993.3 with inv first.
fn stage_norm_quant(lid: u32, k: u32, in: StageInput) -> f32 {
    let n_words = k / 4u;
    if (asum_once() && lid == 0u) { atomicStore(&acts_total_wg, 0); }  // (barriers follow before the adds)
    var gs: array<vec4<f32>, 8>;
    var m = 0.0;
    for (var i = 0u; i < STAGE_U; i++) {
        let j = lid + i * WG;
        if (j < n_words) {
            let g = in.xs[i] * in.ws[i];
            gs[i] = g;
            m = max(m, max_abs4(g));
        }
    }
    var gmax: f32;
    var inv: f32;
    if (wg_max_split()) {  // the max's barrier wait overlaps inv's chain
        wg_umax_publish(lid, bitcast<u32>(m));
        inv = inv_rms_from(stage_sum_squares(lid, k, in), k, p.eps);
        workgroupBarrier();
        gmax = bitcast<f32>(umax_of_slots(lid));
    } else {
        gmax = wg_max_nonneg(lid, m);
        inv = inv_rms_from(stage_sum_squares(lid, k, in), k, p.eps);
    }
    let amax = gmax * inv;
    let qs   = act_scale_of_max(amax);
    for (var i = 0u; i < STAGE_U; i++) { gs[i] = gs[i] * inv; }
    store_quantized(lid, n_words, gs, qs);
    return qs;
}

// The int8 word of 4 quantized values y * qs, from lib/numerics.wgsl's i8_codes (the codes of
// clamp(round()) without round() and a conversion to i32: two quarter-rate operations per element
// on NVIDIA, on every decode prologue's path; H200 tg128 868.6-872.9 tokens/s against 856.9-857.6).
fn quantize_word(y: vec4<f32>, qs: f32) -> u32 {
    let b = i8_codes(y * qs);
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

// acts = int8(clamp(round(y * qs))) for this thread's words of y, then the barrier (and with
// the fused prologue the sum of all codes in acts_total).
fn store_quantized(lid: u32, n_words: u32, ys: array<vec4<f32>, 8>, qs: f32) {
    var part = 0;
    for (var i = 0u; i < STAGE_U; i++) {
        let j = lid + i * WG;
        if (j < n_words) {
            let word = quantize_word(ys[i], qs);
            acts[act_slot(j, 4u * n_words)][j % 4u] = word;
            if (asum_once()) { part += dot4_i8(word, 0x01010101u); }
        }
    }
    if (asum_once()) { add_acts_total(lid, part); }
    workgroupBarrier();
    if (asum_once()) { acts_total = atomicLoad(&acts_total_wg); }
}
