// BatchEngine: sequences on a shared KV page pool, stepped together.
#include "engine/batch_engine.h"

#include "core/error.h"
#include "engine/session.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <unordered_set>

namespace tern {

namespace {

// A column's top-k list (HeadOutput::top_rows): [count, 0, (row, value bits) x k_list_rows]. The
// room of the one-sequence top-k head's list (WebGpuBackend::k_top_k_list_rows), 32 KiB per
// column: 64 columns read back 2 MB where their logits are 33 MB, and a column that overflows
// (every column's logits then come back) costs more than the extra room.
constexpr int64_t k_list_rows   = 4096;
constexpr int64_t k_list_stride = 2 + 2 * k_list_rows;

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
    head_rows_  = alloc_tensor(model.backend(), DType::i32, {k_list_stride, n_out, 1, 1}, "batch head top-k rows");
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

std::optional<KvCache> BatchEngine::contiguous_view(SequenceId seq) {
    Sequence & s = get(seq);
    pool_.grow(s.table, s.capacity);
    const std::vector<int32_t> & pages = s.table.pages;
    for (size_t i = 1; i < pages.size(); ++i) {
        if (pages[i] != pages[0] + static_cast<int32_t>(i)) return std::nullopt;
    }
    const KvCache & all = pool_.cache();
    KvCache         v;
    v.n_ctx  = s.capacity;
    v.type_k = all.type_k;
    v.type_v = all.type_v;
    for (const KvLayer & l : all.layers) {
        const int64_t first = static_cast<int64_t>(pages[0]) * pool_.page_size();
        v.layers.push_back({l.k.columns(first, s.capacity), l.v.columns(first, s.capacity)});
    }
    return v;
}

void BatchEngine::warm_up(int64_t n_positions, const Sampler * sampler) {
    TERN_ASSERT(seqs_.empty(), "warm_up with sequences open");
    if (!model_.backend().counts_dispatches()) return;  // (nothing is compiled: Session::warm_up)
    const std::optional<SequenceId> seq =
        open(std::clamp<int64_t>(n_positions, 1, pool_.n_pages() * pool_.page_size()));
    if (!seq) return;
    if (std::optional<KvCache> view = contiguous_view(*seq)) {
        SessionOptions so;
        so.n_batch              = 1;
        so.round_head_input_f16 = round_head_;
        Session s(model_, so, std::move(*view), 0);
        s.warm_up(sampler);
    }
    close(*seq);
}

void BatchEngine::mark_fed(SequenceId seq, int64_t n) {
    Sequence & s = get(seq);
    TERN_ASSERT(n >= 0 && s.n_past + n <= s.capacity, "mark_fed: %lld positions past %lld of %lld",
                static_cast<long long>(n), static_cast<long long>(s.n_past), static_cast<long long>(s.capacity));
    s.n_past += n;
}

int64_t BatchEngine::n_past(SequenceId seq) const { return get(seq).n_past; }
int64_t BatchEngine::capacity(SequenceId seq) const { return get(seq).capacity; }

void BatchEngine::check(std::span<const BatchItem> items, bool tokens_known) const {
    const int64_t n_vocab = model_.config().n_vocab;
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
            if (tokens_known && (id < 0 || id >= n_vocab)) {
                fail(ErrorKind::invalid_argument, format("token id %d is outside the vocabulary (0..%lld)", id,
                                                         static_cast<long long>(n_vocab - 1)));
            }
        }
    }
}

void BatchEngine::step(std::span<const BatchItem> items) {
    check_unpacked();
    TERN_ASSERT(!inflight_.live && !ahead_.live, "step: a step is launched or held");
    // Check everything first, so that a bad item feeds nothing.
    check(items, true);
    for (const BatchItem & it : items) {
        if (it.top_rows != nullptr) it.top_rows->clear();  // (non-empty after the step: rows, not logits)
    }
    // Passes of at most n_chunk tokens, the items' tokens in order (an item may continue in the next).
    std::vector<PassPart> parts;
    int64_t               room = buf_.n_batch;
    auto run = [&] {
        inflight_ = make_pass(items, parts);
        record(inflight_, false);
        collect();
    };
    for (size_t i = 0; i < items.size(); ++i) {
        const int64_t n = static_cast<int64_t>(items[i].tokens.size());
        for (int64_t from = 0; from < n;) {
            if (room == 0) {
                run();
                parts.clear();
                room = buf_.n_batch;
            }
            const int64_t take = std::min(room, n - from);
            parts.push_back({i, from, take});
            from += take;
            room -= take;
        }
    }
    if (!parts.empty()) run();
}

