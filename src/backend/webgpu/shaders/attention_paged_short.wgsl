// attention_paged_short: a paged batch's attention over short contexts in one dispatch
// (webgpu_attention_split.cpp: every column sees at most NMAX positions, WebGpuTuning::
// attn_paged_short), a workgroup per KV head and column doing what the three split kernels do
// (attention_split_scores, attention_split_softmax, attention_split_pv) with the same operations in
// the same order, the scores and probabilities kept in workgroup memory instead of a scratch buffer:
//   1. scores s[j][pos] = (q_(kvh G + j) · k_pos) * scale: each block of 16 dimensions summed in
//      order from 0 (q rounded to f16 with an f16 cache; an f32 cache's products rounded, mul_rn),
//      the block sums in order from 0 (cpu::dot_blocked16), then mul_rn by the scale;
//   2. mx[j] = max over positions (exact in any order; from -FLT_MAX), e = exp_fixed(s - mx[j]),
//      each block of 32 positions' sum in order from 0, the normalizer from the block sums in
//      cpu::sum_positions's order (blocks of a superblock of 512, then superblocks), inv = 1 / it;
//   3. out[(kvh G + j) hd + d] = sum over positions of prob * v[pos][kvh hd + d] (prob = e * inv[j],
//      rounded to f16 with an f16 V cache, whose products are then exact; an f32 cache's rounded),
//      in cpu::sum_positions's order: blocks of 32 positions in order, superblocks, total.
// The page table's entries of the column are read once into workgroup memory.
//
//   q: [n_head hd, T] f32   k_cache, v_cache: [n_head_kv hd, rows] f16 pairs or f32 (u32 words)
//   cols, pages: lib/kv_pages.wgsl   out: [n_head hd, T] f32
// Bindings: 0 q, 1 k_cache, 2 v_cache, 3 cols, 4 pages (read); 5 out (read_write); 6 params
// Dispatch: (n_head_kv, T). Scores: thread (position pl, block b) of TP positions per pass. P·V:
// thread (block k of the round, dimension pair l) over KS blocks per round, PU positions' V loads
// issued before their products are added; threads (output o) then add the round's block sums.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"

override WG: u32 = 256u;
override S: u32 = 8u;           // scores: threads per position (blocks of 16 dimensions, a power of two)
override TP: u32 = WG / S;      // scores: positions per pass
override HD: u32 = 128u;        // head_dim, even
override GROUP: u32 = 4u;       // G = n_head / n_head_kv, at most 16
override GP2: u32 = 4u;         // GROUP rounded up to a power of two
override K_F16: bool = true;
override V_F16: bool = true;
override NMAX: u32 = 1024u;     // most positions a column sees: a multiple of 32
override XS: u32 = 8192u;       // scratch floats: max(GROUP WG, KS GROUP HD)
override PU: u32 = 8u;          // P·V positions loaded ahead: 1, 2, 4 or 8
override NB: u32 = (HD + 15u) / 16u;  // blocks of 16 dimensions
override NP: u32 = HD / 2u;     // dimension pairs
override KS: u32 = WG / NP;     // P·V: blocks per round
override SEG: u32 = WG / GP2;   // the maxima: threads per head

