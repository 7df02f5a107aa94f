// attention_prefill_softmax: the second prompt-attention kernel (webgpu_attention_prefill.cpp). Turns
// each row of scores written by attention_prefill_scores.wgsl into probabilities, in place, with
// attention.wgsl's numerics (the CPU's order of operations):
//   mx = max_pos s,  e = exp_fixed(s - mx),
//   sum = sum_pos e (cpu::sum_positions's order),  inv = 1 / sum,  prob = e * inv,
// rounded to f16 with an f16 V cache.
// Row r of KV head kvh (token t = r / G) holds positions 0 .. pos0 + t; nothing past them is touched.
//
//   scores: [n_head_kv][T G][ld] f32 (read and written)
// Bindings: 0 scores (read_write), 1 params (uniform)
// Dispatch: (T G, n_head_kv, 1). One workgroup per row; thread i takes positions i + WG u of each
// chunk of CHUNK = SM_U WG positions. The first chunk's scores and exps stay in registers (a row of
// up to CHUNK positions is read once and written once); the sum takes a chunk at a time
// (lib/position_sum.wgsl: a thread per block of 32, two barriers per chunk). Each thread re-reads
// only what it wrote itself.

// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/position_sum.wgsl"

override WG: u32 = 64u;        // a power of two, >= 32
override SM_U: u32 = 8u;       // positions per thread and chunk, at most 8 (CHUNK / 32 <= WG)
override CHUNK: u32 = SM_U * WG;  // positions per pass of the sum (lib/position_sum.wgsl)
override V_F16: bool = true;
override GROUP: u32 = 1u;  // G = n_head / n_head_kv (= Params.group; a constant, for the divisions by it)

struct Params {
    group: u32,    // G = n_head / n_head_kv (the kernel divides by the override GROUP)
    n_rows: u32,   // T G
    pos0: u32,     // position of token 0
    ld: u32,       // f32 elements between score rows
    rn_zero: u32,  // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read_write> scores: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r    = wid.x;
    let base = (wid.y * p.n_rows + r) * p.ld;
    let n    = p.pos0 + r / GROUP + 1u;  // causal: positions 0 ..= pos0 + t

    // max over the row; the first chunk's scores kept.
    var first: array<f32, 8>;
    var m = bitcast<f32>(0xff7fffffu);  // -FLT_MAX, as attention.wgsl
    for (var u = 0u; u < SM_U; u++) {
        let i = lid + u * WG;
        if (i < n) {
            first[u] = scores[base + i];
            m = max(m, first[u]);
        }
    }
    for (var i = CHUNK + lid; i < n; i += WG) { m = max(m, scores[base + i]); }
    let mx = wg_max(lid, m);

    // e = exp(s - mx), summed chunk by chunk; the first chunk's e stay in `first`, later ones are
    // written back in place.
    var es = PosSum();
    for (var c0 = 0u; c0 < n; c0 += CHUNK) {
        let c_n = min(CHUNK, n - c0);
        workgroupBarrier();  // the previous pass is consumed
        for (var u = 0u; u < SM_U; u++) {
            let i = lid + u * WG;
            if (i < c_n) {
                if (c0 == 0u) {
                    first[u] = exp_fixed(first[u] - mx);
                    probs[i] = first[u];
                } else {
                    let e = exp_fixed(scores[base + c0 + i] - mx);
                    scores[base + c0 + i] = e;
                    probs[i] = e;
                }
            }
        }
        es = pos_add_chunk(lid, c0, c_n, es);
    }
    let inv = div_rn(1.0, pos_total(es).x);

    for (var u = 0u; u < SM_U; u++) {
        let i = lid + u * WG;
        if (i < n) {
            let pr = first[u] * inv;
            scores[base + i] = select(pr, round_f16(pr), V_F16);
        }
    }
    for (var i = CHUNK + lid; i < n; i += WG) {
        let pr = scores[base + i] * inv;
        scores[base + i] = select(pr, round_f16(pr), V_F16);
    }
}
