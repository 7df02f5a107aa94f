// The ops of a batched forward pass over a paged KV cache (backend.h: KvBatch, issue 53) that are
// not attention (webgpu_attention_split.cpp): the [q; k; v] products of every column by one matmul
// (the GEMM from gemm_min_tokens columns on, else the per-token kernels) into the qkv scratch, then
// rope_kv.wgsl with each column's position and cache row from the column table; and the gather of
// the columns the LM head reads.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"

namespace tern {

void WebGpuBackend::qkv_rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Weight & wqkv,
                                             const QuantizedActs & a, const AttentionShape & s, const KvBatch & batch) {
    const GpuLinear & lw    = as_linear(wqkv);
    const int64_t     hd    = s.head_dim;
    const int64_t     n_tok = a.q.ne[1];
    const int64_t     n_q   = s.n_head * hd;
    const int64_t     n_kv  = s.n_head_kv * hd;
    TERN_ASSERT(lw.n_rows == n_q + 2 * n_kv && q.ne[0] == n_q && kv.k.ne[0] == n_kv && a.q.ne[0] == lw.n_cols &&
                    batch.n_tokens() == n_tok,
                "qkv shapes");
    TERN_ASSERT(kv.k.offset % 4 == 0 && kv.v.offset % 4 == 0, "KV cache views must be 4-byte aligned");
    if (hd % 4 != 0 || s.n_rot % 4 != 0 || s.n_rot > hd) {
        fail(ErrorKind::unsupported,
             format("webgpu: head_dim %lld with %lld rotated dimensions; the WebGPU kernels need both to be "
                    "multiples of 4",
                    static_cast<long long>(hd), static_cast<long long>(s.n_rot)),
             "use --backend cpu for this model");
    }
    const size_t bytes = static_cast<size_t>(lw.n_rows * n_tok) * 4;
    Tensor       qkv;
    qkv.buffer = nullptr;
    grown(qkv_scratch_, bytes, "qkv scratch");
    qkv.buffer = qkv_scratch_.get();
    qkv.type   = DType::f32;
    qkv.ne     = {lw.n_rows, n_tok, 1, 1};
    bitlinear(qkv, wqkv, a, false);  // the GEMM, the decode kernel or the per-token kernel
    encode_rope_kv(q, kv, lw, s, n_tok, 0, &batch);
}

void WebGpuBackend::gather_columns(const Tensor & dst, const Tensor & src, const Tensor & cols) {
    const int64_t k = src.ne[0];
    TERN_ASSERT(dst.ne[0] == k && dst.ne[1] == cols.ne[0] && src.type == DType::f32 && dst.type == DType::f32 &&
                    cols.type == DType::i32,
                "gather_columns shapes");
    if (cols.ne[0] == 0) return;
    struct {
        uint32_t k, src_offset, src_stride, dst_offset, dst_stride, cols_offset;
    } p{u32(k), gpu_offset(src, 4), u32(k), gpu_offset(dst, 4), u32(k), gpu_offset(cols, 4)};
    const PipelineKey key{"gather_columns", "rrwu", {{{"WG", 256}}}};
    const WGPUBuffer  bufs[] = {gpu_buffer(src), gpu_buffer(cols), gpu_buffer(dst)};
    step_->dispatch(key, bufs, &p, sizeof p, ceil_div(k, 256), u32(cols.ne[0]));
}

}  // namespace tern
