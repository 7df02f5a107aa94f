// attention_paged_super: a superblock's softmax and P·V for a paged batch or one query over a
// contiguous cache (webgpu_attention_paged.cpp), after attention_split_scores.wgsl or (FUSED) with
// the scores taken here too: a workgroup per (superblock of 512 positions, slice of DW dimensions,
// GROUP of the G_ALL query heads of a KV head, column), with the CPU's operations in the CPU's order
// (CpuBackend::attention: each superblock on its own, then cpu::combine_superblocks by
// attention_split_combine.wgsl):
//   s       = (q_(kvh G_ALL + j) · k_pos) * scale: each block of 16 dimensions summed in order from
//             0, the block sums in order from 0, then mul_rn by the scale (cpu::dot_blocked16, as
//             attention_split_scores.wgsl: q rounded to f16, f16 K, so products are exact in f32);
//   m_c[j]  = max of the superblock's scores (exact in any order);
//   e       = exp_fixed(s - m_c[j]);  bl[j][b] = ((0 + e[32 b]) + e[32 b + 1]) + ...;
//   l_c[j]  = ((0 + bl[j][0]) + bl[j][1]) + ...;  prob = f16(e * (1 / l_c[j]));
//   part[t][kvh G_ALL + j][sb][d] = the superblock's sum of prob * v[pos][kvh hd + d]: each block of
//             32 positions summed in position order from 0, then the blocks in order from 0
//             (products of two f16 values, exact in f32, so a fused multiply-add gives the same bits);
//   sml[t][kvh G_ALL + j][sb] = (m_c[j], l_c[j]).
// No softmax dispatch: the workgroup takes its superblock's max and sums from the scores itself.
// FUSED (no scores dispatch either): thread (position lid / S of a pass of TPS = WG / S positions,
// block lid % S of 16 dimensions) keeps its block of the GROUP q rows in registers and loads its 16
// K values by two vec4 loads (S consecutive threads read a K head row's contiguous bytes), KR passes
// at a time and the next KR passes' loads in flight; the block sums go through ws (before it holds
// the probabilities), then thread (j, position) adds a position's S block sums in order into e_s.
// V is read by whole head rows (DW = HD) or slices of DW dimensions: thread (block b, octet o) loads
// dimensions 8 o .. 8 o + 7 of the slice for its block's 32 positions by vec4 loads (OCT = DW / 8
// threads cover a row's DW halves, contiguous), U positions ahead of its sums, straight into
// registers, and keeps the 8 x G sums of its block there:
// each V row is read once, coalesced, and nothing of V passes through workgroup memory.
//
//   src: FUSED q [n_head hd, T] f32, else the scores [T][n_head_kv][G_ALL][ld] f32 (the scores kernel's)
//   k_cache (FUSED), v_cache: [n_head_kv hd, rows] f16, 8 per vec4<u32> (offsets and a row multiples of 8)
//   cols, pages: lib/kv_pages.wgsl (PAGED; without it column t is at position pos0 + t)
//   part: [T][n_head][nsb_ld][hd] f32    sml: [T][n_head][nsb_ld][2] f32
// Bindings: 0 src, 1 k_cache, 2 v_cache, 3 cols, 4 pages (read); 5 part, 6 sml (read_write); 7 params
// Dispatch: (nsb_max HD / DW, n_head_kv G_ALL / GROUP, T), WG = 16 OCT threads: x = superblock
// (HD / DW) + slice of DW dimensions (every slice takes the softmax itself; slice 0 writes sml),
// y = KV head (G_ALL / GROUP) + its group of query heads; a workgroup past its column's last
// superblock returns at once.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"

override HD: u32 = 128u;        // head_dim, a multiple of DW
override DW: u32 = 128u;        // dimensions per workgroup, a multiple of 8, at most 128
override GROUP: u32 = 4u;       // query heads per workgroup, at most 4 (one vec4 of heads)
override G_ALL: u32 = GROUP;    // G = n_head / n_head_kv, a multiple of GROUP
override OCT: u32 = DW / 8u;    // threads per V row segment (8 dimensions each)
override WG: u32 = 16u * OCT;   // 16 blocks of 32 positions x OCT
override WSN: u32 = 512u;       // vec4s of ws: max(512, 8 DW, FUSED: GROUP (KR WG + S) / 4)
override FUSED: bool = false;   // the scores taken here (f16 K, HD a multiple of 16)
override S: u32 = HD / 16u;     // FUSED: threads per position (blocks of 16 dimensions; dividing WG)
override TPS: u32 = WG / S;     // FUSED: positions per pass (a power of two, at most 512 / KR)
// FUSED: floats between ws's rows of block sums: a round's KR TPS positions + 32 / S (at least 1),
// so that a warp's 32 / S positions x S blocks store to 32 banks (H200: 32 banks of 4 bytes).
override RPS: u32 = KR * TPS + max(1u, 32u / S);
// V rows each thread loads ahead of its sums (H200 64 streams d0 / d256: 12,797.6 / 11,058.3 tok/s
// with 4, 12,632.7 / 10,874.6 with 8): 1 .. 32, a power of two (the registers are U_MAX's, the
// loops over U unroll, so only U of them are live; 32: the block's whole V in one round trip).
override U: u32 = 4u;
const U_MAX: u32 = 32u;

