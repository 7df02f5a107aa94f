// Backend helpers shared by every backend.
#include "backend/backend.h"

#include "core/error.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace tern {

Tensor Tensor::columns(int64_t first, int64_t count) const {
    TERN_ASSERT(ne[2] == 1 && ne[3] == 1, "columns() needs a 2-D tensor");
    TERN_ASSERT(first >= 0 && count >= 0 && first + count <= ne[1], "columns [%lld, %lld) of %lld",
                static_cast<long long>(first), static_cast<long long>(first + count), static_cast<long long>(ne[1]));
    Tensor t = *this;
    t.offset += static_cast<size_t>(first) * row_bytes();
    t.ne[1] = count;
    return t;
}

double Backend::measure_copy_bandwidth(size_t n_bytes) {
    synchronize();
    n_bytes = std::max<size_t>(n_bytes, 4096);
    std::vector<uint8_t> src(n_bytes, 1), dst(n_bytes, 0);  // written once: pages are mapped before timing
    double best = 0;
    for (int rep = 0; rep < 6; ++rep) {  // rep 0 warms up
        const auto t0 = std::chrono::steady_clock::now();
        std::memcpy(dst.data(), src.data(), n_bytes);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rep > 0 && s > 0) best = std::max(best, 2.0 * static_cast<double>(n_bytes) / s);
        src[rep] = dst[n_bytes - 1 - static_cast<size_t>(rep)];  // keep the copies observable
    }
    return best;
}

namespace {

// The int8 form of a linear op's input: rms_norm_quant from x, or the activations given.
const QuantizedActs & quantized_input(Backend & be, const LinearInput & in) {
    if (in.x.buffer != nullptr) {
        TERN_ASSERT(in.norm != nullptr, "a linear input without a norm is not supported yet (issue 54)");
        be.rms_norm_quant(in.q, in.x, *in.norm, in.eps);
    }
    return in.q;
}

// Whether a linear op takes the general path (matmul on the float input) rather than BitNet's
// rms_norm_quant + bitlinear: every non-ternary weight, any input without a norm in front, and any
// input without int8 scratch (the other families' models give none).
bool takes_float_path(const Weight & w, const LinearInput & in) {
    if (in.x.buffer == nullptr) return false;  // the int8 form given
    return !dtype_is_lowbit(w.type) || in.norm == nullptr || in.q.q.buffer == nullptr;
}

// The float form of a linear op's input: rms_norm(x) * norm into in.h, or x itself without a norm.
Tensor float_input(Backend & be, const LinearInput & in) {
    TERN_ASSERT(in.x.buffer != nullptr, "the float path needs x");
    if (in.norm == nullptr) return in.x;
    TERN_ASSERT(in.h.buffer != nullptr, "the float path needs scratch for the normalized input (LinearInput.h)");
    Tensor h = in.h;
    h.ne     = in.x.ne;
    be.rms_norm(h, in.x, *in.norm, in.eps);
    return h;
}

// Backend::decode's default stream: each step recorded, submitted and read back before the next.
class StepByStepStream final : public DecodeStream {
public:
    StepByStepStream(Backend & be, const DecodeRequest & r)
        : be_(be), r_(r), token_(alloc_tensor(be, DType::i32, {1, 1, 1, 1}, "decode token")),
          ids_(alloc_tensor(be, DType::i32, {1, 1, 1, 1}, "decode id")),
          uniform_(alloc_tensor(be, DType::f32, {1, 1, 1, 1}, "decode uniform")), next_id_(r.first) {
        TERN_ASSERT(r_.record != nullptr && (r_.pick == nullptr || r_.logits.buffer != nullptr), "decode request");
        if (r_.pick) logits_.resize(static_cast<size_t>(r_.logits.ne[0]));
    }

    size_t next(std::span<int32_t> ids) override {
        // (After k_sample_on_host the caller picks on the host: nothing meaningful follows.)
        if (given_ >= r_.n_max || ids.empty() || next_id_ == k_sample_on_host) return 0;
        const auto t0 = std::chrono::steady_clock::now();
        be_.write(token_.tensor, &next_id_, sizeof next_id_);
        DecodeStep step;
        step.pos           = r_.pos0 + given_;
        step.token         = token_.tensor;
        step.head.logits   = r_.logits;
        if (!r_.pick) step.head.ids = ids_.tensor;
        else step.head.top_k = r_.top_k;  // a backend may leave the rows outside the top k at -inf
        if (!r_.pick && r_.sampling != nullptr) {
            const float u = r_.uniform();
            be_.write(uniform_.tensor, &u, sizeof u);
            step.head.sampling = r_.sampling;
            step.head.uniform  = uniform_.tensor;
        }
        be_.begin_step();
        r_.record(step);
        be_.end_step();
        host_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r_.pick) {
            be_.read(r_.logits, logits_.data(), logits_.size() * sizeof(float));
            next_id_ = r_.pick(StepLogits{logits_, {}});
        } else {
            be_.read(ids_.tensor, &next_id_, sizeof next_id_);
        }
        ++given_;
        ids[0] = next_id_;
        return 1;
    }

    double host_seconds() const override { return host_s_; }

private:
    Backend &          be_;
    DecodeRequest      r_;
    OwnedTensor        token_, ids_, uniform_;
    std::vector<float> logits_;
    int32_t            next_id_ = 0;
    int64_t            given_   = 0;
    double             host_s_  = 0;
};

}  // namespace

void Backend::linear(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate) {
    if (takes_float_path(w, in)) {
        matmul(y, w, float_input(*this, in), accumulate);
        return;
    }
    bitlinear(y, w, quantized_input(*this, in), accumulate);
}

