// The body of attention.wgsl as a function, attend(lid, h, t): see attention.wgsl for the algorithm
// and its numerics. The including kernel
// includes lib/wg_reduce.wgsl and lib/position_sum.wgsl and declares the overrides listed there, a uniform p with head_dim, n_head, n_head_kv, pos0,
// n_embd_kv, k_offset, v_offset, scale, rn_zero, and where the data live:
//   att_q(t, i) -> f32       element i of token t's q (all heads)
//   att_k(w) -> u32          u32 word w of the K cache (likewise att_v for V)
//   att_k4(i) -> vec4<u32>   K cache words 4 i .. 4 i + 3
//   att_out(t, i, v)         stores element i of token t's output
//   att_done(lid, i, o, wrote)  called by every invocation at the end: o = the pair of outputs
//                            i, i + 1 it stored (wrote), for attention.wgsl's norm statistics

var<workgroup> qh: array<f32, HD_MAX>;
var<workgroup> sc: array<f32, SC_MAX>;  // scores, then exp(score - max), when n <= SC_MAX
var<workgroup> pv_sum: array<vec2<f32>, (CHUNK / 32u) * (HD / 2u)>;  // [block of the chunk][dimension pair]
var<workgroup> ktile: array<u32, TILE>;            // K rows of a tile of positions, padded
var<workgroup> kpart: array<f32, KPART>;           // block sums [position in tile][S]

// Words of a K row per block of 16 dimensions (cpu::dot_blocked16's blocks).
override SCORE_BLOCK_WORDS: u32 = select(16u, 8u, K_F16);

// (q · k[pos]) * scale in cpu::dot_blocked16's order: each block of 16 dimensions summed in order,
// the block sums in order. The row is read in chunks of 32 words (a whole number of blocks), all
// loads of a chunk issued before the sums (HD is a pipeline constant, so the loops unroll and the
// words stay in registers). With f16 K the products are exact in f32; f32 K rounds them (mul_rn).
fn score(pos: u32, kv_base: u32) -> f32 {
    var acc = 0.0;
    let e0 = att_k_at() + pos * att_row() + kv_base;  // element index of k[pos][0]
    let n_words = select(HD, HD / 2u, K_F16);
    for (var w0 = 0u; w0 < n_words; w0 += 32u) {
        var kw: array<u32, 32>;
        for (var w = 0u; w < 32u; w++) {
            if (w0 + w < n_words) { kw[w] = att_k(select(e0, e0 / 2u, K_F16) + w0 + w); }
        }
        for (var b0 = 0u; b0 < 32u; b0 += SCORE_BLOCK_WORDS) {
            if (w0 + b0 < n_words) {
                var s = 0.0;
                for (var w = b0; w < b0 + SCORE_BLOCK_WORDS; w++) {
                    if (w0 + w < n_words) { s = score_add(s, kw[w], w0 + w); }
                }
                acc = acc + s;
            }
        }
    }
    return mul_rn(acc, p.scale);  // not fused into score - max
}

// s + the products of K word w (dimensions 2w, 2w + 1 of an f16 row, or dimension w of an f32 one).
fn score_add(s: f32, word: u32, w: u32) -> f32 {
    if (K_F16) {  // products of two f16 values: exact in f32, so contraction cannot change them
        let kk = unpack2x16float(word);
        return (s + qh[2u * w] * kk.x) + qh[2u * w + 1u] * kk.y;
    }
    return s + mul_rn(qh[w], bitcast<f32>(word));
}

// V words (dimension pair c) of position c0 + i: a u32 (two f16) or two (f32).
fn load_v1(i: u32, c0: u32, kv_base: u32, c: u32) -> vec2<u32> {
    let e = att_v_at() + (c0 + i) * att_row() + kv_base + 2u * c;
    if (V_F16) { return vec2<u32>(att_v(e / 2u), 0u); }
    return vec2<u32>(att_v(e), att_v(e + 1u));
}

