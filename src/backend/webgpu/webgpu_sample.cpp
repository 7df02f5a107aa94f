// WebGpuBackend::sample: the sampler chain on the device (shaders/sample.wgsl), so that sampled
// decoding runs ahead like greedy decoding: the step's head writes the logits (with a top-k chain,
// exact values only for the rows that can be among the top k, -inf elsewhere: head_top_k), and one
// workgroup chooses the id from them with the uniform the host drew from the sampler's stream.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"

#include <algorithm>

namespace tern {
namespace {

// sample.wgsl's CAP: the candidates its sorted form holds. A top-k chain with k above it would
// never fit; other chains fit when few rows pass min-p (or reach top-p), else the step goes back
// to the host (k_sample_on_host).
constexpr int32_t k_sample_cap = 1024;

}  // namespace

bool WebGpuBackend::samples_on_device(const SamplingChain & chain) const {
    return chain.temp > 0.0f && chain.top_k >= 0 && chain.top_k <= k_sample_cap;
}

void WebGpuBackend::sample(const Tensor & id, const Tensor & logits, const SamplingChain & chain, const Tensor & uniform) {
    TERN_ASSERT(logits.ne[1] == 1 && id.type == DType::i32 && uniform.type == DType::f32 && chain.temp > 0.0f,
                "sample shapes");
    const int64_t n_vocab = logits.ne[0];
    // A top-k chain whose head listed its candidates (head_top_k): sample.wgsl reads that list
    // instead of scanning the vocabulary (and sets its count back to 0).
    const bool list = chain.top_k > 0 && chain.top_k < n_vocab && sample_list_.logits == gpu_buffer(logits) &&
                      sample_list_.offset == gpu_offset(logits, 4);
    WGPUBuffer list_buffer = nullptr;
    if (list) {
        list_buffer                            = top_k_lists_[sample_list_.list]->get();
        top_k_list_zero_[sample_list_.list] = true;  // (sample.wgsl sets its count back to 0)
        // ... so the host cannot read that list: its head is no longer pending (read_top_k_rows).
        if (!top_k_pending_.empty() && top_k_pending_.back().list == sample_list_.list) top_k_pending_.pop_back();
    } else {
        if (!top_k_lists_[0]) top_k_lists_[0] = make_buffer(top_k_list_bytes(), nullptr, "top-k rows");
        list_buffer = top_k_lists_[0]->get();  // (bound, not read)
    }
    sample_list_ = {};
    const uint32_t top_k = chain.top_k > 0 && chain.top_k < n_vocab ? static_cast<uint32_t>(chain.top_k) : 0u;
    // Top-k off and top-p on (the CLI's --top-k 0 --top-p P): the passes over the vocabulary (the
    // maximum; the mass and the rows min-p keeps, or with min-p off those of mass 2^-10 or more) on
    // many workgroups, sample_scan.wgsl, rather than in sample.wgsl's one, which then walks the list (or,
    // min-p off and top-p's cut past the rows listed, makes its own passes). Two workgroups per
    // compute unit, at least 256 rows each (one per compute unit: no faster, H200 sample_scan 13.3 +
    // sample 16.1 vs 12.7 + 16.7 us).
    const bool scan   = !list && top_k == 0 && chain.top_p < 1.0f;
    uint32_t   groups = 0;
    bool       fused  = false;
    if (scan) {
        // (at most k_sample_cap: sample.wgsl stages the slice sums in its candidates' weights)
        groups = std::min({2 * tune_.compute_units, u32((n_vocab + 255) / 256), u32(k_sample_cap)});
        list_buffer =
            grown(sample_scan_, (4 + static_cast<size_t>(groups) + 2 * static_cast<size_t>(k_sample_cap)) * 4,
                  "sample scan");
        // The step's LM head has just written these logits and its chunk winners (head_partials_):
        // with sample_scan_fused, one dispatch (PHASE 2) takes the maximum from the winners.
        fused = tune_.sample_scan_fused != 0 && head_partials_.serial == step_->serial() &&
                head_partials_.logits == gpu_buffer(logits) && head_partials_.offset == gpu_offset(logits, 4) &&
                argmax_partial_;
        struct {
            uint32_t n_vocab, logits_offset, groups;
            float    list_min;
            uint32_t n_partials, pad[3];  // (a uniform struct's size is a multiple of 16 bytes)
        } sp{u32(n_vocab), gpu_offset(logits, 4), groups, chain.min_p > 0.0f ? chain.min_p : 1.0f / 1024.0f,
             fused ? head_partials_.n_chunks : 0u, {}};
        const WGPUBuffer scan_bufs[] = {gpu_buffer(logits), list_buffer,
                                        fused ? argmax_partial_->get() : gpu_buffer(logits)};
        const double phases[] = {0.0, 1.0, 2.0};  // PHASE 0 + 1, or 2 alone
        for (int i = fused ? 2 : 0; i < (fused ? 3 : 2); ++i) {
            step_->dispatch(PipelineKey{"sample_scan", "rwru", {{{"PHASE", phases[i]}}}}, scan_bufs, &sp, sizeof sp,
                            groups);
        }
    }
    struct {
        uint32_t n_vocab, logits_offset, id_offset, u_offset, top_k;
        float    top_p, min_p, inv_temp;
        uint32_t list, scan, groups;
    } p{u32(n_vocab),
        gpu_offset(logits, 4),
        gpu_offset(id, 4),
        gpu_offset(uniform, 4),
        top_k,
        chain.top_p,
        chain.min_p,
        1.0f / chain.temp,
        list ? 1u : 0u,
        scan ? (fused ? 2u : 1u) : 0u,
        groups};
    const PipelineKey key{"sample", "rrwwu", {}};
    const WGPUBuffer  bufs[] = {gpu_buffer(logits), gpu_buffer(uniform), gpu_buffer(id), list_buffer};
    step_->dispatch(key, bufs, &p, sizeof p, 1);
}

}  // namespace tern
