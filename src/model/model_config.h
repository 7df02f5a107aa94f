// Hyper-parameters of a model, read from GGUF metadata and validated (FORMATS.md §4.3, §4.5,
// §4.13, §6.1). Arch strings: "bitnet-b1.58" (official 2B4T file), "bitnet-25" (its first upload),
// "bitnet" (mainline llama.cpp converter, 1bitLLM models); "llama", "qwen3", "phi3" through
// read_family_config (family_config.h).
#pragma once

#include "backend/backend.h"
#include "gguf/gguf_reader.h"
#include "model/family_config.h"

#include <cstdint>
#include <string>

namespace tern {

struct ModelConfig {
    std::string   arch;            // general.architecture
    std::string   name;            // general.name (may be empty)
    int64_t       n_vocab     = 0;
    int64_t       n_ctx_train = 0; // context_length
    int64_t       n_embd      = 0;
    int64_t       n_layer     = 0;
    int64_t       n_ff        = 0;
    int64_t       n_head      = 0;
    int64_t       n_head_kv   = 0;
    int64_t       head_dim    = 0; // key_length, default n_embd / n_head
    int64_t       n_rot       = 0; // rope.dimension_count, default head_dim
    float         rope_freq_base = 10000.0f;
    float         norm_eps    = 1e-5f;
    FfnActivation ffn_act     = FfnActivation::relu2;
    bool          synthetic   = false;  // tern.synthetic: random weights made by `tern synth`
    // The other families (family_config.h; BitNet: bitnet, neox, none of the extras):
    ModelFamily   family          = ModelFamily::bitnet;
    RopeMode      rope_mode       = RopeMode::neox;
    float         rope_freq_scale = 1.0f;
    bool          qk_norm         = false;  // attn_q_norm / attn_k_norm [head_dim]
    bool          fused_qkv       = false;  // attn_qkv
    bool          fused_gate_up   = false;  // ffn_up holds gate then up rows
    bool          rope_freqs      = false;  // rope_freqs.weight divisors

    int64_t n_embd_q() const { return n_head * head_dim; }
    int64_t n_embd_kv() const { return n_head_kv * head_dim; }
    AttentionShape attention_shape() const;
};

// Throws Error(invalid_model) naming the key, or Error(unsupported) for another architecture.
ModelConfig read_model_config(const GgufFile & file);

bool is_supported_arch(std::string_view arch);

}  // namespace tern
