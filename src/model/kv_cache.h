// The KV cache: per layer, K and V for the positions of a context, in f16 (bitnet.cpp's default,
// FORMATS.md §4.10) or f32 (exact; used for parity with HF transformers).
//
// Two ways to own that memory:
//   - KvCache over its own buffers (make_kv_cache): one contiguous block per session (`tern run`);
//   - KvPagePool (the server): one pool of fixed-size pages per layer shared by many sequences;
//     a sequence holds a KvPageTable (its pages, in position order) and gives them back at its end.
// Either way the forward pass reads a KvCache: per layer a KvLayer view, column p = position p.
#pragma once

#include "backend/backend.h"
#include "model/model_config.h"

#include <optional>
#include <vector>

namespace tern {

struct KvCache {
    int64_t                  n_ctx  = 0;  // positions addressable through `layers`
    DType                    type_k = DType::f16;
    DType                    type_v = DType::f16;
    std::vector<KvLayer>     layers;      // per layer: K, V views [n_embd_kv, n_ctx]
    std::vector<OwnedTensor> storage;     // the buffers behind `layers` (empty for a view into a pool)

    KvLayer layer(int64_t il) const { return layers[static_cast<size_t>(il)]; }
    size_t  n_bytes() const;
};

// Throws Error(invalid_argument) for a cache type other than f16/f32.
KvCache make_kv_cache(Backend & backend, const ModelConfig & config, int64_t n_ctx, DType type_k, DType type_v);

// The pages one sequence holds, in position order: positions [i * page_size, (i + 1) * page_size)
// live in physical page pages[i].
struct KvPageTable {
    std::vector<int32_t> pages;
    int64_t n_positions(int64_t page_size) const { return static_cast<int64_t>(pages.size()) * page_size; }
};

// A pool of n_pages pages of page_size positions. Per layer one K and one V buffer
// [n_embd_kv, n_pages * page_size]: physical page p holds columns [p * page_size, (p + 1) * page_size).
//
// The backends' attention and cache-append ops read one contiguous KvLayer per sequence today, so a
// table this pool hands out is a run of consecutive pages (first fit), and a sequence reserves at its
// start every position it may use. Once attention reads through a page table (batched decoding,
// issue 53 phase 2) allocate() may hand out any free pages and tables may grow page by page; callers
// already treat the table as opaque and ask view() for what the forward pass reads.
class KvPagePool {
public:
    // Throws Error(invalid_argument) for a cache type other than f16/f32, n_pages < 1, or a
    // page_size that is not a positive multiple of 16 (so that every page starts 256-byte aligned
    // for f16 rows of an even width, which a GPU's storage-buffer bindings need).
    KvPagePool(Backend & backend, const ModelConfig & config, int64_t n_pages, int64_t page_size, DType type_k,
               DType type_v);

    int64_t page_size() const { return page_size_; }
    int64_t n_pages() const { return static_cast<int64_t>(used_.size()); }
    int64_t n_free() const { return n_free_; }
    int64_t n_used() const { return n_pages() - n_free_; }
    DType   type_k() const { return type_k_; }
    DType   type_v() const { return type_v_; }
    size_t  n_bytes() const;  // every layer's K and V buffers
    // Pages needed for n_positions positions.
    int64_t pages_for(int64_t n_positions) const { return (n_positions + page_size_ - 1) / page_size_; }

    // Pages for n_positions positions, or nullopt when no run of that many consecutive pages is free
    // now (the caller waits for a sequence to end). n_positions must be >= 1.
    std::optional<KvPageTable> allocate(int64_t n_positions);
    // Gives the table's pages back (each exactly once: releasing a page that is free is a bug).
    void release(KvPageTable & table);

    // What the forward pass reads for this table: n_ctx = its positions.
    KvCache view(const KvPageTable & table) const;

private:
    int64_t                  page_size_;
    DType                    type_k_, type_v_;
    std::vector<OwnedTensor> k_, v_;  // per layer: [n_embd_kv, n_pages * page_size]
    std::vector<bool>        used_;   // per physical page
    int64_t                  n_free_ = 0;
};

}  // namespace tern
