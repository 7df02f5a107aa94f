// BitNet b1.58 (and the mainline `bitnet` family): weight binding with shape/type checks, and the
// forward pass of FORMATS.md §4.6 expressed in backend ops:
//
//   x = token_embd[t]
//   per layer:  a = quant(norm(x) * attn_norm)
//               q, K/V cache <- RoPE(Wqkv a)                  (qkv_rope_kv_append)
//               o = attention(q, K, V)
//               x += Wo quant(norm(o) * attn_sub_norm)        (bitlinear, residual epilogue)
//               a = quant(norm(x) * ffn_norm)
//               f = relu2(Wg a) * (Wu a)                      (gate_up; SiLU for arch `bitnet`)
//               x += Wd quant(norm(f) * ffn_sub_norm)
//   logits = head · norm(x) * output_norm                     (head = output or tied token_embd)
#pragma once

#include "backend/backend.h"
#include "gguf/gguf_reader.h"
#include "model/kv_cache.h"
#include "model/model_config.h"

#include <memory>
#include <vector>

namespace tern {

struct LayerWeights {
    std::unique_ptr<Weight> attn_norm;      // [n_embd] f32
    std::unique_ptr<Weight> attn_qkv;       // attn_q [n_embd, n_embd_q] + attn_k, attn_v [n_embd, n_embd_kv]
    std::unique_ptr<Weight> attn_sub_norm;  // [n_embd_q] f32
    std::unique_ptr<Weight> attn_output;    // [n_embd_q, n_embd]
    std::unique_ptr<Weight> ffn_norm;       // [n_embd] f32
    std::unique_ptr<Weight> ffn_gate_up;    // ffn_gate + ffn_up, [n_embd, n_ff] each
    std::unique_ptr<Weight> ffn_sub_norm;   // [n_ff] f32
    std::unique_ptr<Weight> ffn_down;       // [n_ff, n_embd]
};

// Per-session buffers for up to n_batch tokens, allocated once.
struct ForwardBuffers {
    int64_t     n_batch  = 0;
    int64_t     n_logits = 0;  // columns of `logits`
    OwnedTensor tokens;        // [n_batch] i32
    OwnedTensor x;             // [n_embd, n_batch] f32, the residual stream
    OwnedTensor act_q;         // [max(n_embd, n_ff), n_batch] i8
    OwnedTensor act_scale;     // [n_batch] f32
    OwnedTensor q;             // [n_embd_q, n_batch] f32
    OwnedTensor attn;          // [n_embd_q, n_batch] f32
    OwnedTensor ffn;           // [n_ff, n_batch] f32
    OwnedTensor h;             // [n_embd, n_batch] f32, final norm
    OwnedTensor logits;        // [n_vocab, n_logits] f32
    OwnedTensor argmax;        // [n_logits] i32
};

class BitnetModel {
public:
    // The GgufFile must outlive the model (weights may point into its mapping). Throws
    // Error(invalid_model / unsupported) naming the tensor and the expectation.
    static std::unique_ptr<BitnetModel> load(const GgufFile & file, Backend & backend);

    const ModelConfig & config() const { return config_; }
    Backend &           backend() const { return backend_; }
    DType               head_type() const { return head_type_; }
    // Bytes of weights read per decoded token, in the backend's layout (Weight::n_bytes): every layer's
    // linears and norms, the final norm, the whole LM head (the tied token_embd table when there is
    // no output.weight) and one embedding row. For bandwidth figures (`tern bench`).
    size_t              weight_bytes_per_token() const { return weight_bytes_; }
    // The same for a greedy decoding step (forward_greedy), whose head may read less
    // (Backend::greedy_head_bytes).
    size_t greedy_weight_bytes_per_token() const {
        const Weight & head = output_ ? *output_ : *token_embd_;
        return weight_bytes_ - head.n_bytes + backend_.greedy_head_bytes(head);
    }

    ForwardBuffers make_buffers(int64_t n_batch, int64_t n_logits) const;

    // Runs n_tokens tokens (already written to buf.tokens) at positions pos0.. through the network,
    // filling the KV cache. With n_logits > 0 the logits of the last n_logits tokens go to
    // buf.logits (and their argmax to buf.argmax if want_argmax). round_head_input_f16: see lm_head.
    void forward(ForwardBuffers & buf, const KvCache & kv, int64_t pos0, int64_t n_tokens, int64_t n_logits,
                 bool round_head_input_f16, bool want_argmax) const;

    // One greedy decode step that never leaves the device: embeds the token id stored in `token_in`
    // ([1] i32, e.g. the previous step's argmax), runs position pos, and writes the argmax of the
    // logits to `token_out` ([1] i32). A GPU backend records it without waiting for the host. The
    // logits themselves are not kept (the backend may compute only what the argmax needs).
    void forward_greedy(ForwardBuffers & buf, const KvCache & kv, int64_t pos, const Tensor & token_in,
                        const Tensor & token_out, bool round_head_input_f16) const;

    // One token at position pos whose id is read on the device from token_in ([1] i32), with its
    // logits; logits_top_k > 0: only the top k of them will be read, so rows that cannot be among
    // them may come back as -inf (Backend::norm_lm_head_top_k). hold: the backend keeps the step unsubmitted
    // (Backend::hold_step), so the host can write token_in afterwards and then release it; returns
    // whether it was held (false: the step was submitted and ran with token_in as it was).
    bool forward_token(ForwardBuffers & buf, const KvCache & kv, int64_t pos, const Tensor & token_in,
                       bool round_head_input_f16, int64_t logits_top_k, bool hold) const;

private:
    // The forward pass: tokens [n_tokens] i32 in; argmax_out ([n_logits] i32) written if it has a buffer.
    // keep_logits = false: only argmax_out is wanted (norm_lm_head_argmax).
    bool run(ForwardBuffers & buf, const KvCache & kv, int64_t pos0, int64_t n_tokens, int64_t n_logits,
             bool round_head_input_f16, const Tensor & tokens, const Tensor & argmax_out, bool keep_logits,
             int64_t logits_top_k = 0, bool hold = false) const;  // returns whether the step is held

    BitnetModel(ModelConfig config, Backend & backend) : config_(std::move(config)), backend_(backend) {}

    ModelConfig               config_;
    Backend &                 backend_;
    std::unique_ptr<Weight>   token_embd_;   // [n_embd, n_vocab]
    std::unique_ptr<Weight>   output_norm_;  // [n_embd] f32
    std::unique_ptr<Weight>   output_;       // [n_embd, n_vocab]; null when tied to token_embd
    std::vector<LayerWeights> layers_;
    DType                     head_type_    = DType::f16;
    size_t                    weight_bytes_ = 0;
};

}  // namespace tern
