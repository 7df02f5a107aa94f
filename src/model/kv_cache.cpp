// KV cache allocation.
#include "model/kv_cache.h"

#include "core/error.h"

namespace tern {

size_t KvCache::n_bytes() const {
    size_t n = 0;
    for (const auto & t : k) n += t.tensor.n_bytes();
    for (const auto & t : v) n += t.tensor.n_bytes();
    return n;
}

KvCache make_kv_cache(Backend & backend, const ModelConfig & config, int64_t n_ctx, DType type_k, DType type_v) {
    for (DType t : {type_k, type_v}) {
        if (t != DType::f16 && t != DType::f32) {
            fail(ErrorKind::invalid_argument, format("KV cache type %s is not supported", std::string(dtype_name(t)).c_str()),
                 "use f16 (default) or f32");
        }
    }
    KvCache c;
    c.n_ctx  = n_ctx;
    c.type_k = type_k;
    c.type_v = type_v;
    for (int64_t il = 0; il < config.n_layer; ++il) {
        c.k.push_back(alloc_tensor(backend, type_k, {config.n_embd_kv(), n_ctx, 1, 1}, "kv.k"));
        c.v.push_back(alloc_tensor(backend, type_v, {config.n_embd_kv(), n_ctx, 1, 1}, "kv.v"));
    }
    return c;
}

}  // namespace tern
