// `tern synth`: writes a random-weight BitNet b1.58 GGUF of a named shape, deterministic from a
// seed, in the official 2B4T file's layout (I2_S projections, F16 tied embedding, F32 norms). Speed
// does not depend on weight values, so bitnet-2b4t gives real benchmark figures; tiny and small
// are for tests. The file carries `tern.synthetic = true` and says "random weights" in its name.
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tern {

struct SynthShape {
    std::string name;
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    bool    llama3_vocab;  // the Llama-3 vocabulary (128256 tokens) instead of tern's byte vocabulary
    std::string description;
};

const std::vector<SynthShape> & synth_shapes();

struct SynthOptions {
    std::string shape       = "tiny";
    std::string output_path;
    uint64_t    seed        = 1;
    DType       linear_type = DType::i2_s;  // i2_s, tq2_0, tq1_0
    DType       embd_type   = DType::f16;
    std::string vocab_json;                 // tokenizer.json for llama3_vocab shapes ("" = the npm copy)
    bool        progress    = true;
};

// Throws Error(invalid_argument) for an unknown shape or type, Error(io) if the vocabulary file is
// missing (with a hint to run scripts/setup.sh).
void write_synthetic_model(const SynthOptions & options);

// Default location of the Llama-3 tokenizer.json installed by scripts/setup.sh.
std::string default_llama3_tokenizer_json();

}  // namespace tern
