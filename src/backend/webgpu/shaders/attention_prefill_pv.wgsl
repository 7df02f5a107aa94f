// attention_prefill_pv: the third prompt-attention kernel (webgpu_attention_prefill.cpp), the output
//   out[t][h][d] = sum_pos prob[kvh][r][pos] v[pos][kvh hd + d]     (r = t G + j, h = kvh G + j)
// over the positions row r sees (0 .. pos0 + t), with the probabilities of
// attention_prefill_softmax.wgsl, in cpu::attention_row's order (issue 52): products of two f16
// values are exact in f32 (an f32 cache rounds them, mul_rn); a row of at most 512 positions sums
// them in cpu::sum_positions's order (blocks of 32 positions in order, the blocks in order): the
// output. A longer row (the block order, the softmax kernel's header) has the probabilities f16(e)
// (e with an f32 cache) of each block's own max; each block's sums o_b (positions in order from 0)
// are joined into their chunk's, k = blocks 2k, 2k + 1: O_k = ((0 + a_b o_b) + a_b' o_b'), the
// chunks into their superblock's the same way, the superblocks into the row's (here, or by
// attention_prefill_combine.wgsl when split), and out = O * r, r = 1 / L. A segment is one
// superblock: a split row block writes its superblocks' O_c.
//
//   probs: [n_head_kv][T G][ld] f32   v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32 (u32 words)
//   out: [n_head hd, T] f32
//   part: the sums of each segment, [n_seg][n_head_kv][T G][hd] f32
//   wts: the softmax kernel's [n_head_kv][T G][w_ld] f32 (its header: a long row's a_b at [b], a_k
//   at [16 S + k], a_c at [24 S + c], r at [27 S])
// Bindings: 0 probs (read), 1 v_cache (read), 2 out (read_write), 3 part (read_write), 4 wts (read),
// 5 params
// Dispatch: (n_head_kv ceil(hd / BD), ceil(T G / BR), n_seg). A workgroup owns BR rows x BD
// dimensions of one KV head over the positions [seg seg_len, (seg + 1) seg_len) (segments split the
// long rows of a causal prompt so that workgroups get similar work). A row block whose positions
// fit in one segment writes `out`; one with several writes each segment's sums to `part`, and
// segments past the block's last position do nothing. Row blocks run from the last (longest) one
// down, so the longest workgroups start first. Per chunk of PC positions:
//   1. the chunk's probabilities (4 rows per vec4; zero where a row may not see the position) and
//      V rows (4 dimensions per vec4) are loaded coalesced and stored to workgroup memory, the
//      probability rows padded (BR / 4 + 1 vec4s) so the transposing stores do not collide;
//   2. thread (tr, td) keeps the sums of rows 4 tr .. 4 tr + 3 (the G heads of one token when G =
//      4) x dimensions 4 td .. 4 td + 3, a block sum, a superblock sum and a total each: per
//      position, 2 vec4 loads feed 16 products.
//      Positions every row of the thread sees skip the causal test; the few that only some rows see
//      (G < 4) select per row, so a masked product (0 x v, NaN for an infinite v) is never added.

// #include "lib/numerics.wgsl"

const TI = 4u;  // rows per thread
const TJ = 4u;  // dimensions per thread

override V_F16: bool = true;
override BR: u32 = 32u;            // rows per workgroup (a multiple of TI)
override BD: u32 = 64u;            // dimensions per workgroup (a multiple of TJ)
override PC: u32 = 32u;            // positions per staged chunk (16 or 32: blocks of 32 end on a chunk's end)
override NR: u32 = BR / TI;        // threads along rows
override ND: u32 = BD / TJ;        // threads along dimensions
override WG: u32 = NR * ND;
override LDP: u32 = BR / 4u + 1u;  // vec4s per staged position of probabilities (one of padding)
override GROUP: u32 = 1u;  // G = n_head / n_head_kv (= Params.group; a constant, for the divisions by it)

