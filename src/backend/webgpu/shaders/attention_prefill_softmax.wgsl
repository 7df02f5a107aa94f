// attention_prefill_softmax: the second prompt-attention kernel (webgpu_attention_prefill.cpp). Turns
// each row of scores written by attention_prefill_scores.wgsl into probabilities, in place, with
// attention.wgsl's numerics (the CPU's order of operations):
//   mx = max_pos s,  e = exp_rn(s - mx),  sum = sum_pos e (cpu::sum_positions's order),  inv = 1 / sum,
//   prob = e * inv, rounded to f16 with an f16 V cache.
// Row r of KV head kvh (token t = r / G) holds positions 0 .. pos0 + t; nothing past them is touched.
//
//   scores: [n_head_kv][T G][ld] f32 (read and written)
// Bindings: 0 scores (read_write), 1 params (uniform)
// Dispatch: (T G, n_head_kv, 1). One workgroup per row; thread i takes positions i, i + WG, ...;
// max is a tree reduction; the sum takes WG positions at a time: one thread per block of 32 sums it,
// then every thread adds the blocks in order. Each thread re-reads only what it wrote itself.

// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"

override WG: u32 = 64u;  // a power of two, >= 32
override V_F16: bool = true;

struct Params {
    group: u32,    // G = n_head / n_head_kv
    n_rows: u32,   // T G
    pos0: u32,     // position of token 0
    ld: u32,       // f32 elements between score rows
    rn_zero: u32,  // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read_write> scores: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

var<workgroup> e_buf: array<f32, WG>;         // this pass's exponentials
var<workgroup> blk_sum: array<f32, WG / 32u>;  // their block sums


@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r    = wid.x;
    let base = (wid.y * p.n_rows + r) * p.ld;
    let n    = p.pos0 + r / p.group + 1u;  // causal: positions 0 ..= pos0 + t

    var m = bitcast<f32>(0xff7fffffu);  // -FLT_MAX, as attention.wgsl
    for (var i = lid; i < n; i += WG) { m = max(m, scores[base + i]); }
    let mx = wg_max(lid, m);

    var e_sb  = 0.0;  // the open superblock of 512 positions
    var e_tot = 0.0;  // the closed ones
    for (var c0 = 0u; c0 < n; c0 += WG) {
        let c_n = min(WG, n - c0);
        workgroupBarrier();  // the previous pass is consumed
        if (lid < c_n) {
            let e = exp_rn(scores[base + c0 + lid] - mx);
            scores[base + c0 + lid] = e;
            e_buf[lid] = e;
        }
        workgroupBarrier();
        if (32u * lid < c_n) {
            var b = 0.0;
            for (var i = 32u * lid; i < min(32u * lid + 32u, c_n); i++) { b = b + e_buf[i]; }
            blk_sum[lid] = b;
        }
        workgroupBarrier();
        for (var b = 0u; 32u * b < c_n; b++) {
            e_sb = e_sb + blk_sum[b];
            if ((c0 / 32u + b + 1u) % 16u == 0u) {
                e_tot = e_tot + e_sb;
                e_sb  = 0.0;
            }
        }
    }
    let inv = div_rn(1.0, e_tot + e_sb);

    for (var i = lid; i < n; i += WG) {
        let pr = scores[base + i] * inv;
        scores[base + i] = select(pr, round_f16(pr), V_F16);
    }
}