void Backend::linear_glu(const Tensor & f, const Weight & w_gate_up, const LinearInput & in, FfnActivation act) {
    if (takes_float_path(w_gate_up, in)) {
        matmul_glu(f, w_gate_up, float_input(*this, in), act);
        return;
    }
    gate_up(f, w_gate_up, quantized_input(*this, in), act);
}

void Backend::matmul(const Tensor &, const Weight & w, const Tensor &, bool) {
    fail(ErrorKind::unsupported, format("backend '%s' cannot multiply %s weights yet", std::string(name()).c_str(),
                                        std::string(dtype_name(w.type)).c_str()),
         "use --backend cpu for this model");
}

void Backend::matmul_glu(const Tensor &, const Weight & w, const Tensor &, FfnActivation) {
    fail(ErrorKind::unsupported, format("backend '%s' cannot multiply %s weights yet", std::string(name()).c_str(),
                                        std::string(dtype_name(w.type)).c_str()),
         "use --backend cpu for this model");
}

void Backend::rope_kv_append_paged(const Tensor &, const KvLayer &, const Tensor &, const AttentionShape &,
                                   const KvBatch &) {
    fail(ErrorKind::unsupported, format("backend '%s' cannot batch Llama / Qwen3 / Phi-3 sequences over a paged cache yet",
                                        std::string(name()).c_str()),
         "use --backend cpu for this model, or one sequence at a time (--parallel 1)");
}

void Backend::rope_kv_append(const Tensor &, const KvLayer &, const Tensor &, const AttentionShape &, int64_t) {
    fail(ErrorKind::unsupported, format("backend '%s' has no rope_kv_append (Llama / Qwen3 / Phi-3 attention) yet",
                                        std::string(name()).c_str()),
         "use --backend cpu for this model");
}

void Backend::linear_qkv(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const LinearInput & in,
                         const AttentionShape & shape, int64_t pos0) {
    qkv_rope_kv_append(q, kv, wqkv, quantized_input(*this, in), shape, pos0);
}

void Backend::output_head(const HeadOutput & out, const Weight & head, const LinearInput & in, bool round_input_f16) {
    Tensor h = in.x;
    if (in.norm != nullptr) {
        rms_norm(in.h, in.x, *in.norm, in.eps);
        h = in.h;
    }
    lm_head(out.logits, head, h, round_input_f16);
    if (out.ids.buffer != nullptr && out.sampling != nullptr) {
        sample(out.ids, out.logits, *out.sampling, out.uniform);
    } else if (out.ids.buffer != nullptr) {
        argmax(out.ids, out.logits);
    }
}

void Backend::sample(const Tensor & id, const Tensor & logits, const SamplingChain & chain, const Tensor & uniform) {
    TERN_ASSERT(logits.ne[1] == 1 && id.ne[0] >= 1 && uniform.ne[0] >= 1, "sample shapes");
    std::vector<float> l(static_cast<size_t>(logits.ne[0]));
    float              u = 0.0f;
    read(logits, l.data(), l.size() * sizeof(float));
    read(uniform, &u, sizeof u);
    const int32_t pick = sample_chain(l, chain, u);
    write(id, &pick, sizeof pick);
}

void Backend::linear_qkv_paged(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const LinearInput & in,
                               const AttentionShape & shape, const KvBatch & batch) {
    qkv_rope_kv_append_paged(q, kv, wqkv, quantized_input(*this, in), shape, batch);
}

int64_t KvBatch::max_position() const {
    int64_t m = -1;
    for (const KvSeq & s : seqs) m = std::max(m, s.pos0 + s.n - 1);
    return m;
}

std::unique_ptr<DecodeStream> Backend::decode(const DecodeRequest & request) {
    return std::make_unique<StepByStepStream>(*this, request);
}

int64_t check_linear_parts(std::span<const WeightSource> parts) {
    TERN_ASSERT(!parts.empty(), "load_linear with no parts");
    const int64_t k    = parts[0].ne[0];
    const DType   type = parts[0].type;
    int64_t       n    = 0;
    for (const auto & p : parts) {
        if (!dtype_is_lowbit(p.type)) {
            fail(ErrorKind::unsupported,
                 format("tensor '%s' has type %s; BitLinear weights must be a ternary/low-bit type", p.name.c_str(),
                        std::string(dtype_name(p.type)).c_str()),
                 "supported: i2_s tq1_0 tq2_0 q2_0 pq2_0 q1_0; re-quantize the model");
        }
        if (p.type != type) {
            fail(ErrorKind::unsupported,
                 format("tensor '%s' has type %s but '%s' has type %s; tensors that share an input must share a type",
                        p.name.c_str(), std::string(dtype_name(p.type)).c_str(), parts[0].name.c_str(),
                        std::string(dtype_name(type)).c_str()));
        }
        TERN_ASSERT(p.ne[0] == k, "parts disagree on K");
        if (p.type == DType::i2_s) {
            const float s = i2s_tensor_scale(p.data, p.n_elements());
            if (!std::isfinite(s)) {
                fail(ErrorKind::invalid_model, format("tensor '%s': i2_s scale is %g; expected a finite number",
                                                      p.name.c_str(), static_cast<double>(s)));
            }
        }
        n += p.ne[1];
    }
    return n;
}

OwnedTensor alloc_tensor(Backend & backend, DType type, std::array<int64_t, 4> ne, const char * label) {
    OwnedTensor out;
    out.tensor.type = type;
    out.tensor.ne   = ne;
    out.buffer      = backend.alloc(out.tensor.n_bytes(), label);
    out.tensor.buffer = out.buffer.get();
    return out;
}

}  // namespace tern