// FUSED: passes of K per round (their loads in flight together, and the next round's during the
// sums): 1, 2 or 4 (the registers are KR_MAX's).
override KR: u32 = 2u;
const KR_MAX: u32 = 4u;

const SUPER: u32 = 512u;        // positions per superblock (cpu::k_pos_super)
const EST: u32 = 33u;           // e_s's stride per block (odd: the 16 block threads of a head in other banks)

struct Params {
    n_embd_kv: u32,    // cache elements per row
    v_offset: u32,     // element index of v_cache[0, 0] (a multiple of 8)
    ld: u32,           // f32 elements between rows of scores (FUSED: unused)
    n_head_kv: u32,
    pos0: u32,         // without PAGED: position of column 0
    max_pages: u32,
    cols_offset: u32,
    pages_offset: u32,
    nsb_ld: u32,       // superblocks per (column, head) row of part and sml
    q_offset: u32,     // FUSED: f32 index of q[0, 0]
    q_stride: u32,     // FUSED: f32 elements between columns of q
    k_offset: u32,     // FUSED: element index of k_cache[0, 0] (a multiple of 8)
    scale: f32,        // FUSED: 1 / sqrt(head_dim)
    rn_zero: u32,      // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> cols: array<i32>;
@group(0) @binding(4) var<storage, read> pages: array<i32>;
@group(0) @binding(5) var<storage, read_write> part: array<f32>;
@group(0) @binding(6) var<storage, read_write> sml: array<f32>;
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> e_s: array<f32, 4u * 16u * EST>;  // [j][block][33]: scores, then e
var<workgroup> bl_s: array<f32, 64>;             // [j][block]: block maxima, then block sums
var<workgroup> mx_s: array<f32, 4>;              // [j]
var<workgroup> inv_s: array<f32, 4>;             // [j]
// [position]: the G probabilities (0 for missing heads); after the sums, [block % 8][d]: the G
// block sums of 8 blocks at a time. FUSED, before: a round's block sums of the scores as f32,
// [j][block of 16 dimensions][RPS] (a round's KR TPS positions, then padding).
var<workgroup> ws: array<vec4<f32>, WSN>;

fn ws_set(i: u32, v: f32) { ws[i / 4u][i % 4u] = v; }
fn ws_get(i: u32) -> f32 { return ws[i / 4u][i % 4u]; }

// FUSED: the K words of this thread's block kb of 16 dimensions at positions r0 + k TPS + pl, k < KR
// (two vec4s each; zeros past the superblock's np positions).
fn load_k(kq: ptr<function, array<vec4<u32>, 2u * KR_MAX>>, col: KvColumn, pbeg: u32, r0: u32, pl: u32, np: u32,
          first: u32) {
    for (var k = 0u; k < KR; k++) {
        let r = r0 + k * TPS + pl;  // position in the superblock
        (*kq)[2u * k] = vec4<u32>(0u);
        (*kq)[2u * k + 1u] = vec4<u32>(0u);
        if (r < np) {
            let e0 = p.k_offset + kv_row(col, pbeg + r) * p.n_embd_kv + first;  // element index, a multiple of 8
            (*kq)[2u * k] = k_cache[e0 / 8u];
            (*kq)[2u * k + 1u] = k_cache[e0 / 8u + 1u];
        }
    }
}

// FUSED: the scores of the superblock's np positions for the GROUP query heads from row h0 of
// column t into e_s ([j][block of 32][33]; positions past np untouched).
fn fused_scores(lid: u32, t: u32, kvh: u32, h0: u32, col: KvColumn, pbeg: u32, np: u32) {
    let kb = lid % S;  // block of 16 dimensions
    let pl = lid / S;  // position in a pass
    let rp = KR * TPS; // positions per round
    let first = kvh * HD + 16u * kb;
    var kq: array<vec4<u32>, 2u * KR_MAX>;
    load_k(&kq, col, pbeg, 0u, pl, np, first);  // (in flight while q is read)
    // q of the GROUP heads, dimensions 16 kb .. 16 kb + 15, f16-rounded: qr[d][j] (0 for missing heads).
    var qr: array<vec4<f32>, 16>;
    for (var d = 0u; d < 16u; d++) {
        qr[d] = vec4<f32>(0.0);
        for (var j = 0u; j < GROUP; j++) {
            qr[d][j] = round_f16(src[p.q_offset + t * p.q_stride + (h0 + j) * HD + 16u * kb + d]);
        }
    }
    for (var r0 = 0u; r0 < np; r0 += rp) {
        var kn: array<vec4<u32>, 2u * KR_MAX>;
        if (r0 + rp < np) { load_k(&kn, col, pbeg, r0 + rp, pl, np, first); }
        for (var k = 0u; k < KR; k++) {
            // The block's 16 products per head in order from 0 (exact: f16 x f16).
            var sv = vec4<f32>(0.0);
            for (var w = 0u; w < 8u; w++) {
                let h = unpack2x16float(kq[2u * k + w / 4u][w % 4u]);
                sv = sv + qr[2u * w] * h.x;
                sv = sv + qr[2u * w + 1u] * h.y;
            }
            for (var j = 0u; j < GROUP; j++) { ws_set((j * S + kb) * RPS + k * TPS + pl, sv[j]); }
        }
        workgroupBarrier();
        // Thread (j, position): the position's S block sums in order from 0, then the scale.
        for (var i = lid; i < GROUP * rp; i += WG) {
            let j = i / rp;
            let r = r0 + i % rp;
            if (r < np) {
                var acc = 0.0;
                for (var bb = 0u; bb < S; bb++) { acc = acc + ws_get((j * S + bb) * RPS + i % rp); }
                e_s[j * 16u * EST + (r / 32u) * EST + r % 32u] = mul_rn(acc, p.scale);  // not fused into s - max
            }
        }
        workgroupBarrier();
        kq = kn;
    }
}

// The U V vec4s of positions r0 .. r0 + U - 1 of block b (zeros past the superblock's np positions).
fn load_v(vq: ptr<function, array<vec4<u32>, U_MAX>>, col: KvColumn, base: u32, bpos: u32, r0: u32, np: u32,
          first: u32) {
    for (var k = 0u; k < U; k++) {
        let r = r0 + k;  // position in the superblock
        (*vq)[k] = vec4<u32>(0u);
        if (r < np) {
            let row = kv_row_in_block(col, base, bpos, bpos + (r % 32u));
            (*vq)[k] = v_cache[(p.v_offset + row * p.n_embd_kv + first) / 8u];
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t    = wid.z;
    let kvh  = wid.y / (G_ALL / GROUP);
    let h0   = kvh * G_ALL + (wid.y % (G_ALL / GROUP)) * GROUP;  // the workgroup's first query head
    let sb   = wid.x / (HD / DW);
    let slice = wid.x % (HD / DW);
    let col  = kv_column_uniform(lid, t);
    let n    = col.pos + 1u;
    if (sb >= (n + SUPER - 1u) / SUPER) { return; }  // (uniform: the column is)
    let row0 = t * p.n_head_kv * G_ALL + h0;  // its first row of part, sml and scores
    let pbeg = SUPER * sb;
    let np   = min(SUPER, n - pbeg);  // positions of this superblock
    let b    = lid / OCT;             // block of 32 positions
    let o    = lid % OCT;             // octet of dimensions
    let first = kvh * HD + slice * DW + 8u * o;  // element index in a cache row
    let bpos  = pbeg + 32u * b;       // the block's first position in the sequence
    var base  = 0u;
    if (32u * b < np) { base = kv_row(col, bpos); }

    // 1. The block's first U V rows, in flight while the softmax is taken.
    var vq: array<vec4<u32>, U_MAX>;
    load_v(&vq, col, base, bpos, 32u * b, np, first);

    // 2. The scores into e_s: taken here (FUSED), or read (coalesced: consecutive threads,
    // consecutive positions). Positions past np are never read before the exps overwrite them.
    if (FUSED) {
        fused_scores(lid, t, kvh, h0, col, pbeg, np);
    } else {
        for (var i = lid; i < GROUP * SUPER; i += WG) {
            let j = i / SUPER;
            let r = i % SUPER;
            var s = 0.0;
            if (r < np) { s = src[(row0 + j) * p.ld + pbeg + r]; }
            e_s[j * 16u * EST + (r / 32u) * EST + r % 32u] = s;
        }
        workgroupBarrier();
    }
    // Pair (j, block) of the G x 16, by threads lid, lid + WG, ... (WG may be 16): the block's max.
    for (var q = lid; q < GROUP * 16u; q += WG) {
        let at = (q / 16u) * 16u * EST + (q % 16u) * EST;
        let nq = min(32u, np - min(np, 32u * (q % 16u)));  // its positions
        var m  = bitcast<f32>(0xff7fffffu);  // -FLT_MAX (as attention_split_softmax starts its max)
        for (var k = 0u; k < nq; k++) { m = max(m, e_s[at + k]); }
        bl_s[q] = m;
    }
    workgroupBarrier();
    if (lid < GROUP) {
        var m = bl_s[16u * lid];
        for (var k = 1u; k < 16u; k++) { m = max(m, bl_s[16u * lid + k]); }
        mx_s[lid] = m;
    }
    workgroupBarrier();
    // e = exp_fixed(s - m_c) by every thread (0 past np: +0 leaves a block sum's bits as they are).
    for (var i = lid; i < GROUP * SUPER; i += WG) {
        let j  = i / SUPER;
        let r  = i % SUPER;
        let at = j * 16u * EST + (r / 32u) * EST + r % 32u;
        var e  = 0.0;
        if (r < np) { e = exp_fixed(e_s[at] - mx_s[j]); }
        e_s[at] = e;
    }
    workgroupBarrier();
    // Pair (j, block): the block's sum in order (+0 for a block past the column's positions).
    for (var q = lid; q < GROUP * 16u; q += WG) {
        let at = (q / 16u) * 16u * EST + (q % 16u) * EST;
        var s  = 0.0;
        for (var k = 0u; k < 32u; k++) { s = s + e_s[at + k]; }
        bl_s[q] = s;
    }
    workgroupBarrier();
    if (lid < GROUP) {
        var l = 0.0;
        for (var k = 0u; k < 16u; k++) { l = l + bl_s[16u * lid + k]; }
        inv_s[lid] = div_rn(1.0, l);
        if (slice == 0u) {
            let at = 2u * ((row0 + lid) * p.nsb_ld + sb);
            sml[at] = mx_s[lid];
            sml[at + 1u] = l;
        }
    }
    workgroupBarrier();
    // 3. The probabilities, f16-rounded, [position][head] (0 past np and for missing heads).
    for (var r = lid; r < SUPER; r += WG) {
        var pr = vec4<f32>(0.0);
        if (r < np) {
            for (var j = 0u; j < GROUP; j++) { pr[j] = round_f16(e_s[j * 16u * EST + (r / 32u) * EST + r % 32u] * inv_s[j]); }
        }
        ws[r] = pr;
    }
    workgroupBarrier();

    // 4. Thread (b, o): its block's 32 positions in order, 8 dimensions x G heads, the next U rows'
    // loads in flight during each group's sums. A block past np keeps +0 (what its zeros would add up
    // to: the sums are never -0); inside, positions past np add +0 (V and the probabilities are 0).
    var acc: array<vec4<f32>, 8>;  // [dimension 8 o + i][head]
    for (var i = 0u; i < 8u; i++) { acc[i] = vec4<f32>(0.0); }
    if (32u * b < np) {
        for (var g = 0u; g < 32u / U; g++) {
            var vn: array<vec4<u32>, U_MAX>;
            if (g + 1u < 32u / U) { load_v(&vn, col, base, bpos, 32u * b + U * (g + 1u), np, first); }
            for (var k = 0u; k < U; k++) {
                let pv = ws[32u * b + U * g + k];
                for (var w = 0u; w < 4u; w++) {
                    let h = unpack2x16float(vq[k][w]);
                    acc[2u * w]      = acc[2u * w] + pv * h.x;
                    acc[2u * w + 1u] = acc[2u * w + 1u] + pv * h.y;
                }
            }
            vq = vn;
        }
    }
    workgroupBarrier();  // (ws's probabilities read by every thread)

    // 5. The superblock: its blocks in order, 8 at a time through ws, thread d < DW (all G heads).
    var s = vec4<f32>(0.0);
    for (var h = 0u; h < 2u; h++) {
        if (b / 8u == h) {
            for (var i = 0u; i < 8u; i++) { ws[(b % 8u) * DW + 8u * o + i] = acc[i]; }
        }
        workgroupBarrier();
        if (lid < DW) {
            for (var bb = 0u; bb < 8u; bb++) { s = s + ws[bb * DW + lid]; }
        }
        workgroupBarrier();
    }
    if (lid < DW) {
        for (var j = 0u; j < GROUP; j++) { part[((row0 + j) * p.nsb_ld + sb) * HD + slice * DW + lid] = s[j]; }
    }
}
