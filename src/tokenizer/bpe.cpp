// Byte-level BPE merge table and word encoder (FORMATS.md §5.4 steps 3-6).
#include "tokenizer/bpe.h"

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/byte_unicode.h"

#include <algorithm>

namespace tern::tok {

BpeModel BpeModel::build(std::span<const std::string_view> merges, const Vocab & vocab, bool ignore_merges) {
    BpeModel model;
    model.ignore_merges_ = ignore_merges;
    model.n_merges_      = merges.size();
    for (unsigned b = 0; b < 256; ++b) model.byte_ids_[b] = vocab.find(byte_to_utf8(static_cast<uint8_t>(b)));

    model.merges_.reserve(merges.size());
    std::string joined;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const std::string_view m   = merges[rank];
        const size_t           sep = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
        if (sep == std::string_view::npos) {
            fail(ErrorKind::invalid_model,
                 format("tokenizer: 'tokenizer.ggml.merges'[%zu] = '%s' is not of the form \"left right\"", rank,
                        printable(m, 64).c_str()),
                 "the file's tokenizer metadata is corrupt; get the file again or re-convert the model");
        }
        const std::string_view left  = m.substr(0, sep);
        const std::string_view right = m.substr(sep + 1);
        const int32_t          l     = vocab.find(left);
        const int32_t          r     = vocab.find(right);
        if (l < 0 || r < 0) {
            const std::string_view missing = l < 0 ? left : right;
            fail(ErrorKind::invalid_model,
                 format("tokenizer: 'tokenizer.ggml.merges'[%zu] = '%s': '%s' is not a token of 'tokenizer.ggml.tokens'",
                        rank, printable(m, 64).c_str(), printable(missing, 64).c_str()),
                 "the merges do not belong to this vocabulary; re-convert the model");
        }
        joined.assign(left);
        joined.append(right);
        // The first occurrence of a pair keeps its rank (a later duplicate could never apply first).
        model.merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), vocab.find(joined)});
    }
    return model;
}

void BpeModel::emit_bytes(std::string_view bytes, const Vocab & vocab, std::vector<int32_t> & out) const {
    // Step 6: only reachable with vocabularies that lack some byte characters.
    emit_byte_tokens(bytes, byte_ids_, vocab.unk, out);
}

void BpeModel::encode_word(std::string_view word, const Vocab & vocab, std::vector<int32_t> & out,
                           BpeScratch & scratch) const {
    if (word.empty()) return;

    // Step 4: with ignore_merges a word that is itself a token is emitted whole.
    if (ignore_merges_ || word.size() == 1) {
        std::string & mapped = scratch.mapped;
        mapped.clear();
        for (char c : word) mapped.append(byte_to_utf8(static_cast<uint8_t>(c)));
        if (const int32_t id = vocab.find(mapped); id >= 0) {
            out.push_back(id);
            return;
        }
        if (word.size() == 1) {
            emit_bytes(word, vocab, out);
            return;
        }
    }

    // Step 5: one symbol per byte (= one mapped code point), then merge by lowest rank, leftmost
    // on ties, with a heap of candidate pairs; entries whose symbols changed since are skipped.
    auto & sym = scratch.symbols;
    sym.clear();
    const auto n = static_cast<int32_t>(word.size());
    for (int32_t i = 0; i < n; ++i) {
        sym.push_back({static_cast<uint32_t>(i), 1, byte_ids_[static_cast<uint8_t>(word[static_cast<size_t>(i)])], i - 1,
                       i + 1 < n ? i + 1 : -1});
    }

    auto & heap = scratch.heap;
    heap.clear();
    // std heap functions build a max-heap: "greater" = lower rank, then further left.
    const auto worse = [](const BpeScratch::Candidate & a, const BpeScratch::Candidate & b) {
        return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
    };
    const auto try_push = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const int32_t lid = sym[static_cast<size_t>(left)].id;
        const int32_t rid = sym[static_cast<size_t>(right)].id;
        if (lid < 0 || rid < 0) return;
        const auto it = merges_.find(pair_key(lid, rid));
        if (it == merges_.end()) return;
        heap.push_back({it->second.rank, left, right, lid, rid});
        std::push_heap(heap.begin(), heap.end(), worse);
    };
    for (int32_t i = 0; i + 1 < n; ++i) try_push(i, i + 1);

    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), worse);
        const BpeScratch::Candidate c = heap.back();
        heap.pop_back();
        auto & l = sym[static_cast<size_t>(c.left)];
        auto & r = sym[static_cast<size_t>(c.right)];
        // Stale: one side was merged away, or grew (its id changed), or they are no longer adjacent.
        if (l.len == 0 || r.len == 0 || l.next != c.right || l.id != c.left_id || r.id != c.right_id) continue;
        l.len += r.len;
        l.id = merges_.find(pair_key(c.left_id, c.right_id))->second.result;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = c.left;
        try_push(l.prev, c.left);
        try_push(c.left, l.next);
    }

    // Step 6.
    for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
        const auto & s = sym[static_cast<size_t>(i)];
        if (s.id >= 0) {
            out.push_back(s.id);
        } else {
            emit_bytes(word.substr(s.start, s.len), vocab, out);
        }
    }
}

}  // namespace tern::tok
