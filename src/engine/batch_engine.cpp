// BatchEngine: sequences on a shared KV page pool, stepped together.
#include "engine/batch_engine.h"

#include "core/error.h"

#include <algorithm>
#include <unordered_set>

namespace tern {

BatchEngine::BatchEngine(const BitnetModel & model, const BatchEngineOptions & options)
    : model_(model),
      pool_(model.backend(), model.config(), options.n_pages, options.page_size, options.type_k, options.type_v) {
    if (options.n_chunk < 1 || options.n_chunk > 65536) {
        fail(ErrorKind::invalid_argument,
             format("batch chunk %lld is out of range (expected 1..65536)", static_cast<long long>(options.n_chunk)));
    }
    buf_        = model.make_buffers(options.n_chunk, 1);
    round_head_ = options.round_head_input_f16.value_or(options.type_k == DType::f16);
}

std::optional<SequenceId> BatchEngine::open(int64_t n_positions) {
    const int64_t total = pool_.n_pages() * pool_.page_size();
    if (n_positions < 1 || n_positions > total) {
        fail(ErrorKind::invalid_argument, format("a sequence of %lld positions does not fit a KV pool of %lld",
                                                 static_cast<long long>(n_positions), static_cast<long long>(total)));
    }
    std::optional<KvPageTable> table = pool_.allocate(n_positions);
    if (!table) return std::nullopt;
    const SequenceId id = next_id_++;
    Sequence &       s  = seqs_[id];
    s.table             = std::move(*table);
    s.kv                = pool_.view(s.table);
    return id;
}

void BatchEngine::close(SequenceId seq) {
    auto it = seqs_.find(seq);
    TERN_ASSERT(it != seqs_.end(), "close: unknown sequence %lld", static_cast<long long>(seq));
    pool_.release(it->second.table);
    seqs_.erase(it);
}

BatchEngine::Sequence & BatchEngine::get(SequenceId seq) {
    auto it = seqs_.find(seq);
    TERN_ASSERT(it != seqs_.end(), "unknown sequence %lld", static_cast<long long>(seq));
    return it->second;
}

const BatchEngine::Sequence & BatchEngine::get(SequenceId seq) const {
    auto it = seqs_.find(seq);
    TERN_ASSERT(it != seqs_.end(), "unknown sequence %lld", static_cast<long long>(seq));
    return it->second;
}

int64_t BatchEngine::n_past(SequenceId seq) const { return get(seq).n_past; }
int64_t BatchEngine::capacity(SequenceId seq) const { return get(seq).kv.n_ctx; }

void BatchEngine::step(std::span<const BatchItem> items) {
    const int64_t n_vocab = model_.config().n_vocab;
    // Check everything first, so that a bad item feeds nothing.
    std::unordered_set<SequenceId> seen;
    for (const BatchItem & it : items) {
        TERN_ASSERT(seen.insert(it.seq).second, "step: sequence %lld listed twice", static_cast<long long>(it.seq));
        TERN_ASSERT(!it.tokens.empty(), "step: an item without tokens");
        TERN_ASSERT(it.logits.empty() || static_cast<int64_t>(it.logits.size()) == n_vocab, "step: logits size");
        const Sequence & s = get(it.seq);
        if (s.n_past + static_cast<int64_t>(it.tokens.size()) > s.kv.n_ctx) {
            fail(ErrorKind::invalid_argument,
                 format("%zu token(s) at position %lld do not fit the sequence's %lld positions", it.tokens.size(),
                        static_cast<long long>(s.n_past), static_cast<long long>(s.kv.n_ctx)));
        }
        for (int32_t id : it.tokens) {
            if (id < 0 || id >= n_vocab) {
                fail(ErrorKind::invalid_argument, format("token id %d is outside the vocabulary (0..%lld)", id,
                                                         static_cast<long long>(n_vocab - 1)));
            }
        }
    }
    // One sequence at a time, in chunks of n_chunk tokens: what a Session does for it alone.
    Backend & be = model_.backend();
    for (const BatchItem & it : items) {
        Sequence &    s = get(it.seq);
        const int64_t n = static_cast<int64_t>(it.tokens.size());
        for (int64_t start = 0; start < n; start += buf_.n_batch) {
            const int64_t chunk    = std::min(buf_.n_batch, n - start);
            const bool    last     = start + chunk == n;
            const int64_t n_logits = last && !it.logits.empty() ? 1 : 0;
            be.write(buf_.tokens.tensor, it.tokens.data() + start, static_cast<size_t>(chunk) * sizeof(int32_t));
            model_.forward(buf_, s.kv, s.n_past, chunk, n_logits, round_head_);
            s.n_past += chunk;
            if (n_logits > 0) {
                be.read(buf_.logits.tensor.columns(0, 1), it.logits.data(), it.logits.size() * sizeof(float));
            }
        }
    }
}

}  // namespace tern