// Uniform values as pipeline constants, where the host sets them (ATT_UNSET / 0: the uniform's):
// the offsets of this layer's K / V cache (k_offset, v_offset), the cache's row (n_embd_kv), the
// query heads per KV head (n_head / n_head_kv) and the positions the cache holds. With them the
// first V words and K tile are loaded before anything is read from the uniform buffer (whose first
// read waits for memory), whatever the position (rows_ahead: rows past it are loaded but not used;
// the cache holds them). The offsets' sentinel is ATT_UNSET (0 is an offset), the others' 0.
const ATT_UNSET: u32 = 0xffffffffu;
override ATT_K_AT: u32 = ATT_UNSET;
override ATT_V_AT: u32 = ATT_UNSET;
override ATT_ROW: u32 = 0u;
override ATT_GROUP: u32 = 0u;
override ATT_CTX: u32 = 0u;

fn att_k_at() -> u32 {
    if (ATT_K_AT != ATT_UNSET) { return ATT_K_AT; }
    return p.k_offset;
}

fn att_v_at() -> u32 {
    if (ATT_V_AT != ATT_UNSET) { return ATT_V_AT; }
    return p.v_offset;
}

fn att_row() -> u32 {
    if (ATT_ROW != 0u) { return ATT_ROW; }
    return p.n_embd_kv;
}

fn att_group() -> u32 {
    if (ATT_GROUP != 0u) { return ATT_GROUP; }
    return p.n_head / p.n_head_kv;
}

// How many of the first positions' K (at = ATT_K_AT) or V (ATT_V_AT) rows may be loaded before the
// position is known: all the cache holds where their offset and the cache's shape are constants,
// else the n positions attended.
fn rows_ahead(n: u32, at: u32) -> u32 {
    if (ATT_CTX != 0u && ATT_ROW != 0u && at != ATT_UNSET) { return ATT_CTX; }
    return n;
}

// The first tile's K words are loaded into registers before q is staged (with the constants above:
// all the tile's rows the cache holds, whatever the position, so nothing waits for the uniform),
// and stored to the tile after. H200 tg128 716.1-717.2 tokens/s against 707.8-713.5 with the tile
// loaded after q. Each further tile's words are loaded while the one before is summed (their loads
// overlap the sums: H100 tg128 at a depth of 512 1.94 ms per token against 2.07 with each tile
// loaded when its turn comes, at 1024 2.52 against 2.78; P·V's V words loaded a chunk ahead the same
// way were slower). The scores go through K tiles whenever they fit SC_MAX (tiles only below WG
// positions: H100 at a depth of 512 2.16 ms per token against 2.07, at 1024 2.90 against 2.78).

// Words i = lid + u WG < rows * hw (row c0 + i / hw, word i % hw) of the K tile from position c0, u < 16
// (a tile holds at most 16 words per invocation).
fn load_k_tile(lid: u32, c0: u32, rows: u32, hw: u32, kv_base: u32) -> array<u32, 16> {
    var k: array<u32, 16>;
    for (var u = 0u; u < 16u; u++) {
        let i = lid + u * WG;
        if (i < rows * hw) {
            let e0 = att_k_at() + (c0 + i / hw) * att_row() + kv_base;  // element index of k[c0 + i / hw][0]
            k[u] = att_k(select(e0, e0 / 2u, K_F16) + i % hw);
        }
    }
    return k;
}

// The tiled scores with the K words in registers where a row's S invocations share a subgroup
// (the _sg variants, S <= SG_MIN, the adapter's smallest subgroup, which the host sets):
// invocation (r, j) = (lid / S, lid % S) loads the words of block j of row r straight into
// registers (load_k_regs: the S invocations of a row read its contiguous words) and the row's S
// block sums are gathered in order from its S lanes by shuffles, so a tile needs no staging in
// workgroup memory and no barrier (the same sums in the same order: the same bits; H200 tg64 after
// 512 tokens 1.76 ms per token against 1.84-1.85). Where subgroups are narrower: the K tile in
// workgroup memory.
override SG_MIN: u32 = 0u;
fn k_regs() -> bool { return WG_REDUCE_SG && S <= SG_MIN; }

