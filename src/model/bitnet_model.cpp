// BitnetModel: binds GGUF tensors by name (FORMATS.md §4.4, §4.13) with type and shape checks, and
// runs the forward pass in backend ops.
#include "model/bitnet_model.h"

#include "core/error.h"
#include "core/progress.h"
#include "core/log.h"
#include "quant/finite_check.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace tern {
namespace {

std::string shape_string(const std::array<int64_t, 4> & ne, uint32_t n_dims) {
    std::string s = "[";
    for (uint32_t d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
    return s + "]";
}

// Looks tensors up by name, checks them and remembers which ones were used.
class Binder {
public:
    Binder(const GgufFile & file, Backend & backend) : file_(file), backend_(backend) {}

    const GgufTensorInfo * find(const std::string & name) {
        const GgufTensorInfo * t = file_.find_tensor(name);
        if (t) used_.insert(name);
        return t;
    }

    WeightSource require(const std::string & name, std::vector<int64_t> shape, const char * role) {
        const GgufTensorInfo * t = find(name);
        if (!t) {
            fail(ErrorKind::invalid_model, format("tensor '%s' (%s) is missing", name.c_str(), role),
                 "the file is incomplete or is not a BitNet b1.58 model");
        }
        std::array<int64_t, 4> want{1, 1, 1, 1};
        for (size_t d = 0; d < shape.size(); ++d) want[d] = shape[d];
        if (t->ne != want) {
            fail(ErrorKind::invalid_model, format("tensor '%s': expected shape %s, got %s", name.c_str(),
                                                  shape_string(want, static_cast<uint32_t>(shape.size())).c_str(),
                                                  shape_string(t->ne, t->n_dims).c_str()));
        }
        WeightSource src;
        src.name = name;
        src.type = t->type;
        src.ne   = t->ne;
        src.data = file_.tensor_data(*t);
        // The rule for non-finite weights: refused at load, before any backend sees them (one NaN in
        // a norm weight would reach the int8 activation quantizer, where NaN -> int is undefined).
        if (const auto bad = find_non_finite(src.type, src.data, t->n_elements)) {
            fail(ErrorKind::invalid_model,
                 format("tensor '%s' (%s) holds %s%s at element %lld", name.c_str(), std::string(dtype_name(src.type)).c_str(),
                        std::isnan(bad->value) ? "a NaN" : bad->value > 0 ? "+infinity" : "-infinity",
                        bad->in_scale ? " in a block scale" : "", static_cast<long long>(bad->element)),
                 "tern refuses weights that are NaN or infinite: the file is corrupt or its converter is broken");
        }
        return src;
    }

    WeightSource norm(const std::string & name, int64_t n) {
        WeightSource src = require(name, {n}, "norm weight");
        if (src.type != DType::f32 && src.type != DType::f16 && src.type != DType::bf16) {
            fail(ErrorKind::invalid_model, format("tensor '%s' has type %s; expected f32 (or f16/bf16)", name.c_str(),
                                                  std::string(dtype_name(src.type)).c_str()));
        }
        return src;
    }

    // A projection: ternary weight [k, n], with the optional mainline `.scale` tensor {1} f32.
    WeightSource linear(const std::string & stem, int64_t k, int64_t n) {
        WeightSource src = require(stem + ".weight", {k, n}, "projection");
        if (!backend_.supports_linear(src.type) || !dtype_is_lowbit(src.type)) {
            fail(ErrorKind::unsupported,
                 format("tensor '%s.weight' has type %s, which backend '%s' cannot use for a BitLinear projection",
                        stem.c_str(), std::string(dtype_name(src.type)).c_str(), std::string(backend_.name()).c_str()),
                 "projection weights must be ternary: i2_s, tq1_0, tq2_0, q2_0, pq2_0 or q1_0");
        }
        if (const GgufTensorInfo * s = find(stem + ".scale")) {
            if (s->type != DType::f32 || s->n_elements != 1) {
                fail(ErrorKind::invalid_model, format("tensor '%s.scale': expected one f32 value", stem.c_str()));
            }
            float v;
            std::memcpy(&v, file_.tensor_data(*s).data(), 4);
            if (!std::isfinite(v)) {
                fail(ErrorKind::invalid_model, format("tensor '%s.scale' is %g; expected a finite number", stem.c_str(),
                                                      static_cast<double>(v)),
                     "tern refuses weights that are NaN or infinite: the file is corrupt or its converter is broken");
            }
            src.output_scale = v;
        }
        return src;
    }

    WeightSource embedding(const std::string & name, int64_t n_embd, int64_t n_vocab) {
        WeightSource src = require(name, {n_embd, n_vocab}, "embedding table");
        if (!backend_.supports_embedding(src.type)) {
            fail(ErrorKind::unsupported, format("tensor '%s' has type %s, which backend '%s' cannot use as an embedding",
                                                name.c_str(), std::string(dtype_name(src.type)).c_str(),
                                                std::string(backend_.name()).c_str()));
        }
        return src;
    }

    void warn_unused() const {
        std::vector<std::string> extra;
        for (const auto & t : file_.tensors()) {
            if (!used_.count(std::string(t.name))) extra.emplace_back(t.name);
        }
        if (!extra.empty()) {
            std::string list;
            for (size_t i = 0; i < extra.size() && i < 5; ++i) list += (i ? ", " : "") + extra[i];
            TERN_LOG_WARN("model: %zu tensor(s) in the file are not used: %s%s", extra.size(), list.c_str(),
                          extra.size() > 5 ? ", ..." : "");
        }
    }

private:
    const GgufFile &      file_;
    Backend &             backend_;
    std::set<std::string> used_;
};

Tensor view(const OwnedTensor & t, std::array<int64_t, 4> ne) {
    Tensor v = t.tensor;
    v.ne     = ne;
    TERN_ASSERT(v.n_bytes() <= t.tensor.n_bytes(), "view larger than its buffer");
    return v;
}

}  // namespace

std::unique_ptr<BitnetModel> BitnetModel::load(const GgufFile & file, Backend & backend) {
    std::unique_ptr<BitnetModel> m(new BitnetModel(read_model_config(file), backend));
    if (m->config_.family != ModelFamily::bitnet) {
        m->load_family(file);
        return m;
    }
    const ModelConfig & c = m->config_;
    Binder              b(file, backend);

    const WeightSource embd = b.embedding("token_embd.weight", c.n_embd, c.n_vocab);
    m->token_embd_          = backend.load_embedding(embd);
    m->output_norm_         = backend.load_norm(b.norm("output_norm.weight", c.n_embd));
    m->head_type_           = embd.type;
    if (file.find_tensor("output.weight")) {
        const WeightSource out = b.embedding("output.weight", c.n_embd, c.n_vocab);
        m->output_             = backend.load_embedding(out);
        m->head_type_          = out.type;
    }
    // Per decoded token: one embedding row, every layer weight, the final norm and the whole head
    // (the tied token_embd table when there is no output.weight), as the backend stores them.
    const Weight & head = m->output_ ? *m->output_ : *m->token_embd_;
    m->weight_bytes_    = m->token_embd_->n_bytes / static_cast<size_t>(std::max<int64_t>(1, c.n_vocab)) +
                       m->output_norm_->n_bytes + head.n_bytes;

    file.release_tensor_data();  // (a streamed file holds one layer's bytes at a time; see GgufFile)
    // Loads that take over a second (repacking a large model) show their progress by layer.
    ProgressBar bar("loading weights", static_cast<uint64_t>(c.n_layer), true, 1.0);
    for (int64_t il = 0; il < c.n_layer; ++il) {
        bar.update(static_cast<uint64_t>(il));
        const std::string p = "blk." + std::to_string(il) + ".";
        LayerWeights      L;
        L.attn_norm     = backend.load_norm(b.norm(p + "attn_norm.weight", c.n_embd));
        const WeightSource qkv[3] = {b.linear(p + "attn_q", c.n_embd, c.n_embd_q()),
                                     b.linear(p + "attn_k", c.n_embd, c.n_embd_kv()),
                                     b.linear(p + "attn_v", c.n_embd, c.n_embd_kv())};
        L.attn_qkv      = backend.load_linear(qkv);
        L.attn_sub_norm = backend.load_norm(b.norm(p + "attn_sub_norm.weight", c.n_embd_q()));
        const WeightSource wo = b.linear(p + "attn_output", c.n_embd_q(), c.n_embd);
        L.attn_output   = backend.load_linear({&wo, 1});
        L.ffn_norm      = backend.load_norm(b.norm(p + "ffn_norm.weight", c.n_embd));
        const WeightSource gu[2] = {b.linear(p + "ffn_gate", c.n_embd, c.n_ff), b.linear(p + "ffn_up", c.n_embd, c.n_ff)};
        L.ffn_gate_up   = backend.load_linear(gu);
        L.ffn_sub_norm  = backend.load_norm(b.norm(p + "ffn_sub_norm.weight", c.n_ff));
        const WeightSource wd = b.linear(p + "ffn_down", c.n_ff, c.n_embd);
        L.ffn_down      = backend.load_linear({&wd, 1});
        for (const Weight * w : {L.attn_norm.get(), L.attn_qkv.get(), L.attn_sub_norm.get(), L.attn_output.get(),
                                 L.ffn_norm.get(), L.ffn_gate_up.get(), L.ffn_sub_norm.get(), L.ffn_down.get()}) {
            m->weight_bytes_ += w->n_bytes;
        }
        m->layers_.push_back(std::move(L));
        file.release_tensor_data();
    }
    bar.finish();
    b.warn_unused();
    return m;
}

ForwardBuffers BitnetModel::make_buffers(int64_t n_batch, int64_t n_logits) const {
    const ModelConfig & c = config_;
    TERN_ASSERT(n_batch >= 1 && n_logits >= 0 && n_logits <= n_batch, "n_batch %lld n_logits %lld",
                static_cast<long long>(n_batch), static_cast<long long>(n_logits));
    ForwardBuffers b;
    b.n_batch   = n_batch;
    b.n_logits  = n_logits;
    b.tokens    = alloc_tensor(backend_, DType::i32, {n_batch, 1, 1, 1}, "tokens");
    b.x         = alloc_tensor(backend_, DType::f32, {c.n_embd, n_batch, 1, 1}, "x");
    b.act_q     = alloc_tensor(backend_, DType::i8, {std::max({c.n_embd, c.n_embd_q(), c.n_ff}), n_batch, 1, 1}, "act_q");
    b.act_scale = alloc_tensor(backend_, DType::f32, {n_batch, 1, 1, 1}, "act_scale");
    b.q         = alloc_tensor(backend_, DType::f32, {c.n_embd_q(), n_batch, 1, 1}, "q");
    b.attn      = alloc_tensor(backend_, DType::f32, {c.n_embd_q(), n_batch, 1, 1}, "attn");
    b.ffn       = alloc_tensor(backend_, DType::f32, {c.n_ff, n_batch, 1, 1}, "ffn");
    b.h         = alloc_tensor(backend_, DType::f32, {c.n_embd, n_batch, 1, 1}, "h");
    b.x_head    = alloc_tensor(backend_, DType::f32, {c.n_embd, std::max<int64_t>(1, n_logits), 1, 1}, "x_head");
    b.logits    = alloc_tensor(backend_, DType::f32, {c.n_vocab, std::max<int64_t>(1, n_logits), 1, 1}, "logits");
    if (c.family != ModelFamily::bitnet) {
        b.act_f = alloc_tensor(backend_, DType::f32, {std::max({c.n_embd, c.n_embd_q(), c.n_ff}), n_batch, 1, 1}, "act_f");
        b.qkv   = alloc_tensor(backend_, DType::f32, {c.n_embd_q() + 2 * c.n_embd_kv(), n_batch, 1, 1}, "qkv");
    }
    return b;
}

void BitnetModel::forward(ForwardBuffers & buf, const KvCache & kv, int64_t pos0, int64_t n_tokens, int64_t n_logits,
                          bool round_head_input_f16) const {
    TERN_ASSERT(n_logits >= 0 && n_logits <= n_tokens && n_logits <= buf.n_logits, "n_logits %lld",
                static_cast<long long>(n_logits));
    HeadOutput head;
    head.logits = view(buf.logits, {config_.n_vocab, n_logits, 1, 1});
    backend_.begin_step();
    record(buf, {kv, pos0}, n_tokens, view(buf.tokens, {n_tokens, 1, 1, 1}), head, nullptr, round_head_input_f16);
    backend_.end_step();
}

bool BitnetModel::forward_batch(ForwardBuffers & buf, const KvCache & pool, const KvBatch & batch,
                                const Tensor & head_cols, const HeadOutput & head, bool round_head_input_f16,
                                bool hold) const {
    const int64_t n_tokens = batch.n_tokens();
    const int64_t n_out    = head.logits.ne[1];
    TERN_ASSERT(n_out >= 0 && n_out <= buf.n_logits && (n_out == 0 || head_cols.ne[0] == n_out), "n_out %lld",
                static_cast<long long>(n_out));
    // (not held: the device is idle, BatchEngine read the step before; held: the step before runs)
    if (hold) {
        backend_.begin_held_step();
    } else {
        backend_.begin_step_from_idle();
    }
    record(buf, {pool, 0, &batch}, n_tokens, view(buf.tokens, {n_tokens, 1, 1, 1}), head, &head_cols,
           round_head_input_f16);
    if (hold) return backend_.hold_step();
    backend_.end_step();
    return false;
}

void BitnetModel::record_step(ForwardBuffers & buf, const KvCache & kv, const DecodeStep & step,
                              bool round_head_input_f16) const {
    TERN_ASSERT(step.token.ne[0] == 1 && step.head.logits.ne[1] == 1, "a decode step is one token");
    record(buf, {kv, step.pos}, 1, step.token, step.head, nullptr, round_head_input_f16);
}

void BitnetModel::record(ForwardBuffers & buf, const KvPlace & at, int64_t n_tokens, const Tensor & tokens,
                         const HeadOutput & head, const Tensor * head_cols, bool round_head_input_f16) const {
    const ModelConfig & c        = config_;
    const int64_t       n_logits = head.logits.ne[1];
    TERN_ASSERT(n_tokens >= 1 && n_tokens <= buf.n_batch, "n_tokens %lld", static_cast<long long>(n_tokens));
    TERN_ASSERT(n_logits >= 0 && (head_cols != nullptr || n_logits <= n_tokens), "n_logits %lld",
                static_cast<long long>(n_logits));
    TERN_ASSERT(at.batch != nullptr || (at.pos0 >= 0 && at.pos0 + n_tokens <= at.kv.n_ctx),
                "positions past the KV cache");
    const int64_t T  = n_tokens;
    Backend &     be = backend_;

    const Tensor  x      = view(buf.x, {c.n_embd, T, 1, 1});
    const Tensor  q      = view(buf.q, {c.n_embd_q(), T, 1, 1});
    const Tensor  attn   = view(buf.attn, {c.n_embd_q(), T, 1, 1});
    const Tensor  ffn    = view(buf.ffn, {c.n_ff, T, 1, 1});
    const Tensor  scale  = view(buf.act_scale, {T, 1, 1, 1});
    const QuantizedActs a_embd{view(buf.act_q, {c.n_embd, T, 1, 1}), scale};
    const QuantizedActs a_q{view(buf.act_q, {c.n_embd_q(), T, 1, 1}), scale};
    const QuantizedActs a_ff{view(buf.act_q, {c.n_ff, T, 1, 1}), scale};
    const AttentionShape shape = c.attention_shape();
    const float          eps   = c.norm_eps;

    be.embed(x, *token_embd_, tokens);
    for (int64_t il = 0; il < c.n_layer; ++il) {
        const LayerWeights & L  = layers_[static_cast<size_t>(il)];
        const KvLayer        kl = at.kv.layer(il);
        if (c.family != ModelFamily::bitnet) {
            record_family_layer(buf, L, kl, at, T);
            continue;
        }
        if (at.batch != nullptr) {
            be.linear_qkv_paged(q, kl, *L.attn_qkv, {x, L.attn_norm.get(), eps, a_embd, {}}, shape, *at.batch);
            be.attention_paged(attn, q, kl, shape, *at.batch);
        } else {
            be.linear_qkv(q, kl, *L.attn_qkv, {x, L.attn_norm.get(), eps, a_embd, {}}, shape, at.pos0);
            be.attention(attn, q, kl, shape, at.pos0);
        }
        be.linear(x, *L.attn_output, {attn, L.attn_sub_norm.get(), eps, a_q, {}}, /*accumulate=*/true);
        be.linear_glu(ffn, *L.ffn_gate_up, {x, L.ffn_norm.get(), eps, a_embd, {}}, c.ffn_act);
        be.linear(x, *L.ffn_down, {ffn, L.ffn_sub_norm.get(), eps, a_ff, {}}, /*accumulate=*/true);
    }
    if (n_logits > 0) {
        Tensor x_last;
        if (head_cols != nullptr) {  // a batch: each listed column (a sequence's last token)
            x_last = view(buf.x_head, {c.n_embd, n_logits, 1, 1});
            be.gather_columns(x_last, x, *head_cols);
        } else {
            x_last = x.columns(T - n_logits, n_logits);
        }
        const Tensor   h      = view(buf.h, {c.n_embd, n_logits, 1, 1});
        const Weight & table  = output_ ? *output_ : *token_embd_;
        be.output_head(head, table, {x_last, output_norm_.get(), eps, {}, h}, round_head_input_f16);
    }
}

}  // namespace tern
