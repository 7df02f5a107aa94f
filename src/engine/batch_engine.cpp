// BatchEngine: sequences on a shared KV page pool, stepped together.
#include "engine/batch_engine.h"

#include "core/error.h"

#include <algorithm>
#include <unordered_set>

namespace tern {

namespace {

int64_t checked_chunk(const BatchEngineOptions & o) {
    if (o.n_chunk < 1 || o.n_chunk > 65536) {
        fail(ErrorKind::invalid_argument,
             format("batch chunk %lld is out of range (expected 1..65536)", static_cast<long long>(o.n_chunk)));
    }
    if (o.max_seqs < 1 || o.max_seqs > 4096) {
        fail(ErrorKind::invalid_argument,
             format("batch sequences %lld is out of range (expected 1..4096)", static_cast<long long>(o.max_seqs)));
    }
    return o.n_chunk;
}

}  // namespace

BatchEngine::BatchEngine(const BitnetModel & model, const BatchEngineOptions & options)
    : model_(model),
      pool_(model.backend(), model.config(), options.n_pages, options.page_size, options.type_k, options.type_v),
      buf_(model.make_buffers(checked_chunk(options), std::min(options.n_chunk, options.max_seqs))),
      tables_(model.backend(), options.n_chunk, std::min(options.n_chunk, options.max_seqs), options.n_pages),
      max_seqs_(options.max_seqs) {
    const int64_t n_out = std::min(options.n_chunk, options.max_seqs);
    head_cols_  = alloc_tensor(model.backend(), DType::i32, {n_out, 1, 1, 1}, "batch head columns");
    head_ids_   = alloc_tensor(model.backend(), DType::i32, {n_out, 1, 1, 1}, "batch head ids");
    round_head_ = options.round_head_input_f16.value_or(options.type_k == DType::f16);
}

std::optional<SequenceId> BatchEngine::open(int64_t n_positions) {
    const int64_t total = pool_.n_pages() * pool_.page_size();
    if (n_positions < 1 || n_positions > total) {
        fail(ErrorKind::invalid_argument, format("a sequence of %lld positions does not fit a KV pool of %lld",
                                                 static_cast<long long>(n_positions), static_cast<long long>(total)));
    }
    if (n_open() >= max_seqs_) return std::nullopt;
    std::optional<KvPageTable> table = pool_.reserve(n_positions);
    if (!table) return std::nullopt;
    const SequenceId id = next_id_++;
    Sequence &       s  = seqs_[id];
    s.table             = std::move(*table);
    s.capacity          = s.table.reserved * pool_.page_size();
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
int64_t BatchEngine::capacity(SequenceId seq) const { return get(seq).capacity; }

void BatchEngine::step(std::span<const BatchItem> items) {
    const int64_t n_vocab = model_.config().n_vocab;
    // Check everything first, so that a bad item feeds nothing.
    std::unordered_set<SequenceId> seen;
    for (const BatchItem & it : items) {
        TERN_ASSERT(seen.insert(it.seq).second, "step: sequence %lld listed twice", static_cast<long long>(it.seq));
        TERN_ASSERT(!it.tokens.empty(), "step: an item without tokens");
        TERN_ASSERT(it.logits.empty() || static_cast<int64_t>(it.logits.size()) == n_vocab, "step: logits size");
        const Sequence & s = get(it.seq);
        if (s.n_past + static_cast<int64_t>(it.tokens.size()) > s.capacity) {
            fail(ErrorKind::invalid_argument,
                 format("%zu token(s) at position %lld do not fit the sequence's %lld positions", it.tokens.size(),
                        static_cast<long long>(s.n_past), static_cast<long long>(s.capacity)));
        }
        for (int32_t id : it.tokens) {
            if (id < 0 || id >= n_vocab) {
                fail(ErrorKind::invalid_argument, format("token id %d is outside the vocabulary (0..%lld)", id,
                                                         static_cast<long long>(n_vocab - 1)));
            }
        }
    }
    // Passes of at most n_chunk tokens, the items' tokens in order (an item may continue in the next).
    std::vector<PassPart> parts;
    int64_t               room = buf_.n_batch;
    for (size_t i = 0; i < items.size(); ++i) {
        const int64_t n = static_cast<int64_t>(items[i].tokens.size());
        for (int64_t from = 0; from < n;) {
            if (room == 0) {
                run_pass(items, parts);
                parts.clear();
                room = buf_.n_batch;
            }
            const int64_t take = std::min(room, n - from);
            parts.push_back({i, from, take});
            from += take;
            room -= take;
        }
    }
    if (!parts.empty()) run_pass(items, parts);
}

void BatchEngine::run_pass(std::span<const BatchItem> items, std::span<const PassPart> parts) {
    const int64_t n_vocab = model_.config().n_vocab;
    Backend &     be      = model_.backend();
    tables_.clear();
    tokens_.clear();
    cols_.clear();
    bool    any_logits = false;
    int64_t top_k      = 0;  // the head's (HeadOutput::top_k); -1 once an item needs every logit
    for (const PassPart & pp : parts) {
        const BatchItem & it = items[pp.item];
        Sequence &        s  = get(it.seq);
        pool_.grow(s.table, s.n_past + pp.n);
        const int64_t col = tables_.n_tokens();
        tables_.add(s.table, s.n_past, pp.n);
        tokens_.insert(tokens_.end(), it.tokens.begin() + pp.from, it.tokens.begin() + pp.from + pp.n);
        const bool last = pp.from + pp.n == static_cast<int64_t>(it.tokens.size());
        if (last && (!it.logits.empty() || it.argmax != nullptr)) {
            cols_.push_back(static_cast<int32_t>(col + pp.n - 1));
            any_logits = any_logits || !it.logits.empty();
            if (!it.logits.empty()) top_k = it.top_k > 0 && top_k >= 0 ? std::max(top_k, it.top_k) : -1;
        }
    }
    const KvBatch batch = tables_.upload(be, pool_.page_size());
    be.write(buf_.tokens.tensor, tokens_.data(), tokens_.size() * sizeof(int32_t));
    const int64_t n_out = static_cast<int64_t>(cols_.size());
    HeadOutput    head;
    head.logits = buf_.logits.tensor.columns(0, n_out);
    Tensor cols = head_cols_.tensor;
    cols.ne[0]  = std::max<int64_t>(n_out, 1);
    if (n_out > 0) be.write(cols, cols_.data(), cols_.size() * sizeof(int32_t));
    if (any_logits && top_k > 0) head.top_k = top_k;
    if (n_out > 0 && !any_logits) {  // ids only: the logits are the head's scratch (HeadOutput)
        head.ids       = head_ids_.tensor;
        head.ids.ne[0] = n_out;
    }
    model_.forward_batch(buf_, pool_.cache(), batch, cols, head, round_head_);
    for (const PassPart & pp : parts) get(items[pp.item].seq).n_past += pp.n;
    if (n_out == 0) return;
    ids_.resize(static_cast<size_t>(n_out));
    if (any_logits) {
        logits_.resize(static_cast<size_t>(n_vocab * n_out));
        be.read(head.logits, logits_.data(), logits_.size() * sizeof(float));
    } else {
        be.read(head.ids, ids_.data(), ids_.size() * sizeof(int32_t));
    }
    size_t o = 0;
    for (const PassPart & pp : parts) {
        const BatchItem & it = items[pp.item];
        if (pp.from + pp.n != static_cast<int64_t>(it.tokens.size()) || (it.logits.empty() && it.argmax == nullptr)) {
            continue;
        }
        if (!any_logits) {
            *it.argmax = ids_[o++];
            continue;
        }
        const float * row = logits_.data() + static_cast<std::ptrdiff_t>(o) * n_vocab;
        if (!it.logits.empty()) std::copy_n(row, n_vocab, it.logits.begin());
        if (it.argmax != nullptr) {  // the argmax of this row, lowest index on ties (Backend::argmax)
            *it.argmax = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
        }
        ++o;
    }
}

}  // namespace tern
