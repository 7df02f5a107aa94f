// attention_prefill_softmax: the second prompt-attention kernel (webgpu_attention_prefill.cpp). Turns
// each row of scores written by attention_prefill_scores.wgsl into probabilities, in place, one
// superblock of 512 positions at a time (CpuBackend::attention's order; docs/architecture.md):
//   m_c = max of superblock c's s,  e = exp_fixed(s - m_c),
//   l_c = its e in cpu::sum_positions's order,  inv = 1 / l_c,  prob = e * inv,
// rounded to f16 with an f16 V cache; then the superblocks' weights of cpu::combine_superblocks,
//   M = max_c m_c,  a_c = exp_fixed(m_c - M) * l_c,  L = ((0 + a_0) + a_1) + ...,  r_c = a_c / L,
// which attention_prefill_pv.wgsl (or attention_prefill_combine.wgsl) multiplies each superblock's
// P·V sums by (one superblock: r_0 = 1 exactly, so rows of at most 512 positions keep their bits).
// Row r of KV head kvh (token t = r / G) holds positions 0 .. pos0 + t; nothing past them is touched.
//
//   scores: [n_head_kv][T G][ld] f32 (read and written)
//   wts: [n_head_kv][T G][nsb_ld][2] f32: r_c at [..][c][0] (m_c, then r_c), l_c at [..][c][1]
// Bindings: 0 scores, 1 wts (read_write), 2 params (uniform)
// Dispatch: (T G, n_head_kv, 1). One workgroup per row; thread i takes positions i + WG u of each
// superblock (512 / WG of them, kept in registers: a score is read once and written once); the sum
// takes the superblock at once (lib/position_sum.wgsl: a thread per block of 32, two barriers).
// Invocation 0 writes m_c and l_c and at the end reads them back (only what it wrote itself) for
// the weights.

// #include "lib/numerics.wgsl"
// #include "lib/wg_reduce.wgsl"
// #include "lib/position_sum.wgsl"

override WG: u32 = 64u;        // a power of two, 32 .. 512
override CHUNK: u32 = 512u;    // positions per pass of the sum (lib/position_sum.wgsl): one superblock
override V_F16: bool = true;
override GROUP: u32 = 1u;  // G = n_head / n_head_kv (= Params.group; a constant, for the divisions by it)
const SPT: u32 = 16u;      // registers per thread: 512 / WG <= 16

struct Params {
    group: u32,    // G = n_head / n_head_kv (the kernel divides by the override GROUP)
    n_rows: u32,   // T G
    pos0: u32,     // position of token 0
    ld: u32,       // f32 elements between score rows
    nsb_ld: u32,   // superblocks per row of wts
    rn_zero: u32,  // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read_write> scores: array<f32>;
@group(0) @binding(1) var<storage, read_write> wts: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r    = wid.x;
    let row  = wid.y * p.n_rows + r;
    let base = row * p.ld;
    let wb   = row * p.nsb_ld;  // the row's first superblock in wts
    let n    = p.pos0 + r / GROUP + 1u;  // causal: positions 0 ..= pos0 + t
    let nsb  = (n + 511u) / 512u;

    for (var c = 0u; c < nsb; c++) {
        let c0  = 512u * c;
        let c_n = min(512u, n - c0);
        // The superblock's scores and max.
        var sv: array<f32, SPT>;
        var m = bitcast<f32>(0xff7fffffu);  // -FLT_MAX, as attention.wgsl
        for (var u = 0u; u < 512u / WG; u++) {
            let i = lid + u * WG;
            if (i < c_n) {
                sv[u] = scores[base + c0 + i];
                m = max(m, sv[u]);
            }
        }
        let mx = wg_max(lid, m);
        // e = exp(s - m_c) and their sum (the barrier inside pos_add_chunk also separates this
        // superblock's wg_max from the next one's).
        for (var u = 0u; u < 512u / WG; u++) {
            let i = lid + u * WG;
            if (i < c_n) {
                sv[u] = exp_fixed(sv[u] - mx);
                probs[i] = sv[u];
            }
        }
        let l   = pos_total(pos_add_chunk(lid, 0u, c_n, PosSum())).x;
        let inv = div_rn(1.0, l);
        for (var u = 0u; u < 512u / WG; u++) {
            let i = lid + u * WG;
            if (i < c_n) {
                let pr = sv[u] * inv;
                scores[base + c0 + i] = select(pr, round_f16(pr), V_F16);
            }
        }
        if (lid == 0u) {
            wts[2u * (wb + c)]      = mx;
            wts[2u * (wb + c) + 1u] = l;
        }
        workgroupBarrier();  // probs is consumed before the next superblock's stores
    }
    // The weights r_c (cpu::combine_superblocks), by invocation 0.
    if (lid == 0u) {
        var big = wts[2u * wb];
        for (var c = 1u; c < nsb; c++) { big = max(big, wts[2u * (wb + c)]); }
        var total = 0.0;
        for (var c = 0u; c < nsb; c++) {
            total = total + mul_rn(exp_fixed(wts[2u * (wb + c)] - big), wts[2u * (wb + c) + 1u]);
        }
        for (var c = 0u; c < nsb; c++) {
            let a = mul_rn(exp_fixed(wts[2u * (wb + c)] - big), wts[2u * (wb + c) + 1u]);
            wts[2u * (wb + c)] = div_rn(a, total);
        }
    }
}
