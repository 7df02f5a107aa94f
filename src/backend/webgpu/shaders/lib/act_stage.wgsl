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
// `eps`, and where the inputs come
// from (lib/decode_io.wgsl for the one-matmul kernels, the layer kernel its own):
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

// sum(a) over the whole vector, taken once where the fused prologue quantizes it (ASUM_ONCE with
// NORM): each invocation adds its codes, each subgroup its invocations' (one atomic add per subgroup,
// per invocation without subgroups), and after the quantization's barrier every invocation holds the
// total in `acts_total`. The dots (lib/ternary_decode.wgsl) then leave out the 4 dot4s with ones per
// weight word that summed a in every lane, and each row's first lane subtracts the total instead
// (sum(code * a) - sum(a), exact in integers).
// The layer kernel, whose matmul phases stage words quantized elsewhere, sets ASUM_ONCE false.
override ASUM_ONCE: bool = true;
var<workgroup> acts_total_wg: atomic<i32>;
var<private> acts_total: i32;

fn asum_once() -> bool {
    return ASUM_ONCE && NORM;
}

// The invocation's share of sum(a) into acts_total_wg (every invocation calls it, in uniform
// control flow; acts_total_wg was zeroed before a barrier that precedes this).
fn add_acts_total(lid: u32, part: i32) {
    let s  = team_isum(vec2<i32>(part, 0)).x;   // the subgroup's sum (the part itself without subgroups)
    let sg = select(sg_size(), 32u, SG_EXACT32);  // (a constant where subgroups are 32 wide)
    if (lid % sg == 0u) { atomicAdd(&acts_total_wg, s); }
}

// A timing aid (results are wrong when set; $TERN_WEBGPU_CONST=NORM_STOP=n): the fused prologue
// skips what follows the loads of x and nw (1), the sum of squares (2) or the max (3), and
// quantizes with a scale that still depends on what it computed. (Stops inside the max, 4-7, were
// removed: their wrong values moved data-dependent paths and overstated the max's cost, see
// src/backend/webgpu/README.md.) 2 and 3 stop the schedule of G_ORDER = false.
override NORM_STOP: u32 = 0u;

// Whether the decode kernels issue the loads of x and the norm weights before their weight loads
// (the norm is the longer chain, so its inputs go first), or after them. Measured on an H100:
// tg128 486-488 tokens/s first, 476-478 after (alternating runs without a slow repetition).
override X_FIRST: bool = true;

// The sum of squares from x's block sums (written by the kernel that wrote x) instead of from x.
override STATS_IN: bool = false;

// The words an invocation owns at most (K / 4 words over WG invocations, at most 8): the loops stop
// there, so that the slots past it are constant zeros.
override STAGE_U: u32 = (K / 4u + WG - 1u) / WG;

// This invocation's words of x and of the norm weights (NORM; nothing otherwise): the fused
// prologue's loads, which a kernel may issue before its other loads (X_FIRST).
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

// The fused prologue (NORM).
fn stage_norm_quant(lid: u32, k: u32, in: StageInput) -> f32 {
    let n_words = k / 4u;

    // x and the norm weights in registers (stage_load).
    var xs = in.xs;
    let ws = in.ws;
    if (asum_once() && lid == 0u) { atomicStore(&acts_total_wg, 0); }  // (barriers follow before the adds)
    if (NORM_STOP == 1u) {
        return stage_stopped(lid, n_words, xs, ws, 1.0);
    }
    if (G_ORDER) { return stage_norm_quant_g(lid, k, in); }
    let inv = inv_rms_from(stage_sum_squares(lid, k, in), k, p.eps);
    if (NORM_STOP == 2u) {
        return stage_stopped(lid, n_words, xs, ws, inv);
    }

    // y = (x * nw) * inv (two roundings, as the CPU) and max |y|.
    var m = 0.0;
    for (var i = 0u; i < STAGE_U; i++) {
        let j = lid + i * WG;
        if (j < n_words) {
            let y = (xs[i] * ws[i]) * inv;
            xs[i] = y;
            m = max(m, max_abs4(y));
        }
    }
    let amax = wg_max_nonneg(lid, m);
    if (NORM_STOP == 3u) {
        store_quantized(lid, n_words, xs, amax);
        return amax;
    }
    let qs   = act_scale_of_max(amax);

    store_quantized(lid, n_words, xs, qs);
    return qs;
}

// The prologue's schedule (the same bits either way): y = (x * nw) * inv, so max |y| = fl(max |g| inv)
// exactly for g = x * nw (rounding is monotonic and inv > 0), and G_ORDER reduces max |g| while inv
// is computed: the max's barrier waits beside inv's chain instead of after it, and after inv only
// y = g inv and the codes remain. false: inv first, then y and max |y| (a tuning aid). Measured on
// two H200s (tg128, medians of ten, four alternating rounds per call): 997.2-1,002.4 tokens/s
// against 972.7-998.8 (992.1-998.8 without a slow round), and 998.4-1,001.4 against 990.6-993.3.
override G_ORDER: bool = true;

fn stage_norm_quant_g(lid: u32, k: u32, in: StageInput) -> f32 {
    let n_words = k / 4u;
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

// Whether the codes come from lib/numerics.wgsl's i8_codes (the same codes without round() and a
// conversion to i32: two quarter-rate operations per element on NVIDIA, on every decode prologue's
// path, 6,912 elements in each of the down projection's workgroups) or from those.
override QUANT_MAGIC: bool = true;

// The int8 word of 4 quantized values y * qs.
fn quantize_word(y: vec4<f32>, qs: f32) -> u32 {
    var b: vec4<u32>;
    if (QUANT_MAGIC) {
        b = i8_codes(y * qs);
    } else {
        let c = vec4<i32>(clamp(round(y * qs), vec4<f32>(-128.0), vec4<f32>(127.0)));
        b = vec4<u32>(bitcast<vec4<u32>>(c) & vec4<u32>(0xffu));
    }
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

// acts = int8(clamp(round(y * qs))) for this thread's words of y, then the barrier (and with
// ASUM_ONCE the sum of all codes in acts_total).
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

// NORM_STOP's early end: words of x * nw * f (values that depend on what was computed), returns f.
fn stage_stopped(lid: u32, n_words: u32, xs: array<vec4<f32>, 8>, ws: array<vec4<f32>, 8>, f: f32) -> f32 {
    var ys: array<vec4<f32>, 8>;
    for (var i = 0u; i < STAGE_U; i++) { ys[i] = xs[i] * ws[i]; }
    workgroupBarrier();  // (acts_total_wg's zero before the adds)
    store_quantized(lid, n_words, ys, f);
    return f;
}
