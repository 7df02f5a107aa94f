// The attention kernel interface in scalar code (attention_cache_scalar), and the kernel sets this
// build does not have (their files are compiled only for their architecture).
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"

#include "core/error.h"
#include "core/fp16.h"

#include <vector>

namespace tern::cpu {

void attention_cache_scalar(const CacheView & c, const AttentionJob & job, float * scratch) {
    const int64_t hd = c.head_dim, n = job.n_pos;
    TERN_ASSERT(n >= 1 && n <= k_pos_super, "an attention job of %lld positions", static_cast<long long>(n));
    TERN_ASSERT(!job.blocks || (job.sup_max != nullptr && job.sup_sum != nullptr), "a blocks job without sup_max / sup_sum");
    // The KV head's rows as f32 values, [n][hd].
    thread_local std::vector<float> k, v;
    k.resize(static_cast<size_t>(n * hd));
    v.resize(k.size());
    for (int64_t p = 0; p < n; ++p) {
        const int64_t at = p * c.stride + c.first;
        for (int64_t d = 0; d < hd; ++d) {
            k[static_cast<size_t>(p * hd + d)] = c.f16_k ? fp16_to_fp32(static_cast<const uint16_t *>(c.k)[at + d])
                                                         : static_cast<const float *>(c.k)[at + d];
            v[static_cast<size_t>(p * hd + d)] = c.f16_v ? fp16_to_fp32(static_cast<const uint16_t *>(c.v)[at + d])
                                                         : static_cast<const float *>(c.v)[at + d];
        }
    }
    for (int64_t g = 0; g < job.n_q; ++g) {
        if (!job.blocks) {
            attention_row(job.q + g * hd, k.data(), hd, v.data(), hd, n, hd, job.scale, c.f16_k, c.f16_v, job.out + g * hd);
            continue;
        }
        attention_scores(job.q + g * hd, k.data(), hd, n, hd, job.scale, c.f16_k, scratch);
        AttnPartial part{0.0f, 0.0f, job.out + g * hd};
        superblock_partial(scratch, n, v.data(), hd, hd, c.f16_v, part);
        job.sup_max[g] = part.m;
        job.sup_sum[g] = part.l;
    }
}

#if !defined(TERN_HAVE_AVX2_KERNELS)
const Kernels * kernels_avx2() { return nullptr; }
const Kernels * kernels_avx2_plain() { return nullptr; }
const Kernels * kernels_avx2_vnni() { return nullptr; }
#endif
#if !defined(TERN_HAVE_AVX512_KERNELS)
const Kernels * kernels_avx512() { return nullptr; }
const Kernels * kernels_avx512_multiply() { return nullptr; }
const Kernels * kernels_avx512_vbmi() { return nullptr; }
#endif
#if !defined(TERN_HAVE_NEON_KERNELS)
const Kernels * kernels_neon() { return nullptr; }
#endif
}  // namespace tern::cpu
