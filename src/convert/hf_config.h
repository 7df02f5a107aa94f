// The config.json of a Hugging Face BitNetForCausalLM checkpoint (FORMATS.md §4.5, §4.14, §4.15),
// read and validated: every value the converter uses is checked for presence, type and range, and
// an error names the key, what was expected and what was found.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tern {

// quantization_config.linear_class: what a packed weight's weight_scale means (FORMATS.md §4.14).
enum class LinearClass {
    autobitlinear,  // y = linear(x, t) * weight_scale: weight_scale is the multiplier
    bitlinear,      // y = linear(x, t) / weight_scale: weight_scale is a divisor (transformers' default)
};

struct HfBitnetConfig {
    int64_t hidden_size       = 0;  // n_embd
    int64_t intermediate_size = 0;  // n_ff
    int64_t n_layers          = 0;  // num_hidden_layers
    int64_t n_heads           = 0;  // num_attention_heads
    int64_t n_kv_heads        = 0;  // num_key_value_heads (default: n_heads)
    int64_t head_dim          = 0;  // head_dim, or hidden_size / n_heads
    bool    head_dim_explicit = false;
    int64_t vocab_size        = 0;
    int64_t context_length    = 0;  // max_position_embeddings
    double  rms_norm_eps      = 0;
    double  rope_theta        = 0;
    std::optional<bool> tie_word_embeddings;  // absent: decided by the presence of lm_head.weight

    bool        has_quantization_config = false;
    LinearClass linear_class            = LinearClass::bitlinear;
    bool        linear_class_explicit   = false;  // false: absent, the transformers default applies
    std::string quantization_mode;                 // "offline", "online" or "" (absent)

    std::optional<int64_t> bos_token_id, eos_token_id, pad_token_id;  // eos: first entry of a list

    int64_t q_dim() const { return n_heads * head_dim; }      // rows of q_proj, columns of o_proj
    int64_t kv_dim() const { return n_kv_heads * head_dim; }  // rows of k_proj and v_proj
};

// Parses config.json text; source names the file in errors. Throws Error(invalid_model) for a
// missing or bad value and Error(unsupported) for a different architecture or a feature tern does
// not convert (rope_scaling, an activation other than relu2).
HfBitnetConfig parse_hf_config(std::string_view json_text, const std::string & source);
HfBitnetConfig read_hf_config(const std::string & path);

}  // namespace tern
