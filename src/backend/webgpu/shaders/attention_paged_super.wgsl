// attention_paged_super: a paged batch's softmax and P·V, or one query's over a contiguous cache
// (without PAGED: column t at position pos0 + t; webgpu_attention_paged.cpp), after
// attention_split_scores.wgsl: a workgroup per (superblock of 512 positions, KV head, column), all G
// query heads at once, with the CPU's operations in the CPU's order (cpu::attention_row): a column
// of at most SUPER positions (one superblock; attention_split_combine.wgsl copies its sums):
//   m_c[j]  = max of the superblock's scores (exact in any order);
//   e       = exp_fixed(s - m_c[j]);  bl[j][b] = ((0 + e[32 b]) + e[32 b + 1]) + ...;
//   l_c[j]  = ((0 + bl[j][0]) + bl[j][1]) + ...;  prob = f16(e * (1 / l_c[j]));
//   part[t][kvh G + j][sb][d] = the superblock's sum of prob * v[pos][kvh hd + d]: each block of 32
//             positions summed in position order from 0, then the blocks in order from 0 (products
//             of two f16 values, exact in f32, so a fused multiply-add gives the same bits);
//   sml[t][kvh G + j][sb] = (m_c[j], l_c[j]).
// No softmax dispatch: the workgroup takes its superblock's max and sums from the scores itself.
// A column of more than SUPER positions takes issue 52's block order instead (cpu_ops.h: every op an
// f32 op rounded once, nothing normalised here):
//   block b (32 positions): m_b = max s_i (from -FLT_MAX);  e_i = exp_fixed(s_i - m_b);
//     l_b = ((0 + e_first) + ...) + e_last;  o_b[d] = ((0 + f16(e_first) v_first[d]) + ...);
//   chunk c = blocks 2c, 2c + 1 joined: M_c = max m_b;  a_b = exp_fixed(m_b - M_c);
//     L_c = (0 + a_2c l_2c) + a_2c+1 l_2c+1;  O_c[d] = (0 + a_2c o_2c[d]) + a_2c+1 o_2c+1[d];
//   the superblock = its chunks joined the same way, in order: M_s, L_s, O_s[d]
//   part[t][kvh G + j][sb][d] = O_s[d];  sml[...] = (M_s, L_s)   (attention_split_combine joins the row)
// (a join of one part is exact: exp_fixed(0) = 1, 0 + 1 x = x). Columns of at most SUPER positions
// keep the single-pass softmax above.
// V is read by whole head rows (DW = HD) or slices of DW dimensions: thread (block b, octet o) loads
// dimensions 8 o .. 8 o + 7 of the slice for its block's 32 positions by vec4 loads (OCT = DW / 8
// threads cover a row's DW halves, contiguous), U positions ahead of its sums, straight into
// registers, and keeps the 8 x G sums of its block there:
// each V row is read once, coalesced, and nothing of V passes through workgroup memory.
//
//   scores: [T][n_head_kv][G][ld] f32 (the scores kernel's)
//   v_cache: [n_head_kv hd, rows] f16, 8 per vec4<u32> (v_offset and a row a multiple of 8 elements)
//   part: [T][n_head][nsb_ld][hd] f32    sml: [T][n_head][nsb_ld][2] f32
// Bindings: 0 scores, 1 v_cache, 2 cols, 3 pages (read); 4 part, 5 sml (read_write); 6 params
// Dispatch: (nsb_max HD / DW, n_head_kv SUB, T), WG = 16 OCT threads: x = superblock (HD / DW) + slice
// of DW dimensions (every slice takes the softmax itself; slice 0 writes sml); a workgroup past its
// column's last superblock returns at once.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"