// This invocation's words of its row in the tile of `rows` positions from c0 (k_regs): block
// lid % S of row c0 + lid / S. Rows and words past the tile are clamped to its last ones (loaded,
// not used), so that no load sits under a branch.
fn load_k_regs(lid: u32, c0: u32, rows: u32, hw: u32, kv_base: u32) -> array<u32, 16> {
    var k: array<u32, 16>;
    let r  = min(lid / S, rows - 1u);
    let e0 = att_k_at() + (c0 + r) * att_row() + kv_base;  // element index of k[c0 + r][0]
    let w0 = select(e0, e0 / 2u, K_F16);
    let b  = w0 + (lid % S) * WPT;  // the thread's first word
    // 16-byte loads where the words are whole aligned vec4s (H200 tg128 912.3-913.0 tokens/s against
    // 904.4-905.9 with 4-byte loads, after 512 tokens 677.2-677.9 against 637.3-639.3).
    if (WPT % 4u == 0u && S * WPT == hw && b % 4u == 0u) {  // (no word past the row to clamp)
        for (var u = 0u; u < WPT / 4u; u++) {
            let v = att_k4(b / 4u + u);
            k[4u * u] = v.x;
            k[4u * u + 1u] = v.y;
            k[4u * u + 2u] = v.z;
            k[4u * u + 3u] = v.w;
        }
        return k;
    }
    for (var w = 0u; w < WPT; w++) { k[w] = att_k(w0 + min((lid % S) * WPT + w, hw - 1u)); }
    return k;
}

// A k_regs tile's score of the invocation's row before the scale, in every lane of the row: block
// kr_block of its words (kr) summed in order, then the row's S block sums in order from its S lanes
// (the first at kr_lane0) by shuffles. Called in uniform control flow.
fn k_regs_row_sum(kr: array<u32, 16>, kr_block: u32, kr_lane0: u32) -> f32 {
    let hw = select(HD, HD / 2u, K_F16);  // u32 words per K row
    var a = 0.0;
    for (var w = 0u; w < WPT; w++) {
        let wi = kr_block * WPT + w;
        if (wi < hw) { a = score_add(a, kr[w], wi); }
    }
    var sum = sg_shuffle(a, kr_lane0);
    for (var jj = 1u; jj < S; jj++) { sum = sum + sg_shuffle(a, kr_lane0 + jj); }
    return sum;
}

// The short form (one query over at most short_positions() positions, its own pipeline; the host
// sets ATT_SHORT where every subgroup is exactly 32 invocations, aligned, and head_dim / 2 is a
// multiple of 32): every K and V word the query needs is loaded before q is staged (the K tiles
// below the position into registers as k_regs() does, each P·V thread its 32 V words of block g),
// so no phase after q waits for memory; the exp sum and P·V pass the probabilities in registers:
// the invocations of P·V's group g (dimension pairs c of positions 32 g .. 32 g + 31, a whole
// number of 32-lane subgroups) each take position 32 g + lane, compute its exponential, sum the
// block in order from lane 0's by shuffles, and after one barrier for the block sums read the
// probability of position 32 g + u from lane u. The same operations in the same order as the
// general form below: the same bits. 4 barriers and no round trip to memory after q, where the
// general form has 8, one per further K tile and one for V.
// Measured (H200 tg128, medians of ten, three alternating rounds in one call): 896.7-897.0 tokens/s
// against 879.1-883.0 for the general form; with all four K tiles and
// the V block loaded whatever the position (no wait for the uniform's pos0, twice the bytes on
// average) 890.0-894.3; with a block's 32 shuffles taken before its sum 886.9-889.5.
override ATT_SHORT: bool = false;
fn short_form() -> bool {
    return ATT_SHORT && k_regs() && SG32 && TILED && (HD / 2u) % 32u == 0u;
}

// Positions the short form covers with kc positions per K tile: 4 tiles, one 32-position block per
// P·V group, one chunk of probabilities, the scores kept.
fn short_positions(kc: u32) -> u32 {
    return min(min(4u * kc, 32u * (WG / (HD / 2u))), min(CHUNK, SC_MAX));
}

// The V words of dimension pair c at positions i0 .. i0 + 31 (rows clamped to `last`).
fn load_v_block(i0: u32, last: u32, kv_base: u32, c: u32) -> array<vec2<u32>, 32> {
    var vw: array<vec2<u32>, 32>;
    for (var u = 0u; u < 32u; u++) { vw[u] = load_v1(min(i0 + u, last), 0u, kv_base, c); }
    return vw;
}

// The scores of the K tile from c0 (kr: its words in registers, as the general form's k_regs tiles),
// stored to sc; returns m raised to the largest of them.
fn short_tile(lid: u32, kr: array<u32, 16>, c0: u32, n: u32, kc: u32, m: f32) -> f32 {
    let kr_row   = lid / S;
    let kr_block = lid % S;
    let sum      = k_regs_row_sum(kr, kr_block, (lid - kr_block) & 31u);
    var r = m;
    if (kr_block == 0u && kr_row < min(kc, n - c0)) {
        let sv = mul_rn(sum, p.scale);  // not fused into score - max
        sc[c0 + kr_row] = sv;
        r = max(r, sv);
    }
    return r;
}

