// The KV cache: per layer, K and V for every position of the context, in f16 (bitnet.cpp's
// default, FORMATS.md §4.10) or f32 (exact; used for parity with HF transformers).
#pragma once

#include "backend/backend.h"
#include "model/model_config.h"

#include <vector>

namespace tern {

struct KvCache {
    int64_t                  n_ctx = 0;
    DType                    type_k = DType::f16;
    DType                    type_v = DType::f16;
    std::vector<OwnedTensor> k, v;  // per layer: [n_embd_kv, n_ctx]

    KvLayer layer(int64_t il) const { return {k[static_cast<size_t>(il)].tensor, v[static_cast<size_t>(il)].tensor}; }
    size_t  n_bytes() const;
};

// Throws Error(invalid_argument) for a cache type other than f16/f32.
KvCache make_kv_cache(Backend & backend, const ModelConfig & config, int64_t n_ctx, DType type_k, DType type_v);

}  // namespace tern
