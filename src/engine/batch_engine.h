// BatchEngine: many sequences advanced together, the engine API under the server's continuous
// batching. Each step() feeds every listed sequence some tokens at its own position (one token
// while it generates, a chunk of its prompt while it prefills) and returns the logits of each
// one's last token. The KV cache is one KvPagePool; a sequence holds a page table from open() to
// close().
//
//   BatchEngine eng(model, {.n_pages = 64});
//   SequenceId a = *eng.open(prompt_a.size() + 32), b = *eng.open(prompt_b.size() + 32);
//   eng.step({{a, prompt_a, logits_a}, {b, prompt_b, logits_b}});   // both prefill
//   eng.step({{a, {&next_a, 1}, logits_a}, {b, {&next_b, 1}, logits_b}});  // both decode one token
//
// Results per sequence are those of decoding it alone (Session): step() is the contract a batched
// forward pass (one ternary GEMM over the B activations, attention per sequence over its own pages)
// must keep bit for bit. This version runs the items one after another, each on its own pages,
// which gives that by construction.
#pragma once

#include "model/bitnet_model.h"
#include "model/kv_cache.h"

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>

namespace tern {

struct BatchEngineOptions {
    int64_t n_pages   = 64;           // KV pool size in pages
    int64_t page_size = 256;          // positions per page (KvPagePool)
    int64_t n_chunk   = 256;          // most tokens of one sequence per forward pass (prompt chunks)
    DType   type_k    = DType::f16;
    DType   type_v    = DType::f16;
    // As SessionOptions: round the final hidden state to f16 before an f16 head; default when the
    // K cache is f16.
    std::optional<bool> round_head_input_f16;
};

using SequenceId = int64_t;

struct BatchItem {
    SequenceId               seq = -1;
    std::span<const int32_t> tokens;  // fed at positions n_past(seq).. ; at least one
    std::span<float>         logits;  // [n_vocab]: the logits after the last token; empty: not wanted
};

class BatchEngine {
public:
    // Throws Error(invalid_argument) for options out of range (see KvPagePool).
    BatchEngine(const BitnetModel & model, const BatchEngineOptions & options);

    const BitnetModel & model() const { return model_; }
    const KvPagePool &  pool() const { return pool_; }
    int64_t             n_chunk() const { return buf_.n_batch; }
    int64_t             n_open() const { return static_cast<int64_t>(seqs_.size()); }

    // A new sequence with room for n_positions positions (>= 1), or nullopt when the pool cannot
    // hold it now (another sequence must close first). Throws Error(invalid_argument) when it could
    // never fit (more positions than the pool has).
    std::optional<SequenceId> open(int64_t n_positions);
    // Ends a sequence; its pages go back to the pool. Unknown ids are a bug (asserted).
    void close(SequenceId seq);
    int64_t n_past(SequenceId seq) const;    // positions filled so far
    int64_t capacity(SequenceId seq) const;  // positions it may fill (>= what open() asked for)

    // Feeds every item's tokens to its sequence at n_past(seq) and advances it; a sequence appears
    // at most once per step. Throws Error(invalid_argument) for a token outside the vocabulary or
    // tokens past the sequence's capacity (nothing is fed then).
    void step(std::span<const BatchItem> items);

private:
    struct Sequence {
        KvPageTable table;
        KvCache     kv;      // pool_.view(table)
        int64_t     n_past = 0;
    };
    Sequence &       get(SequenceId seq);
    const Sequence & get(SequenceId seq) const;

    const BitnetModel &                      model_;
    KvPagePool                               pool_;
    ForwardBuffers                           buf_;
    bool                                     round_head_ = false;
    SequenceId                               next_id_    = 1;
    std::unordered_map<SequenceId, Sequence> seqs_;
};

}  // namespace tern
