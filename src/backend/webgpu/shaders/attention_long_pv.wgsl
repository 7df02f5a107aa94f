// attention_long_pv: the third kernel of one query's attention over a long context
// (webgpu_attention_long.cpp): each block of 32 positions' share of the output,
//   part[blk][kvh][j][d] = sum_(pos in block blk) prob[kvh][j][pos] v[pos][kvh hd + d]
// summed in position order from 0 (the inner level of cpu::sum_positions's order), with the
// probabilities of attention_prefill_softmax.wgsl. Products of two f16 values are exact in f32 (an
// f32 cache rounds them, mul_rn). attention_prefill_combine.wgsl adds the blocks into superblocks
// and those in order; with one block the workgroup writes `out` itself (0 + 0 + b is b).
//
//   probs: [n_head_kv][G][ld] f32   v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32 (u32 words)
//   out: [n_head hd] f32   part: [n_blocks][n_head_kv][G][hd] f32
// Bindings: 0 probs (read), 1 v_cache (read), 2 out (read_write), 3 part (read_write), 4 params
// Dispatch: (ceil(n_pos / 32), n_head_kv). The block's G x 32 probabilities and 32 V rows (the KV
// head's words) are loaded coalesced into workgroup memory, then thread (j, w) sums V word w (two
// dimensions of an f16 cache, one of an f32 one) of head j over the 32 positions.

// #include "lib/numerics.wgsl"

const BLK = 32u;

override WG: u32 = 256u;
override HD: u32 = 128u;        // head_dim, a multiple of 4
override GROUP: u32 = 4u;       // G = n_head / n_head_kv
override V_F16: bool = true;
override WPR: u32 = 64u;        // u32 words of a V row of one KV head: HD / 2 with an f16 cache, else HD

struct Params {
    n_pos: u32,       // positions the query sees
    n_embd_kv: u32,   // cache elements per position
    v_offset: u32,    // element index of v_cache[0, 0]
    ld: u32,          // f32 elements between probability rows
    n_head_kv: u32,
    out_offset: u32,  // f32 index of out[0]
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> probs: array<f32>;
@group(0) @binding(1) var<storage, read> v_cache: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> part: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> p_s: array<f32, GROUP * BLK>;  // [j][position]
var<workgroup> v_s: array<u32, BLK * WPR>;    // [position][word]

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let blk = wid.x;
    let kvh = wid.y;
    let p0  = blk * BLK;
    let n   = min(BLK, p.n_pos - p0);

    for (var i = lid; i < BLK * WPR; i += WG) {
        let pp = i / WPR;
        var v = 0u;
        if (pp < n) {
            let e0 = p.v_offset + (p0 + pp) * p.n_embd_kv + kvh * HD;  // element index of the row
            v = v_cache[select(e0, e0 / 2u, V_F16) + i % WPR];
        }
        v_s[i] = v;
    }
    for (var i = lid; i < GROUP * BLK; i += WG) {
        let pp = i % BLK;
        var pr = 0.0;
        if (pp < n) { pr = probs[(kvh * GROUP + i / BLK) * p.ld + p0 + pp]; }
        p_s[i] = pr;
    }
    workgroupBarrier();

    for (var o = lid; o < GROUP * WPR; o += WG) {
        let j = o / WPR;
        let w = o % WPR;
        var acc = vec2<f32>(0.0, 0.0);
        for (var pp = 0u; pp < BLK; pp++) {
            if (pp < n) {
                let pr = p_s[j * BLK + pp];
                if (V_F16) {
                    let v = unpack2x16float(v_s[pp * WPR + w]);
                    acc = acc + vec2<f32>(pr * v.x, pr * v.y);
                } else {
                    acc.x = acc.x + mul_rn(pr, bitcast<f32>(v_s[pp * WPR + w]));
                }
            }
        }
        let d0 = select(w, 2u * w, V_F16);
        let at = ((blk * p.n_head_kv + kvh) * GROUP + j) * HD + d0;
        let ot = p.out_offset + (kvh * GROUP + j) * HD + d0;
        if (nwg.x > 1u) {
            part[at] = acc.x;
            if (V_F16) { part[at + 1u] = acc.y; }
        } else {
            out[ot] = acc.x;
            if (V_F16) { out[ot + 1u] = acc.y; }
        }
    }
}