void BatchEngine::launch(std::span<const BatchItem> items) {
    check_unpacked();
    TERN_ASSERT(!inflight_.live && !ahead_.live, "launch: a step is launched or held");
    check(items, true);
    std::vector<PassPart> parts;
    int64_t               n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
        parts.push_back({i, 0, static_cast<int64_t>(items[i].tokens.size())});
        n += parts.back().n;
    }
    TERN_ASSERT(n <= buf_.n_batch, "launch: %lld tokens in a pass of %lld", static_cast<long long>(n),
                static_cast<long long>(buf_.n_batch));
    inflight_ = make_pass(items, parts);
    record(inflight_, false);
}

bool BatchEngine::record_ahead(std::span<const BatchItem> items) {
    check_unpacked();
    TERN_ASSERT(!ahead_.live, "record_ahead: a step is held already");
    if (!model_.backend().can_hold_steps() || items.empty() ||
        static_cast<int64_t>(items.size()) > std::min(buf_.n_batch, max_seqs_)) {
        return false;
    }
    for (const BatchItem & it : items) TERN_ASSERT(it.tokens.size() == 1, "record_ahead: one token per item");
    check(items, false);
    std::vector<PassPart> parts;
    for (size_t i = 0; i < items.size(); ++i) parts.push_back({i, 0, 1});
    ahead_ = make_pass(items, parts);
    const auto t0 = std::chrono::steady_clock::now();
    const bool held = record(ahead_, true);
    timing_.record_ahead_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (held) return true;
    // Part of it went out while it was recorded: it ran with the tokens of the step before, over
    // that step's results. Those are computed again by collect(); this one is recorded afresh later.
    for (const Pass::Feed & f : ahead_.feeds) get(f.seq).n_past = f.pos;
    ahead_.live     = false;
    rerun_inflight_ = inflight_.live;
    return false;
}