fn attend_short(lid: u32, h: u32, t: u32, n: u32, kv_base: u32, kc: u32, k0: array<u32, 16>, k1: array<u32, 16>,
                k2: array<u32, 16>, k3: array<u32, 16>, vb: array<vec2<u32>, 32>) {
    let hd     = HD;
    let pairs  = hd / 2u;
    let groups = WG / pairs;
    let c      = lid % pairs;
    let g      = lid / pairs;  // (the same in all 32 lanes of a subgroup: pairs is a multiple of 32)
    let lane   = lid % 32u;

    var m = bitcast<f32>(0xff7fffffu);
    m = short_tile(lid, k0, 0u, n, kc, m);
    if (kc < n) { m = short_tile(lid, k1, kc, n, kc, m); }
    if (2u * kc < n) { m = short_tile(lid, k2, 2u * kc, n, kc, m); }
    if (3u * kc < n) { m = short_tile(lid, k3, 3u * kc, n, kc, m); }
    let mx = wg_max(lid, m);  // (its barrier also makes sc visible)

    // exp(score - max) of position 32 g + lane, and block g's sum in order from its first position.
    let pos = 32u * g + lane;
    var e = 0.0;
    if (g < groups && pos < n) { e = exp_fixed(sc[pos] - mx); }
    var bsum = 0.0;
    for (var u = 0u; u < 32u; u++) {
        let eu = sg_shuffle(e, u);
        if (32u * g + u < n) { bsum = bsum + eu; }
    }
    if (g < groups && c == 0u && 32u * g < n) { blk_sum[g] = bsum; }
    workgroupBarrier();
    var es = PosSum();
    for (var b = 0u; 32u * b < n; b++) { es = pos_add_block(es, vec2<f32>(blk_sum[b], 0.0), b); }
    let inv = div_rn(1.0, pos_total(es).x);

    // P·V: thread (c, g) sums dimension pair c over block g in order, the probabilities from the lanes.
    let pr = e * inv;
    let pq = select(pr, round_f16(pr), V_F16);
    var o = vec2<f32>(0.0, 0.0);
    for (var u = 0u; u < 32u; u++) {
        let pu = sg_shuffle(pq, u);
        if (g < groups && 32u * g + u < n) {
            if (V_F16) {  // products of two f16 values: exact in f32
                o = o + pu * unpack2x16float(vb[u].x);
            } else {
                o = o + vec2<f32>(mul_rn(pu, bitcast<f32>(vb[u].x)), mul_rn(pu, bitcast<f32>(vb[u].y)));
            }
        }
    }
    if (g < groups && 32u * g < n) { pv_sum[g * pairs + c] = o; }
    workgroupBarrier();
    var out = vec2<f32>(0.0, 0.0);
    if (lid < pairs) {
        var os = PosSum();
        for (var b = 0u; 32u * b < n; b++) { os = pos_add_block(os, pv_sum[b * pairs + lid], b); }
        out = pos_total(os);
        att_out(t, h * hd + 2u * lid, out.x);
        att_out(t, h * hd + 2u * lid + 1u, out.y);
    }
    att_done(lid, h * hd + 2u * lid, out, lid < pairs);
}