struct Params {
    n_embd_kv: u32,     // cache elements per row
    q_offset: u32,      // f32 index of q[0, 0]
    q_stride: u32,      // f32 elements between columns of q
    k_offset: u32,      // element index of k_cache[0, 0]
    v_offset: u32,      // element index of v_cache[0, 0]
    n_head_kv: u32,
    pos0: u32,          // (lib/kv_pages.wgsl; unused: PAGED)
    max_pages: u32,
    cols_offset: u32,
    pages_offset: u32,
    out_offset: u32,    // f32 index of out[0, 0]
    out_stride: u32,    // f32 elements between columns of out
    scale: f32,         // 1 / sqrt(head_dim)
    rn_zero: u32,       // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<u32>;
@group(0) @binding(2) var<storage, read> v_cache: array<u32>;
@group(0) @binding(3) var<storage, read> cols: array<i32>;
@group(0) @binding(4) var<storage, read> pages: array<i32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> q_s: array<f32, GROUP * HD>;        // [j][d], f16-rounded with an f16 cache
var<workgroup> s_s: array<f32, GROUP * NMAX>;      // [j][position]: the scores, then e
var<workgroup> x_s: array<f32, XS>;                // scores: [j][thread] block sums; P·V: [k][j][d]
var<workgroup> bs_s: array<f32, GROUP * (NMAX / 32u)>;  // [j][block]: e's block sums
var<workgroup> rows_s: array<u32, NMAX / 16u>;     // the column's pages' first cache rows (PAGE >= 16)
var<workgroup> red_s: array<f32, WG>;
var<workgroup> mx_s: array<f32, 16>;
var<workgroup> inv_s: array<f32, 16>;

const NEG_MAX: u32 = 0xff7fffffu;  // -FLT_MAX (as attention.wgsl starts its max), as bits

fn cache_row(pos: u32) -> u32 {
    if (PAGED) { return rows_s[pos / PAGE] + pos % PAGE; }
    return pos;
}

// a * b as the CPU rounds it: exact when both are f16 values (so contraction cannot change it).
fn prod(a: f32, b: f32) -> f32 {
    if (K_F16) { return a * b; }
    return mul_rn(a, b);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let kvh = wid.x;
    let t   = wid.y;
    let col = kv_column_uniform(lid, t);
    let n   = min(col.pos + 1u, NMAX);  // (the host sends only columns that fit)
    let nb  = (n + 31u) / 32u;
    for (var i = lid; i < (n + PAGE - 1u) / PAGE; i += WG) { rows_s[i] = u32(pages[col.table + i]) * PAGE; }
    for (var i = lid; i < GROUP * HD; i += WG) {
        let v = q[p.q_offset + t * p.q_stride + kvh * GROUP * HD + i];
        q_s[i] = select(v, round_f16(v), K_F16);
    }
    workgroupBarrier();

    // 1. The scores, TP positions per pass.
    let pl = lid / S;
    let b  = lid % S;
    for (var p0 = 0u; p0 < n; p0 += TP) {
        let pos  = p0 + pl;
        let mine = pos < n && b < NB;
        var kb: array<f32, 16>;
        if (mine) {
            let e0 = p.k_offset + cache_row(pos) * p.n_embd_kv + kvh * HD + 16u * b;  // element index
            if (K_F16) {
                for (var w = 0u; w < 8u; w++) {
                    if (16u * b + 2u * w < HD) {
                        let v = unpack2x16float(k_cache[e0 / 2u + w]);
                        kb[2u * w] = v.x;
                        kb[2u * w + 1u] = v.y;
                    }
                }
            } else {
                for (var w = 0u; w < 16u; w++) {
                    if (16u * b + w < HD) { kb[w] = bitcast<f32>(k_cache[e0 + w]); }
                }
            }
        }
        for (var j = 0u; j < GROUP; j++) {
            var s = 0.0;
            if (mine) {
                for (var d = 0u; d < 16u; d++) {
                    if (16u * b + d < HD) { s = s + prod(q_s[j * HD + 16u * b + d], kb[d]); }
                }
            }
            x_s[j * WG + lid] = s;
        }
        workgroupBarrier();
        for (var j = b; j < GROUP; j += S) {
            if (pos < n) {
                var acc = 0.0;
                for (var bb = 0u; bb < NB; bb++) { acc = acc + x_s[j * WG + pl * S + bb]; }
                s_s[j * NMAX + pos] = mul_rn(acc, p.scale);  // not fused into s - max
            }
        }
        workgroupBarrier();
    }

    // 2. The maxima (one tree for the G heads), e in place (+0 past the last position, which leaves
    // a block sum's bits as they are), the block sums and the normalizers.
    {
        let j  = lid / SEG;
        let i0 = lid % SEG;
        var m  = bitcast<f32>(NEG_MAX);
        if (j < GROUP) {
            for (var i = i0; i < n; i += SEG) { m = max(m, s_s[j * NMAX + i]); }
        }
        red_s[lid] = m;
        workgroupBarrier();
        for (var h = SEG / 2u; h > 0u; h >>= 1u) {
            if (i0 < h) { red_s[lid] = max(red_s[lid], red_s[lid + h]); }
            workgroupBarrier();
        }
        if (lid < GROUP) { mx_s[lid] = red_s[lid * SEG]; }
        workgroupBarrier();
    }
    for (var i = lid; i < GROUP * 32u * nb; i += WG) {
        let j = i / (32u * nb);
        let k = i % (32u * nb);
        s_s[j * NMAX + k] = select(0.0, exp_fixed(s_s[j * NMAX + k] - mx_s[j]), k < n);
    }
    workgroupBarrier();
    for (var i = lid; i < GROUP * nb; i += WG) {
        let j  = i / nb;
        let bk = i % nb;
        var s  = 0.0;
        for (var k = 0u; k < 32u; k++) { s = s + s_s[j * NMAX + 32u * bk + k]; }
        bs_s[j * (NMAX / 32u) + bk] = s;
    }
    workgroupBarrier();
    if (lid < GROUP) {
        var total = 0.0;
        for (var sb = 0u; sb < (nb + 15u) / 16u; sb++) {
            var s = 0.0;
            for (var bk = 16u * sb; bk < min(16u * sb + 16u, nb); bk++) { s = s + bs_s[lid * (NMAX / 32u) + bk]; }
            total = total + s;
        }
        inv_s[lid] = div_rn(1.0, total);
    }
    workgroupBarrier();

    // 3. P·V in rounds of KS blocks: thread (k, l) sums its block's positions for dimensions 2l, 2l + 1
    // of the G heads; threads (o) add the round's blocks to their superblock's sum in order, and a
    // closed superblock to the total.
    let l  = lid % NP;
    let k  = lid / NP;
    let d0 = 2u * l;
    var sup: array<f32, 16>;  // [r]: output o = lid + r WG (at most GROUP HD / WG of them)
    var tot: array<f32, 16>;
    for (var r = 0u; r < 16u; r++) {
        sup[r] = 0.0;
        tot[r] = 0.0;
    }
    for (var b0 = 0u; b0 < nb; b0 += KS) {
        let bk  = b0 + k;
        var acc = array<f32, 32>();  // [j][2]
        if (k < KS && bk < nb) {
            let end = min(32u * bk + 32u, n);
            for (var q0 = 32u * bk; q0 < end; q0 += PU) {
                var vw: array<u32, 16>;  // [u][2]
                for (var u = 0u; u < PU; u++) {
                    let pos = q0 + u;
                    if (pos < end) {
                        let e0 = p.v_offset + cache_row(pos) * p.n_embd_kv + kvh * HD + d0;  // element index
                        if (V_F16) {
                            vw[2u * u] = v_cache[e0 / 2u];
                        } else {
                            vw[2u * u] = v_cache[e0];
                            vw[2u * u + 1u] = v_cache[e0 + 1u];
                        }
                    }
                }
                for (var u = 0u; u < PU; u++) {
                    let pos = q0 + u;
                    if (pos < end) {
                        var v: vec2<f32>;
                        if (V_F16) {
                            v = unpack2x16float(vw[2u * u]);
                        } else {
                            v = vec2<f32>(bitcast<f32>(vw[2u * u]), bitcast<f32>(vw[2u * u + 1u]));
                        }
                        for (var j = 0u; j < GROUP; j++) {
                            var pr = s_s[j * NMAX + pos] * inv_s[j];
                            if (V_F16) {
                                pr = round_f16(pr);
                                acc[2u * j]      = acc[2u * j] + pr * v.x;  // exact products: no rounding to keep
                                acc[2u * j + 1u] = acc[2u * j + 1u] + pr * v.y;
                            } else {
                                acc[2u * j]      = acc[2u * j] + mul_rn(pr, v.x);
                                acc[2u * j + 1u] = acc[2u * j + 1u] + mul_rn(pr, v.y);
                            }
                        }
                    }
                }
            }
        }
        workgroupBarrier();  // (the round before has read x_s)
        if (k < KS) {
            for (var j = 0u; j < GROUP; j++) {
                x_s[(k * GROUP + j) * HD + d0]      = acc[2u * j];
                x_s[(k * GROUP + j) * HD + d0 + 1u] = acc[2u * j + 1u];
            }
        }
        workgroupBarrier();
        for (var r = 0u; r * WG < GROUP * HD; r++) {
            let o = lid + r * WG;
            if (o < GROUP * HD) {
                for (var kk = 0u; kk < KS; kk++) {
                    let bb = b0 + kk;
                    if (bb < nb) {
                        if (bb % 16u == 0u && bb > 0u) {  // a superblock closed
                            tot[r] = tot[r] + sup[r];
                            sup[r] = 0.0;
                        }
                        sup[r] = sup[r] + x_s[kk * GROUP * HD + o];
                    }
                }
            }
        }
    }
    for (var r = 0u; r * WG < GROUP * HD; r++) {
        let o = lid + r * WG;
        if (o < GROUP * HD) { out[p.out_offset + t * p.out_stride + kvh * GROUP * HD + o] = tot[r] + sup[r]; }
    }
}