void BatchEngine::release_ahead(std::span<const int32_t> tokens) {
    check_unpacked();
    TERN_ASSERT(ahead_.live && !inflight_.live, "release_ahead: nothing held, or the step before not collected");
    TERN_ASSERT(tokens.size() == ahead_.tokens.size(), "release_ahead: %zu tokens for %zu items", tokens.size(),
                ahead_.tokens.size());
    const int64_t n_vocab = model_.config().n_vocab;
    for (int32_t id : tokens) {
        if (id < 0 || id >= n_vocab) {
            drop_ahead();
            fail(ErrorKind::invalid_argument,
                 format("token id %d is outside the vocabulary (0..%lld)", id, static_cast<long long>(n_vocab - 1)));
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::copy(tokens.begin(), tokens.end(), ahead_.tokens.begin());
    Backend & be = model_.backend();
    be.write(buf_.tokens.tensor, ahead_.tokens.data(), ahead_.tokens.size() * sizeof(int32_t));
    be.release_held_step();  // (after that write, in queue order)
    timing_.release_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++timing_.passes_ahead;
    ++timing_.passes;
    inflight_   = std::move(ahead_);
    ahead_      = {};
}

void BatchEngine::drop_ahead() {
    if (!ahead_.live) return;
    model_.backend().drop_held_step();
    for (const Pass::Feed & f : ahead_.feeds) {
        if (seqs_.contains(f.seq)) get(f.seq).n_past = f.pos;
    }
    ahead_ = {};
}

BatchEngine::Pass BatchEngine::make_pass(std::span<const BatchItem> items, std::span<const PassPart> parts) const {
    Pass p;
    for (const PassPart & pp : parts) {
        const BatchItem & it = items[pp.item];
        p.feeds.push_back({it.seq, get(it.seq).n_past, pp.n});
        p.tokens.insert(p.tokens.end(), it.tokens.begin() + pp.from, it.tokens.begin() + pp.from + pp.n);
        const bool last = pp.from + pp.n == static_cast<int64_t>(it.tokens.size());
        if (last && (!it.logits.empty() || it.argmax != nullptr)) {
            p.outs.push_back({it.seq, it.logits, it.argmax, it.top_rows});
            p.any_logits = p.any_logits || !it.logits.empty();
            if (!it.logits.empty()) p.top_k = it.top_k > 0 && p.top_k >= 0 ? std::max(p.top_k, it.top_k) : -1;
            if (it.top_rows != nullptr) it.top_rows->clear();  // (non-empty after the step: rows, not logits)
        }
    }
    return p;
}

bool BatchEngine::record(Pass & p, bool hold) {
    Backend &  be = model_.backend();
    const auto t0 = std::chrono::steady_clock::now();
    tables_.clear();
    cols_.clear();
    size_t o = 0;
    for (const Pass::Feed & f : p.feeds) {
        Sequence & s = get(f.seq);
        TERN_ASSERT(s.n_past == f.pos, "record: sequence %lld moved", static_cast<long long>(f.seq));
        pool_.grow(s.table, f.pos + f.n);
        const int64_t col = tables_.n_tokens();
        tables_.add(s.table, f.pos, f.n);
        if (o < p.outs.size() && p.outs[o].seq == f.seq) {
            // (a sequence's output follows its last feed: the pass lists each sequence once)
            cols_.push_back(static_cast<int32_t>(col + f.n - 1));
            ++o;
        }
    }
    const KvBatch batch = tables_.upload(be, pool_.page_size());
    if (!hold) be.write(buf_.tokens.tensor, p.tokens.data(), p.tokens.size() * sizeof(int32_t));
    const int64_t n_out = static_cast<int64_t>(cols_.size());
    TERN_ASSERT(n_out == static_cast<int64_t>(p.outs.size()), "output columns");
    HeadOutput head;
    head.logits = buf_.logits.tensor.columns(0, n_out);
    Tensor cols = head_cols_.tensor;
    cols.ne[0]  = std::max<int64_t>(n_out, 1);
    if (n_out > 0) be.write(cols, cols_.data(), cols_.size() * sizeof(int32_t));
    p.listed = false;
    if (p.any_logits && p.top_k > 0) {
        head.top_k           = p.top_k;
        head.top_rows        = head_rows_.tensor.columns(0, n_out);
        head.top_rows_stride = k_list_stride;
        head.rows_listed     = &p.listed;
    }
    if (n_out > 0 && !p.any_logits) {  // ids only: the logits are the head's scratch (HeadOutput)
        head.ids       = head_ids_.tensor;
        head.ids.ne[0] = n_out;
    }
    const bool held = model_.forward_batch(buf_, pool_.cache(), batch, cols, head, round_head_, hold);
    for (const Pass::Feed & f : p.feeds) get(f.seq).n_past += f.n;
    p.live = true;
    if (!hold) {
        timing_.record_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++timing_.passes;
    }
    return held;
}

void BatchEngine::collect(Unpack unpack) {
    TERN_ASSERT(!ahead_.live || inflight_.live, "collect: nothing launched");
    check_unpacked();
    pending_.clear();
    if (!inflight_.live) return;
    if (std::exchange(rerun_inflight_, false)) {
        // A hold failed over its results (record_ahead): run it again for its sequences still open
        // (at the same positions, with the same tokens: the same rows, the same results).
        Pass   again;
        size_t t = 0;
        for (const Pass::Feed & f : inflight_.feeds) {
            if (seqs_.contains(f.seq)) {
                again.feeds.push_back(f);
                again.tokens.insert(again.tokens.end(), inflight_.tokens.begin() + static_cast<std::ptrdiff_t>(t),
                                    inflight_.tokens.begin() + static_cast<std::ptrdiff_t>(t + f.n));
                get(f.seq).n_past = f.pos;
            }
            t += static_cast<size_t>(f.n);
        }
        for (const Pass::Out & out : inflight_.outs) {
            if (seqs_.contains(out.seq)) again.outs.push_back(out);
        }
        again.any_logits = inflight_.any_logits;
        again.top_k      = inflight_.top_k;
        inflight_        = std::move(again);
        if (inflight_.feeds.empty()) {
            inflight_ = {};
            return;
        }
        record(inflight_, false);
    }
    read(inflight_, unpack);
    inflight_ = {};
}

void BatchEngine::unpack_column(const Pass::Out & out, int64_t o) const {
    const uint32_t * words = row_words_.data() + o * k_list_stride;
    const int64_t    n     = words[0];  // (read() checked that it fits)
    if (out.top_rows != nullptr) out.top_rows->resize(static_cast<size_t>(n));
    int32_t best   = -1;
    float   best_v = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        const int32_t id = static_cast<int32_t>(words[2 + 2 * i]);
        const float   v  = std::bit_cast<float>(words[3 + 2 * i]);
        if (out.top_rows != nullptr) (*out.top_rows)[static_cast<size_t>(i)] = {id, v};
        if (best < 0 || v > best_v || (v == best_v && id < best)) {
            best   = id;
            best_v = v;
        }
    }
    if (out.argmax != nullptr) *out.argmax = best;
}

void BatchEngine::unpack(SequenceId seq) {
    auto it = std::lower_bound(pending_.begin(), pending_.end(), seq,
                               [](const Pending & a, SequenceId s) { return a.seq < s; });
    if (it == pending_.end() || it->seq != seq) return;  // (nothing left: unpacked, taken otherwise, or not in the step)
    unpack_column(it->out, it->col);
    n_pending_.fetch_sub(1);
}

void BatchEngine::check_unpacked() const {
    TERN_ASSERT(n_pending_.load() == 0, "%lld column(s) of the step before were not unpacked (BatchEngine::unpack)",
                static_cast<long long>(n_pending_.load()));
}

void BatchEngine::read(Pass & p, Unpack unpack) {
    using clock             = std::chrono::steady_clock;
    const int64_t n_vocab   = model_.config().n_vocab;
    Backend &     be        = model_.backend();
    const int64_t n_out     = static_cast<int64_t>(p.outs.size());
    const auto    t0        = clock::now();
    auto          t1        = t0;  // once the results are read (the wait for the device ends)
    struct Account {  // on every way out: the read's times into timing_
        Timing &                  t;
        const clock::time_point & t0;
        clock::time_point &       t1;
        ~Account() {
            const auto now = clock::now();
            t.wait_s += std::chrono::duration<double>(std::max(t1, t0) - t0).count();
            t.unpack_s += std::chrono::duration<double>(now - std::max(t1, t0)).count();
        }
    } account{timing_, t0, t1};
    p.live = false;
    if (n_out == 0) return;
    // Where each output goes: nowhere once its sequence was closed (launch / record_ahead).
    auto open = [&](const Pass::Out & out) { return seqs_.contains(out.seq); };
    ids_.resize(static_cast<size_t>(n_out));
    if (!p.any_logits) {
        Tensor ids = head_ids_.tensor;
        ids.ne[0]  = n_out;
        be.read(ids, ids_.data(), ids_.size() * sizeof(int32_t));
        t1 = clock::now();
        for (int64_t o = 0; o < n_out; ++o) {
            if (p.outs[o].argmax != nullptr && open(p.outs[o])) *p.outs[o].argmax = ids_[static_cast<size_t>(o)];
        }
        return;
    }
    // Top-k lists where the device wrote them: each column that fits takes its rows (a greedy item
    // its argmax among them: the top 1 is in every top k) instead of n_vocab logits.
    bool need_logits = !p.listed;
    if (p.listed) {
        row_words_.resize(static_cast<size_t>(k_list_stride * n_out));
        be.read(head_rows_.tensor.columns(0, n_out), row_words_.data(), row_words_.size() * sizeof(uint32_t));
        t1 = clock::now();
    }
    std::vector<bool> taken(static_cast<size_t>(n_out), false);  // (took its rows or its argmax from them)
    for (int64_t o = 0; p.listed && o < n_out; ++o) {
        const Pass::Out & out = p.outs[static_cast<size_t>(o)];
        const int64_t     n   = row_words_[static_cast<size_t>(o * k_list_stride)];
        if (!open(out)) {
            taken[static_cast<size_t>(o)] = true;
            continue;
        }
        const bool fits = n <= k_list_rows && n >= std::max<int64_t>(p.top_k, 1);
        ++timing_.listed_columns;
        timing_.listed_rows += n;
        if (!fits || (!out.logits.empty() && out.top_rows == nullptr)) {
            need_logits = true;
            continue;
        }
        if (unpack == Unpack::deferred) {
            pending_.push_back({out.seq, o, out});
        } else {
            unpack_column(out, o);
        }
        taken[static_cast<size_t>(o)] = true;
    }
    std::sort(pending_.begin(), pending_.end(), [](const Pending & a, const Pending & b) { return a.seq < b.seq; });
    n_pending_.store(static_cast<int64_t>(pending_.size()));
    if (!need_logits) return;
    logits_.resize(static_cast<size_t>(n_vocab * n_out));
    be.read(buf_.logits.tensor.columns(0, n_out), logits_.data(), logits_.size() * sizeof(float));
    if (!p.listed) t1 = clock::now();  // (after a list, this read counts as unpacking)
    ++timing_.full_logit_reads;
    for (int64_t o = 0; o < n_out; ++o) {
        const Pass::Out & out = p.outs[static_cast<size_t>(o)];
        if (taken[static_cast<size_t>(o)] || !open(out)) continue;
        const float * row = logits_.data() + o * n_vocab;
        if (!out.logits.empty()) std::copy_n(row, n_vocab, out.logits.begin());
        if (out.argmax != nullptr) {  // the argmax of this row, lowest index on ties (Backend::argmax)
            *out.argmax = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
        }
    }
}

}  // namespace tern
