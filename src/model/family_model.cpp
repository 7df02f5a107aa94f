// The llama / qwen3 / phi3 families on BitnetModel's skeleton (bitnet_model.h): tensor binding with
// the family's shape and type checks (check_family_tensors), and one layer's ops over the general
// linear path of backend.h (linear with the float input form, rope_kv_append).
#include "core/error.h"
#include "core/log.h"
#include "model/bitnet_model.h"
#include "model/family_config.h"

#include <algorithm>
#include <string>

namespace tern {
namespace {

Tensor view_of(const OwnedTensor & t, std::array<int64_t, 4> ne) {
    Tensor v = t.tensor;
    v.ne     = ne;
    TERN_ASSERT(v.n_bytes() <= t.tensor.n_bytes(), "view larger than its buffer");
    return v;
}

class FamilyBinder {
public:
    FamilyBinder(const GgufFile & file, Backend & backend, std::string arch)
        : file_(file), backend_(backend), arch_(std::move(arch)) {}

    // Shapes and types were checked by check_family_tensors; this adds the backend's say.
    WeightSource source(const std::string & name) const {
        const GgufTensorInfo * t = file_.find_tensor(name);
        TERN_ASSERT(t != nullptr, "tensor %s vanished after the check", name.c_str());
        WeightSource src;
        src.name = name;
        src.type = t->type;
        src.ne   = t->ne;
        src.data = file_.tensor_data(*t);
        return src;
    }
    WeightSource matrix(const std::string & name) const {
        WeightSource src = source(name);
        if (!backend_.supports_linear(src.type)) {
            fail(ErrorKind::unsupported,
                 format("tensor '%s' has type %s, which backend '%s' cannot use as a linear weight", name.c_str(),
                        std::string(dtype_name(src.type)).c_str(), std::string(backend_.name()).c_str()),
                 backend_.name() == "cpu" ? "re-quantize the model to q8_0, q4_0, q4_k, q6_k or f16 (tern quantize)"
                                          : "use --backend cpu for this model");
        }
        src.q8_0_acts = true;  // the general path: matmul / matmul_glu
        return src;
    }
    WeightSource table(const std::string & name) const {
        WeightSource src = source(name);
        if (!backend_.supports_embedding(src.type)) {
            fail(ErrorKind::unsupported, format("tensor '%s' has type %s, which backend '%s' cannot use as an embedding or head",
                                                name.c_str(), std::string(dtype_name(src.type)).c_str(),
                                                std::string(backend_.name()).c_str()));
        }
        return src;
    }
    bool has(const std::string & name) const { return file_.find_tensor(name) != nullptr; }

private:
    const GgufFile & file_;
    Backend &        backend_;
    std::string      arch_;
};

}  // namespace

void BitnetModel::load_family(const GgufFile & file) {
    const FamilyConfig fc = read_family_config(file);
    check_family_tensors(file, fc);
    const ModelConfig & c = config_;
    Backend &           be = backend_;
    const FamilyBinder  b(file, be, c.arch);

    const WeightSource embd = b.table("token_embd.weight");
    token_embd_             = be.load_embedding(embd);
    output_norm_            = be.load_norm(b.source("output_norm.weight"));
    head_type_              = embd.type;
    if (!fc.tied_head) {
        const WeightSource out = b.table("output.weight");
        output_                = be.load_embedding(out);
        head_type_             = out.type;
    }
    if (c.rope_freqs) rope_freqs_ = be.load_norm(b.source("rope_freqs.weight"));
    const Weight & head = output_ ? *output_ : *token_embd_;
    weight_bytes_ = token_embd_->n_bytes / static_cast<size_t>(std::max<int64_t>(1, c.n_vocab)) + output_norm_->n_bytes +
                    head.n_bytes;

    file.release_tensor_data();  // (a streamed file holds one layer's bytes at a time; see GgufFile)
    for (int64_t il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        LayerWeights      L;
        L.attn_norm = be.load_norm(b.source(p + "attn_norm.weight"));
        if (c.fused_qkv) {
            const WeightSource qkv = b.matrix(p + "attn_qkv.weight");
            L.attn_qkv             = be.load_linear({&qkv, 1});
        } else {
            const WeightSource qkv[3] = {b.matrix(p + "attn_q.weight"), b.matrix(p + "attn_k.weight"),
                                         b.matrix(p + "attn_v.weight")};
            L.attn_qkv                = be.load_linear(qkv);
        }
        if (c.qk_norm) {
            L.attn_q_norm = be.load_norm(b.source(p + "attn_q_norm.weight"));
            L.attn_k_norm = be.load_norm(b.source(p + "attn_k_norm.weight"));
        }
        const WeightSource wo = b.matrix(p + "attn_output.weight");
        L.attn_output         = be.load_linear({&wo, 1});
        L.ffn_norm            = be.load_norm(b.source(p + "ffn_norm.weight"));
        if (c.fused_gate_up) {  // phi3: ffn_up [n_embd, 2 n_ff] = gate rows then up rows
            const WeightSource gu = b.matrix(p + "ffn_up.weight");
            L.ffn_gate_up         = be.load_linear({&gu, 1});
        } else {
            const WeightSource gu[2] = {b.matrix(p + "ffn_gate.weight"), b.matrix(p + "ffn_up.weight")};
            L.ffn_gate_up            = be.load_linear(gu);
        }
        const WeightSource wd = b.matrix(p + "ffn_down.weight");
        L.ffn_down            = be.load_linear({&wd, 1});
        for (const Weight * w : {L.attn_norm.get(), L.attn_qkv.get(), L.attn_q_norm.get(), L.attn_k_norm.get(),
                                 L.attn_output.get(), L.ffn_norm.get(), L.ffn_gate_up.get(), L.ffn_down.get()}) {
            if (w) weight_bytes_ += w->n_bytes;
        }
        layers_.push_back(std::move(L));
        file.release_tensor_data();
    }
    if (rope_freqs_) weight_bytes_ += rope_freqs_->n_bytes;
}

void BitnetModel::record_family_layer(const ForwardBuffers & buf, const LayerWeights & L, const KvLayer & kl,
                                      const KvPlace & at, int64_t T) const {
    const ModelConfig & c  = config_;
    Backend &           be = backend_;
    const int64_t       n_qkv = c.n_embd_q() + 2 * c.n_embd_kv();
    const Tensor        x     = view_of(buf.x, {c.n_embd, T, 1, 1});
    const Tensor        q     = view_of(buf.q, {c.n_embd_q(), T, 1, 1});
    const Tensor        attn  = view_of(buf.attn, {c.n_embd_q(), T, 1, 1});
    const Tensor        ffn   = view_of(buf.ffn, {c.n_ff, T, 1, 1});
    const Tensor        qkv   = view_of(buf.qkv, {n_qkv, T, 1, 1});
    const Tensor        h     = view_of(buf.act_f, {c.n_embd, T, 1, 1});
    const float         eps   = c.norm_eps;

    AttentionShape shape = c.attention_shape();
    shape.rope_freqs     = rope_freqs_.get();
    shape.q_norm         = L.attn_q_norm.get();
    shape.k_norm         = L.attn_k_norm.get();

    be.linear(qkv, *L.attn_qkv, {x, L.attn_norm.get(), eps, {}, h}, /*accumulate=*/false);
    if (at.batch != nullptr) {  // many sequences over a paged cache (BatchEngine)
        be.rope_kv_append_paged(q, kl, qkv, shape, *at.batch);
        be.attention_paged(attn, q, kl, shape, *at.batch);
    } else {
        be.rope_kv_append(q, kl, qkv, shape, at.pos0);
        be.attention(attn, q, kl, shape, at.pos0);
    }
    be.linear(x, *L.attn_output, {attn, nullptr, eps, {}, {}}, /*accumulate=*/true);
    be.linear_glu(ffn, *L.ffn_gate_up, {x, L.ffn_norm.get(), eps, {}, h}, c.ffn_act);
    be.linear(x, *L.ffn_down, {ffn, nullptr, eps, {}, {}}, /*accumulate=*/true);
}

}  // namespace tern
