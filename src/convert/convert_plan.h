// The tensor half of `tern convert`: maps every tensor of the HF checkpoint to its GGUF name, type
// and shape (FORMATS.md §4.4), validates presence, dtype and shape of all of them up front, checks
// and scales the ternary weights, and produces each GGUF payload on demand.
//   HF (PyTorch order [out, in])                     GGUF (ggml order [ne0 = in, ne1 = out])
//   model.embed_tokens.weight       [vocab, n_embd]  token_embd.weight    [n_embd, vocab]  embd type
//   model.layers.N.self_attn.q_proj [q_dim, n_embd]  blk.N.attn_q.weight  [n_embd, q_dim]  ternary
//   ... (table in convert_plan.cpp)                  norms: [n], f32
#pragma once

#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "core/dtype.h"

#include <span>
#include <string>
#include <vector>

namespace tern {

struct PlannedTensor {
    enum class Kind { embedding, norm, ternary };

    std::string      name;  // GGUF name
    Kind             kind  = Kind::norm;
    DType            type  = DType::f32;
    int64_t          ne0   = 0;  // ggml dims: ne0 = HF in (or the vector length), ne1 = HF out (1 for vectors)
    int64_t          ne1   = 1;
    const StTensor * src   = nullptr;
    // Ternary only.
    bool             packed       = false;    // U8 [out/4, in] + weight_scale, else a float master
    const StTensor * weight_scale = nullptr;  // packed only
    float            scale        = 0.0f;     // multiplier written into the GGUF (resolve_ternary_scales)
    float            s_w          = 0.0f;     // masters: absmean factor

    bool is_vector() const { return kind == Kind::norm; }
};

struct ConvertPlan {
    std::vector<PlannedTensor> tensors;  // in file order
    int64_t n_packed = 0, n_master = 0;  // ternary tensors of each storage form
    bool    has_output = false;          // an untied lm_head became output.weight
};

// Resolves and validates every tensor (presence, dtype, shape, block divisibility for the chosen
// types). Throws Error(invalid_model) naming the tensor. Logs unused checkpoint tensors.
ConvertPlan plan_conversion(const HfBitnetConfig & config, const SafetensorsCheckpoint & ckpt, DType ternary_type,
                            DType embd_type);

// Reads each ternary source once: packed -> rejects field value 3 (naming the tensor and position)
// and reads weight_scale with linear_class semantics; master -> absmean scale, rejects non-finite
// values. Fills PlannedTensor::scale / s_w.
void resolve_ternary_scales(ConvertPlan & plan, LinearClass linear_class, bool progress);

// Writes t's GGUF payload (dtype_tensor_bytes(t.type, t.ne0, t.ne0 * t.ne1) bytes) into dst.
void fill_planned_tensor(const PlannedTensor & t, std::span<uint8_t> dst);

}  // namespace tern
