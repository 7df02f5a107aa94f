// The fast CPU backend's general linear path for the llama / qwen3 / phi3 families: non-ternary
// weights (CpuMatrix, loaded by the reference) and rope_kv_append run on the scalar reference
// (cpu_matmul.h), which shares this backend's buffers and norms; ternary weights take the input as
// per-token int8 (cpu::quantize_act_row, the reference's rule for ternary types) and this backend's
// bitlinear / gate_up kernels, so the results are the reference's bits. SIMD kernels for the Q-type
// dot products are the next step (docs/architecture.md, "Activation semantics").
#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cpu/cpu_matmul.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "quant/ternary_formats.h"

namespace tern {
namespace {

bool is_matrix(const Weight & w) { return dynamic_cast<const CpuMatrix *>(&w) != nullptr; }

void check_ternary(const Weight & w) {
    if (w.type == DType::q1_0 || w.type == DType::q2_0 || w.type == DType::pq2_0) {
        fail(ErrorKind::unsupported,
             format("%s projections outside a BitNet model take Q8_0-block activations, which the fast CPU "
                    "kernels do not compute yet",
                    std::string(dtype_name(w.type)).c_str()),
             "run the scalar reference: TERN_CPU_ISA=ref");
    }
}

}  // namespace

QuantizedActs CpuFastBackend::family_acts(const Tensor & x) {
    const int64_t k = x.ne[0], n_tok = x.ne[1];
    if (!family_q_.buffer || family_q_.tensor.n_elements() < k * n_tok) {
        family_q_ = alloc_tensor(*this, DType::i8, {k, n_tok, 1, 1}, "family int8 acts");
    }
    if (!family_scale_.buffer || family_scale_.tensor.n_elements() < n_tok) {
        family_scale_ = alloc_tensor(*this, DType::f32, {n_tok, 1, 1, 1}, "family act scales");
    }
    QuantizedActs a{family_q_.tensor, family_scale_.tensor};
    a.q.ne     = {k, n_tok, 1, 1};
    a.scale.ne = {n_tok, 1, 1, 1};
    const float * xp = cpu_data<float>(x);
    int8_t *      q  = cpu_data<int8_t>(a.q);
    float *       s  = cpu_data<float>(a.scale);
    for (int64_t t = 0; t < n_tok; ++t) s[t] = cpu::quantize_act_row(xp + t * k, q + t * k, k);
    return a;
}

void CpuFastBackend::matmul(const Tensor & y, const Weight & w, const Tensor & x, bool accumulate) {
    if (is_matrix(w)) return reference().matmul(y, w, x, accumulate);
    check_ternary(w);
    bitlinear(y, w, family_acts(x), accumulate);
}

void CpuFastBackend::matmul_glu(const Tensor & f, const Weight & w, const Tensor & x, FfnActivation act) {
    if (is_matrix(w)) return reference().matmul_glu(f, w, x, act);
    check_ternary(w);
    gate_up(f, w, family_acts(x), act);
}

void CpuFastBackend::rope_kv_append(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & s,
                                    int64_t pos0) {
    reference().rope_kv_append(q, kv, qkv, s, pos0);
}

void CpuFastBackend::rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Tensor & qkv,
                                          const AttentionShape & s, const KvBatch & batch) {
    reference().rope_kv_append_paged(q, kv, qkv, s, batch);
}

}  // namespace tern
