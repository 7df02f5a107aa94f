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
//
// The other families (llama, qwen3, phi3: family_config.h) run on the same skeleton, loaded by
// family_model.cpp: no sub-norms (the attention output and the FFN product enter Wo / Wdown as they
// are), SwiGLU, weights of any linear type (the general path: Backend::matmul, activations as the
// weight type says), and q/k through rope_kv_append (Qwen3's per-head QK-norm, llama's "norm" RoPE
// with Llama-3 rope_freqs divisors):
//   per layer:  [q; k; v] = Wqkv (norm(x) * attn_norm)       (linear, float path)
//               q, K/V cache <- RoPE(qk_norm(q, k)), v         (rope_kv_append)
//               x += Wo attention(q, K, V)
//               x += Wd (silu(Wg h) * (Wu h)),  h = norm(x) * ffn_norm
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
    std::unique_ptr<Weight> attn_q_norm;    // [head_dim] f32, Qwen3 only
    std::unique_ptr<Weight> attn_k_norm;    // [head_dim] f32, Qwen3 only
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
    OwnedTensor x_head;        // [n_embd, n_logits] f32: the columns a batch's head reads (forward_batch)
    OwnedTensor logits;        // [n_vocab, n_logits] f32
    // The other families only (empty for BitNet):
    OwnedTensor act_f;         // [max(n_embd, n_embd_q, n_ff), n_batch] f32: a linear's normalized input
    OwnedTensor qkv;           // [n_embd_q + 2 n_embd_kv, n_batch] f32: projected q, k, v before RoPE
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
    // The same for a decoding step whose head yields only ids (greedy decoding), whose head may read
    // less (Weight::n_bytes_ids).
    size_t greedy_weight_bytes_per_token() const {
        const Weight & head = output_ ? *output_ : *token_embd_;
        return weight_bytes_ - head.n_bytes + (head.n_bytes_ids != 0 ? head.n_bytes_ids : head.n_bytes);
    }

    ForwardBuffers make_buffers(int64_t n_batch, int64_t n_logits) const;

    // Runs n_tokens tokens (already written to buf.tokens) at positions pos0.. through the network,
    // filling the KV cache, as one step. With n_logits > 0 the logits of the last n_logits tokens go
    // to buf.logits. round_head_input_f16: see Backend::lm_head.
    void forward(ForwardBuffers & buf, const KvCache & kv, int64_t pos0, int64_t n_tokens, int64_t n_logits,
                 bool round_head_input_f16) const;

    // Records one decode step (DecodeStep: the token id on the device, its position, what the head
    // writes) without begin_step / end_step: a DecodeStream brackets it (Backend::decode).
    void record_step(ForwardBuffers & buf, const KvCache & kv, const DecodeStep & step, bool round_head_input_f16) const;

    // Runs a batch of sequences as one step (BatchEngine, issue 53): the batch.n_tokens() tokens
    // written to buf.tokens in column order, each sequence's at its own positions, its K and V in
    // its own pages of `pool` (KvPagePool::cache(); the layers' linears run once over all columns,
    // attention per sequence through the page tables). With head.logits.ne[1] = n > 0 the LM head
    // runs over the n columns that head_cols ([n] i32 on the device) lists and writes what `head`
    // asks for (logits [n_vocab, n], and ids [n] where set). Each sequence's results are the bits
    // of forward() on that sequence alone (a contiguous cache, its tokens at the same positions).
    // hold: the step is kept unsubmitted (Backend::hold_step; the caller writes buf.tokens, then
    // releases it); returns whether it was held.
    bool forward_batch(ForwardBuffers & buf, const KvCache & pool, const KvBatch & batch, const Tensor & head_cols,
                       const HeadOutput & head, bool round_head_input_f16, bool hold = false) const;

private:
    // Where a pass's tokens sit in the KV cache: positions pos0.. of one sequence in `kv`
    // (column p = position p), or with `batch` the sequences of a paged cache `kv`.
    struct KvPlace {
        const KvCache & kv;
        int64_t         pos0  = 0;
        const KvBatch * batch = nullptr;
    };
    // The ops of a forward pass over n_tokens tokens whose ids are in `tokens` ([n_tokens] i32); the
    // LM head writes what `head` asks for over the last head.logits.ne[1] tokens, or with head_cols
    // over the columns it lists (none when head.logits.ne[1] is 0).
    void record(ForwardBuffers & buf, const KvPlace & at, int64_t n_tokens, const Tensor & tokens,
                const HeadOutput & head, const Tensor * head_cols, bool round_head_input_f16) const;
    // family_model.cpp: binding the tensors of a llama / qwen3 / phi3 file, and one layer's ops.
    void load_family(const GgufFile & file);
    void record_family_layer(const ForwardBuffers & buf, const LayerWeights & L, const KvLayer & kl, const KvPlace & at,
                             int64_t n_tokens) const;

    BitnetModel(ModelConfig config, Backend & backend) : config_(std::move(config)), backend_(backend) {}

    ModelConfig               config_;
    Backend &                 backend_;
    std::unique_ptr<Weight>   token_embd_;   // [n_embd, n_vocab]
    std::unique_ptr<Weight>   output_norm_;  // [n_embd] f32
    std::unique_ptr<Weight>   output_;       // [n_embd, n_vocab]; null when tied to token_embd
    std::vector<LayerWeights> layers_;
    std::unique_ptr<Weight>   rope_freqs_;   // [n_rot/2] f32 divisors (llama with Llama-3 rope scaling)
    DType                     head_type_    = DType::f16;
    size_t                    weight_bytes_ = 0;
};

}  // namespace tern
