// KV cache allocation: a block per session, or pages from a shared pool.
#include "model/kv_cache.h"

#include "core/error.h"

#include <algorithm>

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
    if (n_pages * page_size > (int64_t{1} << 31) / std::max<int64_t>(1, config.n_embd_kv())) {
        fail(ErrorKind::invalid_argument,
             format("a KV pool of %lld pages of %lld positions is too large (at most 2^31 cache elements per layer)",
                    static_cast<long long>(n_pages), static_cast<long long>(page_size)));
    }
    cache_ = make_kv_cache(backend, config, n_pages * page_size, type_k, type_v);
    used_.assign(static_cast<size_t>(n_pages), false);
    for (int64_t g = n_pages - 1; g >= 0; --g) free_.push_back(static_cast<int32_t>(g));  // page 0 first
    n_free_ = n_pages;
}

size_t KvPagePool::n_bytes() const { return cache_.n_bytes(); }

std::optional<KvPageTable> KvPagePool::reserve(int64_t n_positions) {
    TERN_ASSERT(n_positions >= 1, "reserve: %lld positions", static_cast<long long>(n_positions));
    const int64_t want = pages_for(n_positions);
    if (want > n_unreserved()) return std::nullopt;
    n_reserved_ += want;
    KvPageTable t;
    t.reserved = want;
    return t;
}

void KvPagePool::grow(KvPageTable & table, int64_t n_positions) {
    const int64_t want = pages_for(n_positions);
    TERN_ASSERT(want <= table.reserved, "grow: %lld pages wanted, %lld reserved", static_cast<long long>(want),
                static_cast<long long>(table.reserved));
    while (static_cast<int64_t>(table.pages.size()) < want) {
        TERN_ASSERT(!free_.empty(), "grow: no free page although the table holds a reservation");
        const int32_t g = free_.back();
        free_.pop_back();
        used_[static_cast<size_t>(g)] = true;
        --n_free_;
        table.pages.push_back(g);
    }
}

void KvPagePool::release(KvPageTable & table) {
    for (auto it = table.pages.rbegin(); it != table.pages.rend(); ++it) {  // (its first page taken first again)
        const int32_t g = *it;
        TERN_ASSERT(g >= 0 && g < n_pages() && used_[static_cast<size_t>(g)], "release: page %d is not in use", g);
        used_[static_cast<size_t>(g)] = false;
        free_.push_back(g);
        ++n_free_;
    }
    if (n_free_ == n_pages()) {  // all free: page 0 first again, so that a lone sequence gets a run
        free_.clear();
        for (int64_t g = n_pages() - 1; g >= 0; --g) free_.push_back(static_cast<int32_t>(g));
    }
    TERN_ASSERT(table.reserved <= n_reserved_ && static_cast<int64_t>(table.pages.size()) <= table.reserved,
                "release: reservation");
    n_reserved_ -= table.reserved;
    table.pages.clear();
    table.reserved = 0;
}

KvBatchTables::KvBatchTables(Backend & backend, int64_t max_tokens, int64_t max_seqs, int64_t max_pages)
    : max_tokens_(max_tokens), max_seqs_(max_seqs), max_pages_(max_pages) {
    TERN_ASSERT(max_tokens >= 1 && max_seqs >= 1 && max_pages >= 1, "KvBatchTables sizes");
    page_table_   = alloc_tensor(backend, DType::i32, {max_pages * max_seqs, 1, 1, 1}, "kv page table");
    column_table_ = alloc_tensor(backend, DType::i32, {4 * max_tokens, 1, 1, 1}, "kv column table");
}

void KvBatchTables::clear() {
    seqs_.clear();
    tables_.clear();
    n_tokens_ = 0;
}

void KvBatchTables::add(const KvPageTable & table, int64_t pos0, int64_t n) {
    TERN_ASSERT(n >= 1 && pos0 >= 0 && n_tokens_ + n <= max_tokens_ && n_seqs() < max_seqs_, "KvBatchTables::add");
    TERN_ASSERT(static_cast<int64_t>(table.pages.size()) <= max_pages_, "a page table longer than the batch's tables");
    seqs_.push_back({n_tokens_, n, pos0});
    tables_.push_back(table.pages);
    n_tokens_ += n;
}

KvBatch KvBatchTables::upload(Backend & backend, int64_t page_size) {
    TERN_ASSERT(!seqs_.empty(), "an empty batch");
    int64_t stride = 1;
    for (const auto & t : tables_) stride = std::max<int64_t>(stride, static_cast<int64_t>(t.size()));
    pages_.assign(static_cast<size_t>(stride) * seqs_.size(), -1);
    for (size_t i = 0; i < tables_.size(); ++i) {
        std::copy(tables_[i].begin(), tables_[i].end(), pages_.begin() + static_cast<std::ptrdiff_t>(i) * stride);
    }
    KvBatch b;
    b.page_size = page_size;
    b.max_pages = stride;
    b.seqs      = seqs_;
    b.pages     = pages_;
    columns_.assign(static_cast<size_t>(4 * n_tokens_), 0);
    for (size_t i = 0; i < seqs_.size(); ++i) {
        const KvSeq & s = seqs_[i];
        TERN_ASSERT((s.pos0 + s.n - 1) / page_size < static_cast<int64_t>(tables_[i].size()),
                    "sequence %zu's positions past its pages", i);
        for (int64_t t = 0; t < s.n; ++t) {
            int32_t * c = columns_.data() + 4 * (s.first + t);
            c[0]        = static_cast<int32_t>(s.pos0 + t);
            c[1]        = static_cast<int32_t>(i);
            c[2]        = static_cast<int32_t>(b.cache_row(i, s.pos0 + t));
        }
    }
    b.page_table = page_table_.tensor;
    b.page_table.ne = {stride, static_cast<int64_t>(seqs_.size()), 1, 1};
    b.columns = column_table_.tensor;
    b.columns.ne = {4, n_tokens_, 1, 1};
    backend.write(b.page_table, pages_.data(), pages_.size() * sizeof(int32_t));
    backend.write(b.columns, columns_.data(), columns_.size() * sizeof(int32_t));
    return b;
}

}  // namespace tern
