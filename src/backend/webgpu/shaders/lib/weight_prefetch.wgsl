// A weight that a later kernel reads, pulled into L2 by a decode matmul's own invocations
// (kernel_prefetch) once its activations are staged: one word per 64 bytes (16 words), each invocation at
// most KPF_LOADS, spread over the kernel's KPF_GROUPS workgroups (the host sets all three; KPF_WORDS
// 0: none). The loaded words are kept by a store that never happens (kernel_prefetch_use: p.rn_zero
// is 0), so the compiler keeps the loads but nothing waits for them before the kernel's end, which
// waits for them all: worth it only where the kernel's own weights come from L2 (the attention
// kernel pulled them in: attention.wgsl PF_FROM) and its DRAM slot is free.
// The including kernel declares `pfw: array<u32>` (read), `norm_stats: array<f32>` (read_write),
// `override WG` and a uniform p with rn_zero.

override KPF_WORDS: u32 = 0u;
override KPF_LOADS: u32 = 1u;
override KPF_GROUPS: u32 = 1u;
const KPF_STRIDE: u32 = 16u;  // words: one load per 64 bytes (the host's k_prefetch_stride_words)
// The loads are issued once the activations are staged, when x and the weights have arrived, so
// that the DRAM misses do not queue ahead of them: H200 tg128 913.4-916.6 tokens/s against
// 894.8-911.1 after the kernel's own weight loads and 884.7-892.9 before them (alternating rounds,
// three calls).

fn kernel_prefetch(lid: u32, g: u32) -> u32 {
    var acc = 0u;
    if (KPF_WORDS == 0u) { return acc; }
    let first = (g * WG + lid) * KPF_STRIDE;
    for (var u = 0u; u < KPF_LOADS; u++) {
        let i = first + u * KPF_GROUPS * WG * KPF_STRIDE;
        if (i < KPF_WORDS) { acc ^= pfw[i]; }
    }
    return acc;
}

fn kernel_prefetch_use(acc: u32) {
    if (KPF_WORDS != 0u && (acc & p.rn_zero) != 0u) { norm_stats[0] = bitcast<f32>(acc); }
}
