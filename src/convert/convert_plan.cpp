// Tensor mapping, validation, ternary scale resolution and payload production; see convert_plan.h.
#include "convert/convert_plan.h"

#include "convert/hf_ternary.h"
#include "core/error.h"
#include "core/utf8.h"
#include "core/log.h"
#include "core/progress.h"
#include "quant/block_formats.h"

#include <cmath>
#include <cstring>
#include <set>

namespace tern {
namespace {

using Kind = PlannedTensor::Kind;

std::string shape_str(const std::vector<int64_t> & s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

[[noreturn]] void bad_tensor(const std::string & msg, const std::string & hint = {}) {
    fail(ErrorKind::invalid_model, msg, hint);
}

class Planner {
public:
    Planner(const HfBitnetConfig & c, const SafetensorsCheckpoint & ckpt, DType ternary, DType embd)
        : c_(c), ckpt_(ckpt), ternary_(ternary), embd_(embd) {}

    ConvertPlan run() {
        ConvertPlan plan;
        const int64_t n_embd = c_.hidden_size, n_ff = c_.intermediate_size;
        const int64_t q_dim = c_.q_dim(), kv_dim = c_.kv_dim();

        plan.tensors.push_back(embedding("model.embed_tokens.weight", "token_embd.weight"));
        for (int64_t il = 0; il < c_.n_layers; ++il) {
            const std::string hf = "model.layers." + std::to_string(il) + ".";
            const std::string gg = "blk." + std::to_string(il) + ".";
            // [HF name, GGUF name, out (rows; the length for norms), in]
            plan.tensors.push_back(norm(hf + "input_layernorm.weight", gg + "attn_norm.weight", n_embd));
            plan.tensors.push_back(ternary(hf + "self_attn.q_proj", gg + "attn_q.weight", q_dim, n_embd));
            plan.tensors.push_back(ternary(hf + "self_attn.k_proj", gg + "attn_k.weight", kv_dim, n_embd));
            plan.tensors.push_back(ternary(hf + "self_attn.v_proj", gg + "attn_v.weight", kv_dim, n_embd));
            plan.tensors.push_back(norm(hf + "self_attn.attn_sub_norm.weight", gg + "attn_sub_norm.weight", q_dim));
            plan.tensors.push_back(ternary(hf + "self_attn.o_proj", gg + "attn_output.weight", n_embd, q_dim));
            plan.tensors.push_back(norm(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", n_embd));
            plan.tensors.push_back(ternary(hf + "mlp.gate_proj", gg + "ffn_gate.weight", n_ff, n_embd));
            plan.tensors.push_back(ternary(hf + "mlp.up_proj", gg + "ffn_up.weight", n_ff, n_embd));
            plan.tensors.push_back(norm(hf + "mlp.ffn_sub_norm.weight", gg + "ffn_sub_norm.weight", n_ff));
            plan.tensors.push_back(ternary(hf + "mlp.down_proj", gg + "ffn_down.weight", n_embd, n_ff));
        }
        plan.tensors.push_back(norm("model.norm.weight", "output_norm.weight", n_embd));

        // LM head: tied unless the checkpoint carries lm_head.weight and the config does not tie.
        const bool has_lm_head = ckpt_.find("lm_head.weight") != nullptr;
        if (c_.tie_word_embeddings.has_value()) {
            if (*c_.tie_word_embeddings && has_lm_head) {
                TERN_LOG_WARN("convert: config ties the embeddings; ignoring lm_head.weight");
                used_.insert("lm_head.weight");
            } else if (!*c_.tie_word_embeddings && !has_lm_head) {
                bad_tensor("checkpoint has no tensor 'lm_head.weight', but config.json says \"tie_word_embeddings\": false",
                           "set \"tie_word_embeddings\": true if the LM head is the embedding");
            }
        } else {
            TERN_LOG_INFO("convert: config has no tie_word_embeddings; %s", has_lm_head ? "lm_head.weight found: untied"
                                                                                        : "no lm_head.weight: tied");
        }
        if (has_lm_head && c_.tie_word_embeddings.value_or(false) == false) {
            plan.tensors.push_back(embedding("lm_head.weight", "output.weight"));
            plan.has_output = true;
        }

        for (const auto & t : plan.tensors) {
            if (t.kind == Kind::ternary) (t.packed ? plan.n_packed : plan.n_master)++;
        }
        report_unused();
        return plan;
    }

private:
    const StTensor & require(const std::string & hf_name, const std::string & gguf_name) {
        const StTensor * t = ckpt_.find(hf_name);
        if (!t) {
            bad_tensor(format("checkpoint has no tensor '%s' (needed for GGUF '%s')", hf_name.c_str(), gguf_name.c_str()),
                       "the folder must hold a complete BitNetForCausalLM checkpoint whose sizes match config.json");
        }
        used_.insert(hf_name);
        return *t;
    }

    static void expect_float(const StTensor & t, const char * role) {
        if (!st_dtype_is_float(t.dtype)) {
            bad_tensor(format("tensor '%s' has dtype %s, expected BF16, F16 or F32 (%s)", t.name.c_str(),
                              std::string(st_dtype_name(t.dtype)).c_str(), role));
        }
    }

    static void expect_shape(const StTensor & t, const std::vector<int64_t> & expected, const char * note) {
        if (t.shape != expected) {
            bad_tensor(format("tensor '%s' has shape %s, expected %s (%s)", t.name.c_str(), t.shape_string().c_str(),
                              shape_str(expected).c_str(), note),
                       "the checkpoint does not match its config.json");
        }
    }

    void expect_row_blocks(const std::string & gguf_name, DType type, int64_t ne0) const {
        const int64_t qk = type == DType::i2_s ? 128 : dtype_traits(type).block_size;
        if (ne0 % qk != 0) {
            bad_tensor(format("tensor '%s' has rows of %lld elements; %s needs a multiple of %lld", gguf_name.c_str(),
                              (long long) ne0, std::string(dtype_name(type)).c_str(), (long long) qk),
                       type == DType::i2_s ? "" : "choose another type (--type / --embd-type)");
        }
    }

    PlannedTensor embedding(const std::string & hf_name, const std::string & gguf_name) {
        const StTensor & t = require(hf_name, gguf_name);
        expect_float(t, "embedding");
        expect_shape(t, {c_.vocab_size, c_.hidden_size}, "[vocab_size, hidden_size]");
        expect_row_blocks(gguf_name, embd_, c_.hidden_size);
        PlannedTensor p;
        p.name = gguf_name, p.kind = Kind::embedding, p.type = embd_, p.ne0 = c_.hidden_size, p.ne1 = c_.vocab_size;
        p.src  = &t;
        return p;
    }

    PlannedTensor norm(const std::string & hf_name, const std::string & gguf_name, int64_t n) {
        const StTensor & t = require(hf_name, gguf_name);
        expect_float(t, "norm weight");
        expect_shape(t, {n}, "norm weight");
        PlannedTensor p;
        p.name = gguf_name, p.kind = Kind::norm, p.type = DType::f32, p.ne0 = n, p.ne1 = 1;
        p.src  = &t;
        return p;
    }

    PlannedTensor ternary(const std::string & hf_prefix, const std::string & gguf_name, int64_t out, int64_t in) {
        const std::string weight_name = hf_prefix + ".weight";
        const std::string scale_name  = hf_prefix + ".weight_scale";
        const StTensor &  w           = require(weight_name, gguf_name);
        PlannedTensor     p;
        p.name = gguf_name, p.kind = Kind::ternary, p.type = ternary_, p.ne0 = in, p.ne1 = out, p.src = &w;
        if (w.dtype == StDType::u8) {
            if (out % 4 != 0) {
                bad_tensor(format("tensor '%s' is packed (U8), but its %lld output rows are not a multiple of 4",
                                  weight_name.c_str(), (long long) out));
            }
            expect_shape(w, {out / 4, in}, "packed U8 [out/4, in]");
            p.packed                 = true;
            const StTensor * s       = ckpt_.find(scale_name);
            if (!s) {
                bad_tensor(format("checkpoint has no tensor '%s' (the scale of packed '%s')", scale_name.c_str(), weight_name.c_str()),
                           "packed HF BitNet checkpoints carry one weight_scale per projection");
            }
            used_.insert(scale_name);
            expect_float(*s, "weight_scale");
            if (s->n_elements != 1) {
                bad_tensor(format("tensor '%s' has shape %s, expected one element ([1] or [])", scale_name.c_str(),
                                  s->shape_string().c_str()));
            }
            p.weight_scale = s;
        } else if (st_dtype_is_float(w.dtype)) {
            expect_shape(w, {out, in}, "master weight [out, in]");
            if (ckpt_.find(scale_name)) {
                TERN_LOG_WARN("convert: ignoring '%s': '%s' holds master weights, which are ternarised by absmean",
                              scale_name.c_str(), weight_name.c_str());
                used_.insert(scale_name);
            }
        } else {
            bad_tensor(format("tensor '%s' has dtype %s, expected U8 (packed ternary) or BF16/F16/F32 (master weights)",
                              weight_name.c_str(), std::string(st_dtype_name(w.dtype)).c_str()));
        }
        expect_row_blocks(gguf_name, ternary_, in);
        return p;
    }

    void report_unused() const {
        std::vector<std::string> unused;
        for (const auto & name : ckpt_.names()) {
            if (!used_.count(name)) unused.push_back(name);
        }
        if (unused.empty()) return;
        std::string list;
        for (size_t i = 0; i < unused.size() && i < 5; ++i) list += (i ? ", " : "") + unused[i];
        TERN_LOG_WARN("convert: ignoring %zu checkpoint tensor(s) that have no GGUF counterpart: %s%s", unused.size(),
                      list.c_str(), unused.size() > 5 ? ", ..." : "");
    }

    const HfBitnetConfig &        c_;
    const SafetensorsCheckpoint & ckpt_;
    DType                         ternary_, embd_;
    std::set<std::string>         used_;
};

}  // namespace

ConvertPlan plan_conversion(const HfBitnetConfig & config, const SafetensorsCheckpoint & ckpt, DType ternary_type,
                            DType embd_type) {
    return Planner(config, ckpt, ternary_type, embd_type).run();
}

void resolve_ternary_scales(ConvertPlan & plan, LinearClass linear_class, bool progress) {
    uint64_t total = 0, done = 0;
    for (const auto & t : plan.tensors) {
        if (t.kind == Kind::ternary) total += t.src->data.size();
    }
    ProgressBar bar("checking ternary weights", total, progress);
    for (auto & t : plan.tensors) {
        if (t.kind != Kind::ternary) continue;
        if (t.packed) {
            const PackedFieldCheck check = check_hf_packed(*t.src);
            if (check.n_invalid > 0) {
                bad_tensor(format("tensor '%s' is not ternary: %lld packed field(s) hold 3, the first at row %lld, column %lld "
                                  "(fields must be 0, 1 or 2 = value + 1)",
                                  t.src->name.c_str(), (long long) check.n_invalid, (long long) check.first_row,
                                  (long long) check.first_col),
                           "the checkpoint is damaged or not a BitNet b1.58 packed checkpoint");
            }
            t.scale = hf_packed_scale(*t.weight_scale, linear_class);
        } else {
            const AbsmeanScale s = absmean_scale(*t.src);
            t.s_w                = s.s_w;
            t.scale              = s.scale;
        }
        done += t.src->data.size();
        bar.update(done);
    }
    bar.finish();
}

namespace {

// tern refuses non-finite weights at load; the converter refuses to write them.
void check_finite(const PlannedTensor & t, const std::vector<float> & row, int64_t r) {
    for (size_t i = 0; i < row.size(); ++i) {
        if (!std::isfinite(row[i])) {
            bad_tensor(format("tensor '%s' has a non-finite value (%g) at [%lld, %zu]", printable(t.src->name).c_str(),
                              static_cast<double>(row[i]), static_cast<long long>(r), i),
                       "the checkpoint is damaged");
        }
    }
}

}  // namespace

void fill_planned_tensor(const PlannedTensor & t, std::span<uint8_t> dst) {
    switch (t.kind) {
        case Kind::norm: {  // [ne0] f32
            std::vector<float> row(static_cast<size_t>(t.ne0));
            st_read_f32(*t.src, 0, t.ne0, row.data());
            check_finite(t, row, 0);
            std::memcpy(dst.data(), row.data(), row.size() * 4);
            return;
        }
        case Kind::embedding: {  // [n_embd, n_vocab]: row t is token t, converted row by row
            const size_t       row_bytes = dtype_row_bytes(t.type, t.ne0);
            std::vector<float> row(static_cast<size_t>(t.ne0));
            for (int64_t r = 0; r < t.ne1; ++r) {
                st_read_f32(*t.src, r * t.ne0, t.ne0, row.data());
                check_finite(t, row, r);  // a NaN would make the block quantizers' float -> int undefined
                quantize_row(t.type, row.data(), dst.data() + static_cast<size_t>(r) * row_bytes, t.ne0);
            }
            return;
        }
        case Kind::ternary: {  // [in, out]: the whole matrix as {-1, 0, +1}, then one pack call
            std::vector<int8_t> values(static_cast<size_t>(t.ne0 * t.ne1));
            if (t.packed) {
                unpack_hf_packed(*t.src, t.ne1, t.ne0, values.data());
            } else {
                absmean_ternarize(*t.src, t.s_w, values.data());
            }
            pack_ternary_tensor(t.type, values.data(), t.ne1, t.ne0, t.scale, dst);
            return;
        }
    }
}

}  // namespace tern
