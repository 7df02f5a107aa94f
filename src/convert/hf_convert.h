// `tern convert`: a Hugging Face checkpoint folder -> GGUF. LlamaForCausalLM, Qwen3ForCausalLM and
// Phi3ForCausalLM go to family_convert.h; the rest of this header is the BitNet path:
// a Hugging Face BitNet b1.58 checkpoint folder (config.json, tokenizer.json,
// model.safetensors or shards; packed U8 or bf16 master weights) -> a GGUF with the layout of the
// official 2B4T file: the metadata keys of FORMATS.md §4.3 in that order (without the bogus chat
// template), the tensors of §4.4 (F16 token_embd, F32 norms, I2_S projections). Everything is
// validated before the first byte is written; tensors are converted lazily while writing.
#pragma once

#include "core/dtype.h"

#include <optional>
#include <string>

namespace tern {

struct ConvertOptions {
    std::string input_dir;                 // HF checkpoint folder
    std::string output_path;               // .gguf to write (via a temp file + rename)
    DType       ternary_type = DType::i2_s;  // the 7 projections: i2_s, tq2_0 or tq1_0
    DType       embd_type    = DType::f16;   // token_embd (and output): f32, f16, bf16, q8_0, q6_k, q4_k, q4_0
    bool        progress     = true;         // progress bars on stderr (only when it is a terminal)
    std::string arch         = "bitnet-b1.58";  // general.architecture: bitnet-b1.58 or bitnet-25
    // Llama / Qwen3 / Phi-3 checkpoints (family_convert.h): the type of the weight matrices (default
    // f16; i2_s for BitNet-quantized llama checkpoints) and of token_embd / output (default: the
    // matrices' type when it is a float type, else f16).
    std::optional<DType> weight_type;
    std::optional<DType> head_type;
};

// Throws Error: invalid_argument for bad options, invalid_model / unsupported for a checkpoint
// that cannot be converted (naming the file, key or tensor), io for file system failures.
void convert_hf_checkpoint(const ConvertOptions & options);

}  // namespace tern