override HD: u32 = 128u;        // head_dim, a multiple of DW
override DW: u32 = 128u;        // dimensions per workgroup, a multiple of 8, at most 128
override GROUP: u32 = 4u;       // query heads per workgroup, at most 4 (one vec4 of heads)
// Workgroups per KV head (G = SUB GROUP: a KV head's G query heads in SUB groups of GROUP, each a
// workgroup of its own; the scores' [n_head_kv][G] rows are the same memory as [n_head_kv SUB][GROUP]).
override SUB: u32 = 1u;
override OCT: u32 = DW / 8u;    // threads per V row segment (8 dimensions each)
override WG: u32 = 16u * OCT;   // 16 blocks of 32 positions x OCT
override WSN: u32 = 512u;       // vec4s of ws: max(512, 8 DW)
// V rows each thread loads ahead of its sums (H200 64 streams d0 / d256: 12,797.6 / 11,058.3 tok/s
// with 4, 12,632.7 / 10,874.6 with 8).
const U: u32 = 4u;
// V's type: f16 (8 dimensions per vec4), or f32 (2 vec4s per 8 dimensions: U / 2 positions per load
// group; the probabilities not rounded to f16, each product rounded once)
override V_F16: bool = true;

const SUPER: u32 = 512u;        // positions per superblock (cpu::k_pos_super)
const EST: u32 = 33u;           // e_s's stride per block (odd: the 16 block threads of a head in other banks)

