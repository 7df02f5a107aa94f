// The config.json of a Hugging Face LlamaForCausalLM (Llama-2/3, Falcon3, TriLM), Qwen3ForCausalLM or
// Phi3ForCausalLM checkpoint, read and validated for `tern convert` (the values llama.cpp's
// convert_hf_to_gguf turns into GGUF metadata). Errors name the key, what was expected and what was
// found.
#pragma once

#include "core/rope_scaling.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

struct HfFamilyConfig {
    std::string hf_class;  // "LlamaForCausalLM", "Qwen3ForCausalLM", "Phi3ForCausalLM"
    std::string arch;      // GGUF architecture: "llama", "qwen3", "phi3"
    int64_t     hidden_size = 0, intermediate_size = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0;
    int64_t     head_dim = 0;
    bool        head_dim_explicit = false;  // config has head_dim (llama.cpp then writes key/value_length)
    int64_t     n_rot = 0;                  // head_dim * partial_rotary_factor
    int64_t     vocab_size = 0, context_length = 0;
    int64_t     original_context_length = 0;  // phi3: original_max_position_embeddings
    double      rms_norm_eps = 0, rope_theta = 10000.0;
    bool        tie_word_embeddings = false;
    std::optional<int64_t> sliding_window;   // phi3

    // rope_scaling: none, linear (factor), llama3 (-> rope_freqs tensor), longrope (phi3 factors).
    std::string                 rope_scaling_type;  // "" = none
    double                      rope_scaling_factor = 1.0;
    Llama3RopeScaling           llama3;
    std::vector<float>          long_factor, short_factor;  // longrope
    std::optional<double>       rope_attn_factor;           // longrope's attention_factor, if given

    // quantization_config {"quant_method": "bitnet"}: projections are ternary (Falcon3-1.58bit,
    // Falcon-E), packed U8 [out/4, in] + weight_scale or float masters.
    bool        bitnet_quantized = false;
    bool        linear_class_multiplier = true;  // autobitlinear (weight_scale multiplies) vs bitlinear

    std::optional<int64_t> bos_token_id, eos_token_id, pad_token_id;

    int64_t q_dim() const { return n_heads * head_dim; }
    int64_t kv_dim() const { return n_kv_heads * head_dim; }
};

// "architectures"[0] of a config.json text, or "" when absent.
std::string hf_architecture(std::string_view json_text, const std::string & source);
bool        is_hf_family_class(std::string_view hf_class);

// Throws Error(invalid_model) for missing / bad values, Error(unsupported) for classes and features
// tern does not convert (rope scaling types other than linear / llama3 / longrope, activations
// other than SiLU, attention biases).
HfFamilyConfig parse_hf_family_config(std::string_view json_text, const std::string & source);

}  // namespace tern