struct Params {
    head_dim: u32,
    group: u32,       // G = n_head / n_head_kv (the kernel divides by the override GROUP)
    n_rows: u32,      // T G
    pos0: u32,        // position of token 0
    n_pos: u32,       // pos0 + T
    n_embd_kv: u32,   // cache elements per position
    v_offset: u32,    // element index of v_cache[0, 0]
    ld: u32,          // f32 elements between probability rows
    seg_len: u32,     // positions per segment (512, one superblock, when rows are split)
    n_head_kv: u32,
    out_offset: u32,  // f32 index of out[0, 0]
    out_stride: u32,  // f32 elements between tokens of out
    nsb_ld: u32,      // S: superblocks per row (of ld positions)
    w_ld: u32,        // f32 elements between rows of wts
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> probs: array<f32>;
@group(0) @binding(1) var<storage, read> v_cache: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> part: array<f32>;
@group(0) @binding(4) var<storage, read> wts: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> p_tile: array<vec4<f32>, PC * LDP>;       // [position][row / 4], padded
var<workgroup> v_tile: array<vec4<f32>, PC * (BD / 4u)>;  // [position][dimension / 4]

// a * b as the CPU rounds it: exact when both are f16 values (so contraction cannot change it).
fn prod(a: f32, b: f32) -> f32 {
    if (V_F16) { return a * b; }
    return mul_rn(a, b);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let hd  = p.head_dim;
    let ndb = (hd + BD - 1u) / BD;
    let kvh = wid.x / ndb;
    let d0  = (wid.x % ndb) * BD;
    let r0  = (nwg.y - 1u - wid.y) * BR;
    let seg = wid.z;
    let tr  = lid / ND;
    let td  = lid % ND;

    // Positions of this workgroup: its segment, up to what the block's last token sees.
    let n_block = p.pos0 + (min(r0 + BR, p.n_rows) - 1u) / GROUP + 1u;
    let n_seg   = (n_block + p.seg_len - 1u) / p.seg_len;  // segments of this row block
    if (seg >= n_seg) { return; }                            // (uniform)
    let s0 = seg * p.seg_len;
    let s1 = min(s0 + p.seg_len, n_block);
    // Positions below n_lo are seen by all four rows of the thread, below n_hi by its last one
    // (rows past T G take the last row's edge: their probabilities are staged as zeros).
    let n_lo = p.pos0 + min(r0 + TI * tr, p.n_rows - 1u) / GROUP + 1u;
    let n_hi = p.pos0 + min(r0 + TI * tr + TI - 1u, p.n_rows - 1u) / GROUP + 1u;
    var n_see: array<u32, 4>;  // per row of the thread
    var wrow: array<u32, 4>;   // the row's weights in wts
    var blocks: array<bool, 4>;  // the row takes the block order
    for (var i = 0u; i < TI; i++) {
        n_see[i]  = p.pos0 + min(r0 + TI * tr + i, p.n_rows - 1u) / GROUP + 1u;
        wrow[i]   = (kvh * p.n_rows + min(r0 + TI * tr + i, p.n_rows - 1u)) * p.w_ld;
        blocks[i] = n_see[i] > 512u;
    }
    let S = p.nsb_ld;

    var blk: array<f32, 16>;  // [i * TJ + j]: the open block of 32 positions
    var chk: array<f32, 16>;  // the block order's open chunk of 64
    var sup: array<f32, 16>;  // the open superblock of 512
    var tot: array<f32, 16>;  // the closed superblocks (each times its weight r_c when not split)

    for (var c0 = s0; c0 < s1; c0 += PC) {
        // The weights of the block (a_b) and chunk (a_k) this chunk of positions is in, for each row
        // of the thread, loaded now so that the loads overlap the staging and products (in bounds for
        // every row: b < 16 S, k < 8 S; where the row does not see the block, or is a short row, they
        // are not used). (Loaded at the joins under branches instead: H200 pp2048 P·V 311.73 against
        // 282.01 us per dispatch.)
        var wa = vec4<f32>(1.0);
        var wk = vec4<f32>(1.0);
        if (blocks[TI - 1u]) {
            for (var i = 0u; i < TI; i++) {
                wa[i] = wts[wrow[i] + c0 / 32u];
                wk[i] = wts[wrow[i] + 16u * S + c0 / 64u];
            }
        }
        workgroupBarrier();  // the previous chunk is consumed
        if (c0 % 32u == 0u) {
            for (var e = 0u; e < TI * TJ; e++) { blk[e] = 0.0; }
        }
        for (var e = lid; e < PC * (BR / 4u); e += WG) {
            let pp  = e % PC;
            let rq  = e / PC;
            let pos = c0 + pp;
            var v = vec4<f32>(0.0);
            for (var i = 0u; i < 4u; i++) {
                let r = r0 + 4u * rq + i;
                if (r < p.n_rows && pos <= p.pos0 + r / GROUP) {
                    v[i] = probs[(kvh * p.n_rows + r) * p.ld + pos];
                }
            }
            p_tile[pp * LDP + rq] = v;
        }
        for (var e = lid; e < PC * (BD / 4u); e += WG) {
            let pp  = e / (BD / 4u);
            let c   = e % (BD / 4u);
            let pos = c0 + pp;
            let d   = d0 + 4u * c;
            var v = vec4<f32>(0.0);
            if (pos < p.n_pos && d < hd) {
                let vi = p.v_offset + pos * p.n_embd_kv + kvh * hd + d;  // element index
                if (V_F16) {
                    v = vec4<f32>(unpack2x16float(v_cache[vi / 2u]), unpack2x16float(v_cache[vi / 2u + 1u]));
                } else {
                    v = vec4<f32>(bitcast<f32>(v_cache[vi]), bitcast<f32>(v_cache[vi + 1u]),
                                  bitcast<f32>(v_cache[vi + 2u]), bitcast<f32>(v_cache[vi + 3u]));
                }
            }
            v_tile[pp * (BD / 4u) + c] = v;
        }
        workgroupBarrier();
        let n_all = select(0u, min(PC, n_lo - c0), n_lo > c0);
        let n_any = select(0u, min(PC, n_hi - c0), n_hi > c0);
        for (var pp = 0u; pp < n_all; pp++) {
            let pv = p_tile[pp * LDP + tr];
            let vv = v_tile[pp * (BD / 4u) + td];
            for (var i = 0u; i < TI; i++) {
                for (var j = 0u; j < TJ; j++) { blk[i * TJ + j] = blk[i * TJ + j] + prod(pv[i], vv[j]); }
            }
        }
        for (var pp = n_all; pp < n_any; pp++) {
            let pv = p_tile[pp * LDP + tr];
            let vv = v_tile[pp * (BD / 4u) + td];
            for (var i = 0u; i < TI; i++) {
                let seen = c0 + pp < n_see[i];
                for (var j = 0u; j < TJ; j++) {
                    blk[i * TJ + j] = select(blk[i * TJ + j], blk[i * TJ + j] + prod(pv[i], vv[j]), seen);
                }
            }
        }
        // A block ends at every 32nd position and at the segment's end (a row's positions past its
        // causal edge add nothing: its sums are already final), a superblock at every 512th.
        let c_end = c0 + PC;
        if (c_end % 32u == 0u || c_end >= s1) {
            // Long rows: o_b into the chunk where the row sees the block, the chunk into the
            // superblock at its end where it sees the chunk; a short row: o_b into its superblock.
            // Selects only (the weights are loaded).
            let b = c0 / 32u;
            let k = c0 / 64u;
            let k_end = c_end % 64u == 0u || c_end >= s1;
            for (var i = 0u; i < TI; i++) {
                let fb = blocks[i] && 32u * b < n_see[i];
                let fk = blocks[i] && k_end && 64u * k < n_see[i];
                for (var j = 0u; j < TJ; j++) {
                    let e  = i * TJ + j;
                    let c1 = select(chk[e], chk[e] + mul_rn(wa[i], blk[e]), fb);
                    let so = select(sup[e], sup[e] + blk[e], !blocks[i]);  // (a short row)
                    sup[e] = select(so, sup[e] + mul_rn(wk[i], c1), fk);
                    chk[e] = select(c1, 0.0, k_end);
                }
            }
            if (c_end % 512u == 0u || c_end >= s1) {
                let c = c0 / 512u;  // the superblock closed (a chunk never crosses one: PC divides 512)
                for (var i = 0u; i < TI; i++) {
                    // (rows that see none of it: their sums stay as they are)
                    let r = r0 + TI * tr + i;
                    var w = 1.0;
                    if (n_seg == 1u && r < p.n_rows && 512u * c < n_see[i]) {
                        w = select(1.0, wts[wrow[i] + 24u * S + c], blocks[i]);  // a_c (a short row: its output)
                    }
                    for (var j = 0u; j < TJ; j++) {
                        let e = i * TJ + j;
                        if (n_seg > 1u) {
                            tot[e] = tot[e] + sup[e];  // one superblock per segment: o_c, weighted by the combine
                        } else if (r < p.n_rows && 512u * c < n_see[i]) {
                            tot[e] = tot[e] + mul_rn(w, sup[e]);
                        }
                        sup[e] = 0.0;
                    }
                }
            }
        }
    }

    for (var i = 0u; i < TI; i++) {
        let r = r0 + TI * tr + i;
        if (r >= p.n_rows) { continue; }
        for (var j = 0u; j < TJ; j++) {
            let d = d0 + TJ * td + j;
            if (d >= hd) { continue; }
            if (n_seg > 1u) {
                part[((seg * p.n_head_kv + kvh) * p.n_rows + r) * hd + d] = tot[i * TJ + j];
            } else {
                let h = kvh * GROUP + r % GROUP;
                var o = tot[i * TJ + j];
                if (blocks[i]) { o = mul_rn(o, wts[wrow[i] + 27u * S]); }  // O r, r = 1 / L
                out[p.out_offset + (r / GROUP) * p.out_stride + h * hd + d] = o;
            }
        }
    }
}
