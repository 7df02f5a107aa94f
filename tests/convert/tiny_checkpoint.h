// A tiny synthetic Hugging Face BitNet checkpoint folder for converter tests: config.json,
// tokenizer.json (256 GPT-2 byte tokens + 8 merges + 3 Llama-3-style added tokens),
// tokenizer_config.json and model.safetensors (or two shards + index), with projections either
// packed U8 + weight_scale (FORMATS.md §4.14) or bf16 masters (§4.15). It records what the GGUF
// must contain: every projection's ternary matrix and scale, and the float tensors' values.
#pragma once

#include "st_builder.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tern::test {

struct TinySpec {
    int64_t hidden = 128, n_layers = 2, n_heads = 4, n_kv_heads = 2, intermediate = 256, vocab = 300, context = 256;
    std::optional<int64_t> head_dim;                 // written to config.json when set
    bool                   packed       = true;      // U8 + weight_scale, else bf16 masters
    std::string            linear_class = "autobitlinear";  // "" = key absent
    std::string            quant_mode;               // "" = as the official configs: offline (packed) / online (masters)
    std::optional<bool>    tie          = true;      // nullopt = key absent
    bool                   lm_head      = false;     // write an lm_head.weight
    bool                   sharded      = false;     // two shards + model.safetensors.index.json
    uint64_t               seed         = 1;
};

struct ExpectedTernary {
    std::string         hf_name;    // e.g. model.layers.0.self_attn.q_proj.weight
    std::string         gguf_name;  // e.g. blk.0.attn_q.weight
    int64_t             out = 0, in = 0;
    std::vector<int8_t> values;     // [out, in] row-major
    float               scale = 0;  // the multiplier the GGUF must carry
};

struct TinyCheckpoint {
    std::filesystem::path                     dir;
    TinySpec                                  spec;
    nlohmann::json                            config;
    std::vector<StEntry>                      tensors;  // as written (mutate before write to corrupt)
    std::vector<ExpectedTernary>              ternary;
    std::map<std::string, std::vector<float>> floats;  // GGUF name -> values (after bf16 rounding)

    int64_t head_dim() const { return spec.head_dim.value_or(spec.hidden / spec.n_heads); }
    StEntry * find(const std::string & hf_name);
    // (Re)writes config.json, tokenizer files and the safetensors file(s) into dir.
    void write() const;
};

// Builds the tensors and expectations for spec in a fresh temp folder named after tag, and writes it.
TinyCheckpoint make_tiny_checkpoint(const std::string & tag, const TinySpec & spec = {});

// Packs a ternary [out, in] matrix as HF does: U8 [out/4, in], row quarter k in bits 2k..2k+1, value + 1.
std::vector<uint8_t> hf_pack(const std::vector<int8_t> & values, int64_t out, int64_t in);

// The absmean reference written from FORMATS.md §4.15 independently of the converter: mean in
// double -> f32, s_w = 1 / max(mean, 1e-5), t = clamp(nearbyint(w * s_w), -1, 1).
std::vector<int8_t> reference_absmean(const std::vector<float> & w, float & scale);

// GPT-2 bytes_to_unicode of one byte, as UTF-8.
std::string byte_token(uint8_t b);

// The byte-level BPE tokenizer.json of the tiny checkpoints: 256 GPT-2 byte tokens, 8 merges and
// <|begin_of_text|> / <|end_of_text|> / <|eot_id|> at ids 264-266 (Llama-3 regex, ignore_merges).
nlohmann::json tokenizer_json();

}  // namespace tern::test
