// The KV cache: per layer, K and V for the positions of a context, in f16 (bitnet.cpp's default,
// FORMATS.md §4.10) or f32 (exact; used for parity with HF transformers).
//
// Two ways to own that memory:
//   - KvCache over its own buffers (make_kv_cache): one contiguous block per session (`tern run`);
//   - KvPagePool (the server): one pool of fixed-size pages per layer shared by many sequences;
//     a sequence holds a KvPageTable (its pages, in position order) and gives them back at its end.
// A session's forward pass reads its KvCache (per layer a KvLayer view, column p = position p); a
// batch of sequences reads the pool's whole cache through page tables (backend.h: KvBatch).
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
// live in physical page pages[i]. `reserved` pages of the pool are set aside for it (the most it
// may hold); pages are taken as it grows.
struct KvPageTable {
    std::vector<int32_t> pages;
    int64_t              reserved = 0;
    int64_t n_positions(int64_t page_size) const { return static_cast<int64_t>(pages.size()) * page_size; }
};

// A pool of n_pages pages of page_size positions. Per layer one K and one V buffer
// [n_embd_kv, n_pages * page_size]: physical page g holds columns [g * page_size, (g + 1) * page_size),
// and the paged ops read a sequence's positions through its table (backend.h: KvBatch).
//
// A sequence reserves at its start the pages it may need (reserve: a count, no pages yet), so that
// once admitted it never runs out; grow() then hands it any free pages as its positions fill, one
// page at a time, and release() gives back both. Pages never need to be consecutive, so the pool
// does not fragment: any reservation that fits the count of unreserved pages succeeds.
class KvPagePool {
public:
    // Throws Error(invalid_argument) for a cache type other than f16/f32, n_pages < 1, or a
    // page_size that is not a positive multiple of 16 (so that every page starts 256-byte aligned
    // for f16 rows of an even width, which a GPU's storage-buffer bindings need).
    KvPagePool(Backend & backend, const ModelConfig & config, int64_t n_pages, int64_t page_size, DType type_k,
               DType type_v);

    int64_t page_size() const { return page_size_; }
    int64_t n_pages() const { return static_cast<int64_t>(used_.size()); }
    int64_t n_free() const { return n_free_; }                 // pages in no table
    int64_t n_used() const { return n_pages() - n_free_; }     // pages in tables
    int64_t n_unreserved() const { return n_pages() - n_reserved_; }
    DType   type_k() const { return type_k_; }
    DType   type_v() const { return type_v_; }
    size_t  n_bytes() const;  // every layer's K and V buffers
    // Pages needed for n_positions positions.
    int64_t pages_for(int64_t n_positions) const { return (n_positions + page_size_ - 1) / page_size_; }

    // An empty table with room reserved for n_positions positions (>= 1), or nullopt when fewer
    // pages than that are unreserved now (the caller waits for a sequence to end).
    std::optional<KvPageTable> reserve(int64_t n_positions);
    // Takes free pages into the table until it covers n_positions (at most its reservation: asserted).
    void grow(KvPageTable & table, int64_t n_positions);
    // Gives the table's pages and its reservation back (each page exactly once: a bug otherwise).
    // Once every page is free, they are taken in order 0, 1, 2, ... again (a lone sequence's
    // pages are then one run: BatchEngine::contiguous_view).
    void release(KvPageTable & table);

    // The whole pool as the paged ops read it: per layer K, V [n_embd_kv, n_pages * page_size].
    const KvCache & cache() const { return cache_; }

private:
    int64_t              page_size_;
    DType                type_k_, type_v_;
    KvCache              cache_;  // owns the buffers
    std::vector<bool>    used_;   // per physical page
    std::vector<int32_t> free_;   // the free pages, taken from the back
    int64_t              n_free_     = 0;
    int64_t              n_reserved_ = 0;
};

// The tables of one batched forward pass (backend.h: KvBatch), on the host and on the device: add
// each sequence in column order, then upload() writes the device copies and returns the KvBatch.
// Device tensors are allocated once, for at most max_tokens columns, max_seqs sequences and
// max_pages pages per sequence.
class KvBatchTables {
public:
    KvBatchTables(Backend & backend, int64_t max_tokens, int64_t max_seqs, int64_t max_pages);

    void clear();
    // The next sequence: n columns at positions pos0 .. pos0 + n - 1, in the pages of `table`.
    void add(const KvPageTable & table, int64_t pos0, int64_t n);
    int64_t n_tokens() const { return n_tokens_; }
    int64_t n_seqs() const { return static_cast<int64_t>(seqs_.size()); }
    // Writes the page table and the column table to the device; the KvBatch points into this object.
    KvBatch upload(Backend & backend, int64_t page_size);

private:
    int64_t                            max_tokens_, max_seqs_, max_pages_;
    std::vector<KvSeq>                 seqs_;
    std::vector<std::vector<int32_t>>  tables_;  // per sequence, its pages
    std::vector<int32_t>               pages_;   // [n_seq][stride]
    std::vector<int32_t>               columns_; // [T][4]
    int64_t                            n_tokens_ = 0;
    OwnedTensor                        page_table_, column_table_;
};

}  // namespace tern