// Attention of query token t (position p.pos0 + t), head h, by the whole workgroup (every
// invocation must call it: it has barriers).
fn attend(lid: u32, h: u32, t: u32) {
    let hd      = HD;  // = p.head_dim, as a constant: pairs, groups, c and g below divide by it
    let kvh     = h / att_group();
    let kv_base = kvh * hd;
    let n       = p.pos0 + t + 1u;  // causal: positions 0 ..= pos0 + t
    // P·V's thread layout (below).
    let pairs  = hd / 2u;
    let groups = WG / pairs;
    let c      = lid % pairs;
    let g      = lid / pairs;
    let hw = select(HD, HD / 2u, K_F16);  // u32 words per K row
    let kc = min(WG / S, TILE / (hw + 1u));  // positions per tile (the host may shrink TILE)
    var k0: array<u32, 16>;
    if (TILED) {
        if (k_regs()) {
            k0 = load_k_regs(lid, 0u, min(kc, rows_ahead(n, ATT_K_AT)), hw, kv_base);
        } else {
            k0 = load_k_tile(lid, 0u, min(kc, rows_ahead(n, ATT_K_AT)), hw, kv_base);
        }
    }
    // The short form's loads (ATT_SHORT, below): K tiles 1 .. 3 and this thread's V block.
    var k1: array<u32, 16>;
    var k2: array<u32, 16>;
    var k3: array<u32, 16>;
    var vb: array<vec2<u32>, 32>;
    if (short_form()) {
        let ahead = rows_ahead(n, ATT_K_AT);  // (> c0 for every tile loaded: c0 < n)
        if (kc < n) { k1 = load_k_regs(lid, kc, min(kc, ahead - kc), hw, kv_base); }
        if (2u * kc < n) { k2 = load_k_regs(lid, 2u * kc, min(kc, ahead - 2u * kc), hw, kv_base); }
        if (3u * kc < n) { k3 = load_k_regs(lid, 3u * kc, min(kc, ahead - 3u * kc), hw, kv_base); }
        if (g < groups && 32u * g < n) { vb = load_v_block(32u * g, rows_ahead(n, ATT_V_AT) - 1u, kv_base, c); }
    }
    for (var d = lid; d < hd; d += WG) {
        let v = att_q(t, h * hd + d);
        qh[d] = select(v, round_f16(v), K_F16);
    }
    workgroupBarrier();
    if (short_form()) {  // (its own pipeline: the general form below is not compiled in)
        if (n <= short_positions(kc)) {
            attend_short(lid, h, t, n, kv_base, kc, k0, k1, k2, k3, vb);
        } else if (lid < hd) {  // the host chose this pipeline for too many positions: NaN, never a guess
            att_out(t, h * hd + lid, bitcast<f32>(0x7fc00000u | p.rn_zero));  // (a NaN constant does not compile)
        }
        return;
    }

    let cached = n <= SC_MAX;

    // The scores and the largest of them.
    var m = bitcast<f32>(0xff7fffffu);
    var any = false;
    if (TILED && cached) {
        // (Decode: one query, its scores kept in workgroup memory.)
        // Tiles of WG / S positions (or what TILE holds): their K rows staged in workgroup memory with coalesced loads
        // (row r, word w at ktile[r * (hw + 1) + w]: the padding word keeps the S threads of a
        // row and the rows of a warp on different banks), then S threads per position, thread j
        // summing block j of 16 dimensions (WPT words; threads past the row's blocks add nothing);
        // the S block sums are added in order (cpu::dot_blocked16).
        // k_regs: this invocation's position in a tile, its block, and its position's first lane
        // (subgroups are aligned runs of invocations, checked by the host before it takes the _sg
        // variants; S divides their size).
        let kr_row   = lid / S;
        let kr_block = lid % S;
        var kr_lane0 = 0u;
        if (k_regs()) { kr_lane0 = (lid - kr_block) & (sg_size() - 1u); }
        for (var c0 = 0u; c0 < n; c0 += kc) {
            let cn = min(kc, n - c0);
            if (k_regs()) {
                let kr = k0;  // (loaded ahead)
                if (c0 + kc < n) { k0 = load_k_regs(lid, c0 + kc, min(kc, n - c0 - kc), hw, kv_base); }
                let sum = k_regs_row_sum(kr, kr_block, kr_lane0);
                if (kr_block == 0u && kr_row < cn) {
                    let sv = mul_rn(sum, p.scale);  // not fused into score - max
                    sc[c0 + kr_row] = sv;
                    m = max(m, sv);
                    any = true;
                }
                continue;
            }
            workgroupBarrier();  // the previous tile is consumed
            for (var u = 0u; u < 16u; u++) {  // (loaded ahead)
                let i = lid + u * WG;
                if (i < cn * hw) { ktile[(i / hw) * (hw + 1u) + i % hw] = k0[u]; }
            }
            if (c0 + kc < n) { k0 = load_k_tile(lid, c0 + kc, min(kc, n - c0 - kc), hw, kv_base); }
            workgroupBarrier();
            let r  = lid / S;
            let j  = lid % S;
            var a = 0.0;
            if (r < cn) {
                for (var w = 0u; w < WPT; w++) {
                    let wi = j * WPT + w;
                    if (wi < hw) { a = score_add(a, ktile[r * (hw + 1u) + wi], wi); }
                }
            }
            kpart[lid] = a;
            workgroupBarrier();
            if (lid < cn) {
                var sum = kpart[lid * S];
                for (var jj = 1u; jj < S; jj++) { sum = sum + kpart[lid * S + jj]; }
                let sv = mul_rn(sum, p.scale);  // not fused into score - max
                sc[c0 + lid] = sv;
                m = max(m, sv);
                any = true;
            }
        }
    } else {
        for (var i = lid; i < n; i += WG) {
            let sv = score(i, kv_base);
            if (cached) { sc[i] = sv; }
            m = max(m, sv);
            any = true;
        }
    }
    let mx = wg_max(lid, select(bitcast<f32>(0xff7fffffu), m, any));

    // Sum of exp(score - max) in cpu::sum_positions's order (blocks of 32 positions in order, 16
    // blocks to a superblock, superblocks in order), CHUNK positions at a time: the exponentials go
    // to `probs` (and `sc` when cached), one thread per block sums it, then every thread adds the
    // chunk's block sums in order (the same bits in each).
    var es = PosSum();
    for (var c0 = 0u; c0 < n; c0 += CHUNK) {
        let c_n = min(CHUNK, n - c0);
        workgroupBarrier();  // the previous chunk's probs and block sums are consumed
        for (var i = lid; i < c_n; i += WG) {
            var sv: f32;
            if (cached) { sv = sc[c0 + i]; } else { sv = score(c0 + i, kv_base); }
            let e = exp_fixed(sv - mx);
            if (cached) { sc[c0 + i] = e; }
            probs[i] = e;
        }
        es = pos_add_chunk(lid, c0, c_n, es);
    }
    let inv = div_rn(1.0, pos_total(es).x);

    // out[d] = sum_p prob(p) v[p][d] in the same order: per chunk, thread (c, g) sums dimension
    // pair c over the chunk's blocks g, g + groups, ... (32 positions each, in order, from 0) into
    // pv_sum; then thread c adds the chunk's block sums in order.
    var os = PosSum();
    for (var c0 = 0u; c0 < n; c0 += CHUNK) {
        let c_n = min(CHUNK, n - c0);
        workgroupBarrier();
        for (var i = lid; i < c_n; i += WG) {
            var e: f32;
            if (cached) { e = sc[c0 + i]; } else { e = exp_fixed(score(c0 + i, kv_base) - mx); }
            let pr = e * inv;
            probs[i] = select(pr, round_f16(pr), V_F16);
        }
        workgroupBarrier();
        if (g < groups) {
            for (var b = g; 32u * b < c_n; b += groups) {
                // The block's 32 V words first (one round trip), then its sum in order from 0.
                // (Loading the first block's V words with the scores was slower once the decode qkv
                // kernel pulled the cache rows into L2: H100 tg128 761.9-765.5 tokens/s against
                // 754.3-756.3 with 8 of them.)
                var vw: array<vec2<u32>, 32>;
                for (var u = 0u; u < 32u; u++) {
                    if (32u * b + u < c_n) { vw[u] = load_v1(32u * b + u, c0, kv_base, c); }
                }

                var o = vec2<f32>(0.0, 0.0);
                for (var u = 0u; u < 32u; u++) {
                    if (32u * b + u < c_n) {
                        let pr = probs[32u * b + u];
                        if (V_F16) {  // products of two f16 values: exact in f32
                            o = o + pr * unpack2x16float(vw[u].x);
                        } else {
                            o = o + vec2<f32>(mul_rn(pr, bitcast<f32>(vw[u].x)), mul_rn(pr, bitcast<f32>(vw[u].y)));
                        }
                    }
                }
                pv_sum[b * pairs + c] = o;
            }
        }
        workgroupBarrier();
        if (lid < pairs) {
            for (var b = 0u; 32u * b < c_n; b++) { os = pos_add_block(os, pv_sum[b * pairs + lid], c0 / 32u + b); }
        }
    }
    var o = vec2<f32>(0.0, 0.0);
    if (lid < pairs) {
        o = pos_total(os);
        att_out(t, h * hd + 2u * lid, o.x);
        att_out(t, h * hd + 2u * lid + 1u, o.y);
    }
    att_done(lid, h * hd + 2u * lid, o, lid < pairs);
}
