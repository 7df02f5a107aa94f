// lib/weight_prefetch.wgsl with atomics (a one-off): each pull is an atomicAdd of zero (p.rn_zero)
// whose result is unused, so that it can leave as a reduction that nothing waits for; the kernel
// declares `pfw: array<atomic<u32>>` (read_write).

override KPF_WORDS: u32 = 0u;
override KPF_LOADS: u32 = 1u;
override KPF_GROUPS: u32 = 1u;
const KPF_STRIDE: u32 = 16u;
override KPF_RED_AT: u32 = 0u;

fn kernel_prefetch(lid: u32, g: u32) -> u32 {
    if (KPF_WORDS == 0u) { return 0u; }
    let first = (g * WG + lid) * KPF_STRIDE;
    for (var u = 0u; u < KPF_LOADS; u++) {
        let i = first + u * KPF_GROUPS * WG * KPF_STRIDE;
        if (i < KPF_WORDS) { atomicAdd(&pfw[i], p.rn_zero); }
    }
    return 0u;
}

fn kernel_prefetch_at(spot: u32, lid: u32, g: u32) -> u32 {
    if (KPF_RED_AT != spot) { return 0u; }
    return kernel_prefetch(lid, g);
}

fn kernel_prefetch_use(acc: u32) {}
