// KV cache allocation: a block per session, or pages from a shared pool.
#include "model/kv_cache.h"

#include "core/error.h"

namespace tern {
namespace {

void check_cache_types(DType type_k, DType type_v) {
    for (DType t : {type_k, type_v}) {
        if (t != DType::f16 && t != DType::f32) {
            fail(ErrorKind::invalid_argument, format("KV cache type %s is not supported", std::string(dtype_name(t)).c_str()),
                 "use f16 (default) or f32");
        }
    }
}

}  // namespace

size_t KvCache::n_bytes() const {
    size_t n = 0;
    for (const auto & l : layers) n += l.k.n_bytes() + l.v.n_bytes();
    return n;
}

KvCache make_kv_cache(Backend & backend, const ModelConfig & config, int64_t n_ctx, DType type_k, DType type_v) {
    check_cache_types(type_k, type_v);
    KvCache c;
    c.n_ctx  = n_ctx;
    c.type_k = type_k;
    c.type_v = type_v;
    for (int64_t il = 0; il < config.n_layer; ++il) {
        c.storage.push_back(alloc_tensor(backend, type_k, {config.n_embd_kv(), n_ctx, 1, 1}, "kv.k"));
        c.storage.push_back(alloc_tensor(backend, type_v, {config.n_embd_kv(), n_ctx, 1, 1}, "kv.v"));
        c.layers.push_back({c.storage[c.storage.size() - 2].tensor, c.storage.back().tensor});
    }
    return c;
}

KvPagePool::KvPagePool(Backend & backend, const ModelConfig & config, int64_t n_pages, int64_t page_size,
                       DType type_k, DType type_v)
    : page_size_(page_size), type_k_(type_k), type_v_(type_v) {
    check_cache_types(type_k, type_v);
    if (n_pages < 1 || n_pages > (int64_t{1} << 24)) {
        fail(ErrorKind::invalid_argument,
             format("KV cache pages: %lld is out of range (expected 1..16777216)", static_cast<long long>(n_pages)));
    }
    if (page_size < 16 || page_size % 16 != 0 || page_size > 65536) {
        fail(ErrorKind::invalid_argument, format("KV cache page size %lld must be a multiple of 16 in 16..65536",
                                                 static_cast<long long>(page_size)));
    }
    const int64_t n_pos = n_pages * page_size;
    for (int64_t il = 0; il < config.n_layer; ++il) {
        k_.push_back(alloc_tensor(backend, type_k, {config.n_embd_kv(), n_pos, 1, 1}, "kv_pool.k"));
        v_.push_back(alloc_tensor(backend, type_v, {config.n_embd_kv(), n_pos, 1, 1}, "kv_pool.v"));
    }
    used_.assign(static_cast<size_t>(n_pages), false);
    n_free_ = n_pages;
}

size_t KvPagePool::n_bytes() const {
    size_t n = 0;
    for (size_t i = 0; i < k_.size(); ++i) n += k_[i].tensor.n_bytes() + v_[i].tensor.n_bytes();
    return n;
}

std::optional<KvPageTable> KvPagePool::allocate(int64_t n_positions) {
    TERN_ASSERT(n_positions >= 1, "allocate: %lld positions", static_cast<long long>(n_positions));
    const int64_t want = pages_for(n_positions);
    if (want > n_free_) return std::nullopt;
    // First fit over runs of free pages (see the class comment for why runs).
    int64_t run_start = 0, run_len = 0;
    for (int64_t p = 0; p < n_pages(); ++p) {
        if (used_[static_cast<size_t>(p)]) {
            run_len = 0;
            continue;
        }
        if (run_len == 0) run_start = p;
        if (++run_len == want) {
            KvPageTable t;
            for (int64_t q = run_start; q < run_start + want; ++q) {
                used_[static_cast<size_t>(q)] = true;
                t.pages.push_back(static_cast<int32_t>(q));
            }
            n_free_ -= want;
            return t;
        }
    }
    return std::nullopt;
}

void KvPagePool::release(KvPageTable & table) {
    for (int32_t p : table.pages) {
        TERN_ASSERT(p >= 0 && p < n_pages() && used_[static_cast<size_t>(p)], "release: page %d is not in use", p);
        used_[static_cast<size_t>(p)] = false;
        ++n_free_;
    }
    table.pages.clear();
}

KvCache KvPagePool::view(const KvPageTable & table) const {
    TERN_ASSERT(!table.pages.empty(), "view of an empty page table");
    for (size_t i = 1; i < table.pages.size(); ++i) {
        TERN_ASSERT(table.pages[i] == table.pages[0] + static_cast<int32_t>(i), "page table is not one run");
    }
    const int64_t first = static_cast<int64_t>(table.pages[0]) * page_size_;
    const int64_t n_pos = table.n_positions(page_size_);
    KvCache c;
    c.n_ctx  = n_pos;
    c.type_k = type_k_;
    c.type_v = type_v_;
    for (size_t il = 0; il < k_.size(); ++il) {
        c.layers.push_back({k_[il].tensor.columns(first, n_pos), v_[il].tensor.columns(first, n_pos)});
    }
    return c;
}

}  // namespace tern