struct Params {
    n_embd_kv: u32,    // cache elements per row
    v_offset: u32,     // element index of v_cache[0, 0] (a multiple of 8)
    ld: u32,           // f32 elements between rows of scores
    n_head_kv: u32,    // KV heads x SUB
    pos0: u32,         // without PAGED: position of column 0
    max_pages: u32,
    cols_offset: u32,
    pages_offset: u32,
    nsb_ld: u32,       // superblocks per (column, head) row of part and sml
    rn_zero: u32,      // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> scores: array<f32>;
@group(0) @binding(1) var<storage, read> v_cache: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> cols: array<i32>;
@group(0) @binding(3) var<storage, read> pages: array<i32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;
@group(0) @binding(5) var<storage, read_write> sml: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> e_s: array<f32, 4u * 16u * EST>;  // [j][block][33]: scores, then e
var<workgroup> bl_s: array<f32, 64>;             // [j][block]: block maxima m_b
var<workgroup> lb_s: array<f32, 64>;             // [j][block]: block sums
var<workgroup> ab_s: array<f32, 64>;             // block order: [j][block]: a_b = exp_fixed(m_b - M_c)
var<workgroup> ac_s: array<f32, 32>;             // block order: [j][chunk]: A_c = exp_fixed(M_c - M_s)
var<workgroup> mx_s: array<f32, 4>;              // [j]
var<workgroup> inv_s: array<f32, 4>;             // [j]
// [position]: the G probabilities (0 for missing heads); after the sums, [block % 8][d]: the G
// block sums of 8 blocks at a time.
var<workgroup> ws: array<vec4<f32>, WSN>;

// The U V vec4s of positions r0 .. r0 + U - 1 of block b (zeros past the superblock's np positions).
// (f32 V: the 2 vec4s of each of positions r0 .. r0 + U / 2 - 1)
fn load_v(vq: ptr<function, array<vec4<u32>, U>>, col: KvColumn, base: u32, bpos: u32, r0: u32, np: u32,
          first: u32) {
    for (var k = 0u; k < U; k++) { (*vq)[k] = vec4<u32>(0u); }
    if (V_F16) {
        for (var k = 0u; k < U; k++) {
            let r = r0 + k;  // position in the superblock
            if (r < np) {
                let row = kv_row_in_block(col, base, bpos, bpos + (r % 32u));
                (*vq)[k] = v_cache[(p.v_offset + row * p.n_embd_kv + first) / 8u];
            }
        }
    } else {
        for (var k = 0u; k < U / 2u; k++) {
            let r = r0 + k;
            if (r < np) {
                let row = kv_row_in_block(col, base, bpos, bpos + (r % 32u));
                let at  = (p.v_offset + row * p.n_embd_kv + first) / 4u;
                (*vq)[2u * k] = v_cache[at];
                (*vq)[2u * k + 1u] = v_cache[at + 1u];
            }
        }
    }
}

// a * b per component, each product rounded on its own (mul_rn).
fn mul4_rn(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(mul_rn(a.x, b.x), mul_rn(a.y, b.y), mul_rn(a.z, b.z), mul_rn(a.w, b.w));
}

// Block b's a_b of the 4 heads (the block order).
fn ab4(b: u32) -> vec4<f32> {
    return vec4<f32>(ab_s[b], ab_s[16u + b], ab_s[32u + b], ab_s[48u + b]);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t    = wid.z;
    let kvh  = wid.y;
    let sb   = wid.x / (HD / DW);
    let slice = wid.x % (HD / DW);
    let col  = kv_column_uniform(lid, t);
    let n    = col.pos + 1u;
    if (sb >= (n + SUPER - 1u) / SUPER) { return; }  // (uniform: the column is)
    let row0 = (t * p.n_head_kv + kvh) * GROUP;
    let pbeg = SUPER * sb;
    let np   = min(SUPER, n - pbeg);  // positions of this superblock
    let bo   = n > SUPER;             // the block order (uniform: the column is)
    let nbk  = (np + 31u) / 32u;      // its blocks
    let b    = lid / OCT;             // block of 32 positions
    let o    = lid % OCT;             // octet of dimensions
    let first = (kvh / SUB) * HD + slice * DW + 8u * o;  // element index in a cache row
    let bpos  = pbeg + 32u * b;       // the block's first position in the sequence
    var base  = 0u;
    if (32u * b < np) { base = kv_row(col, bpos); }

    // 1. The block's first U V rows, in flight while the softmax is taken.
    var vq: array<vec4<u32>, U>;
    load_v(&vq, col, base, bpos, 32u * b, np, first);

    // 2. The scores into e_s (coalesced: consecutive threads, consecutive positions).
    for (var i = lid; i < GROUP * SUPER; i += WG) {
        let j = i / SUPER;
        let r = i % SUPER;
        var s = 0.0;
        if (r < np) { s = scores[(row0 + j) * p.ld + pbeg + r]; }
        e_s[j * 16u * EST + (r / 32u) * EST + r % 32u] = s;
    }
    workgroupBarrier();
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
    // e = exp_fixed(s - m_c), or with bo exp_fixed(s - m_b), by every thread (0 past np: +0 leaves a
    // block sum's bits as they are).
    for (var i = lid; i < GROUP * SUPER; i += WG) {
        let j  = i / SUPER;
        let r  = i % SUPER;
        let at = j * 16u * EST + (r / 32u) * EST + r % 32u;
        var m  = mx_s[j];
        if (bo) { m = bl_s[16u * j + r / 32u]; }
        var e  = 0.0;
        if (r < np) { e = exp_fixed(e_s[at] - m); }
        e_s[at] = e;
    }
    workgroupBarrier();
    // Pair (j, block): the block's sum in order (+0 for a block past the column's positions).
    for (var q = lid; q < GROUP * 16u; q += WG) {
        let at = (q / 16u) * 16u * EST + (q % 16u) * EST;
        var s  = 0.0;
        for (var k = 0u; k < 32u; k++) { s = s + e_s[at + k]; }
        lb_s[q] = s;
        if (bo) {
            // The block's a_b = exp_fixed(m_b - M_c) in its chunk (M_c: the pair's max; a missing second
            // block's m is -FLT_MAX), and the chunk's A_c = exp_fixed(M_c - M_s) (M_s = mx_s: the max
            // of every m_b), each pair at once instead of one thread's chain.
            let mc = max(bl_s[q & ~1u], bl_s[q | 1u]);
            ab_s[q] = exp_fixed(bl_s[q] - mc);
            if (q % 2u == 0u) { ac_s[(q / 16u) * 8u + (q % 16u) / 2u] = exp_fixed(mc - mx_s[q / 16u]); }
        }
    }
    workgroupBarrier();
    if (bo && lid < GROUP) {
        // The block order: the blocks joined into chunks of 2, the chunks into the superblock.
        let j = lid;
        var lt = 0.0;
        for (var c = 0u; 2u * c < nbk; c++) {
            let b0 = 16u * j + 2u * c;
            var lc = 0.0 + mul_rn(ab_s[b0], lb_s[b0]);
            if (2u * c + 1u < nbk) { lc = lc + mul_rn(ab_s[b0 + 1u], lb_s[b0 + 1u]); }
            lt = lt + mul_rn(ac_s[8u * j + c], lc);
        }
        if (slice == 0u) {
            let at = 2u * ((row0 + j) * p.nsb_ld + sb);
            sml[at] = mx_s[j];
            sml[at + 1u] = lt;
        }
    }
    if (!bo && lid < GROUP) {
        var l = 0.0;
        for (var k = 0u; k < 16u; k++) { l = l + lb_s[16u * lid + k]; }
        inv_s[lid] = div_rn(1.0, l);
        if (slice == 0u) {
            let at = 2u * ((row0 + lid) * p.nsb_ld + sb);
            sml[at] = mx_s[lid];
            sml[at + 1u] = l;
        }
    }
    workgroupBarrier();
    // 3. The probabilities, f16-rounded, [position][head] (0 past np and for missing heads); with bo
    // f16(e) (nothing normalised).
    for (var r = lid; r < SUPER; r += WG) {
        var pr = vec4<f32>(0.0);
        if (r < np) {
            for (var j = 0u; j < GROUP; j++) {
                let e = e_s[j * 16u * EST + (r / 32u) * EST + r % 32u];
                var x = e;
                if (!bo) { x = e * inv_s[j]; }
                if (V_F16) { x = round_f16(x); }
                pr[j] = x;
            }
        }
        ws[r] = pr;
    }
    workgroupBarrier();

    // 4. Thread (b, o): its block's 32 positions in order, 8 dimensions x G heads, the next U rows'
    // loads in flight during each group's sums. A block past np keeps +0 (what its zeros would add up
    // to: the sums are never -0); inside, positions past np add +0 (V and the probabilities are 0).
    var acc: array<vec4<f32>, 8>;  // [dimension 8 o + i][head]
    for (var i = 0u; i < 8u; i++) { acc[i] = vec4<f32>(0.0); }
    let pu = select(U / 2u, U, V_F16);  // positions per load group
    if (32u * b < np) {
        for (var g = 0u; g < 32u / pu; g++) {
            var vn: array<vec4<u32>, U>;
            if (g + 1u < 32u / pu) { load_v(&vn, col, base, bpos, 32u * b + pu * (g + 1u), np, first); }
            for (var k = 0u; k < pu; k++) {
                let pv = ws[32u * b + pu * g + k];
                if (V_F16) {
                    for (var w = 0u; w < 4u; w++) {
                        let h = unpack2x16float(vq[k][w]);
                        acc[2u * w]      = acc[2u * w] + pv * h.x;
                        acc[2u * w + 1u] = acc[2u * w + 1u] + pv * h.y;
                    }
                } else {  // (f32 x f32: each product rounded on its own)
                    for (var i = 0u; i < 8u; i++) {
                        acc[i] = acc[i] + mul4_rn(pv, vec4<f32>(bitcast<f32>(vq[2u * k + i / 4u][i % 4u])));
                    }
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
        if (lid < DW && !bo) {
            for (var bb = 0u; bb < 8u; bb++) { s = s + ws[bb * DW + lid]; }
        }
        if (lid < DW && bo) {  // chunks 4 h .. 4 h + 3: (0 + a o) + a o, then into s by A_c
            for (var c = 4u * h; c < 4u * h + 4u && 2u * c < nbk; c++) {
                let b0 = 2u * c;
                var y = vec4<f32>(0.0) + mul4_rn(ab4(b0), ws[(b0 % 8u) * DW + lid]);
                if (b0 + 1u < nbk) { y = y + mul4_rn(ab4(b0 + 1u), ws[((b0 + 1u) % 8u) * DW + lid]); }
                let ac = vec4<f32>(ac_s[c], ac_s[8u + c], ac_s[16u + c], ac_s[24u + c]);
                s = s + mul4_rn(ac, y);
            }
        }
        workgroupBarrier();
    }
    if (lid < DW) {
        for (var j = 0u; j < GROUP; j++) { part[((row0 + j) * p.nsb_ld + sb) * HD + slice * DW + lid] = s[j]; }
    }
}
