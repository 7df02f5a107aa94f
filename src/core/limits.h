// Bounds shared by the modules that read a value and the ones that write it, so that tern never
// writes a file it would refuse (convert vs the model loader).
#pragma once

#include <cstdint>

namespace tern {

// Largest context_length (GGUF) / max_position_embeddings (config.json) tern accepts: 2^24 tokens.
// A session's KV cache is allocated for -c, or min(context_length, 4096) without it.
constexpr int64_t k_max_context_length = int64_t{1} << 24;

}  // namespace tern
