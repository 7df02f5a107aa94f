// SentencePiece-style BPE over scores, with byte fallback (FORMATS.md §5.7).
#include "tokenizer/spm.h"

#include "core/error.h"

#include <algorithm>

namespace tern::tok {
namespace {

constexpr std::string_view k_space_marker = "\xe2\x96\x81";  // U+2581 "▁"

// Length of the UTF-8 character starting at s[pos], clipped to s: the announced length if the
// continuation bytes are there, else 1, so an invalid byte never swallows valid text after it.
uint32_t char_len(std::string_view s, size_t pos) {
    const auto b   = static_cast<uint8_t>(s[pos]);
    size_t     len = b < 0x80 ? 1 : (b >= 0xc0 && b < 0xe0) ? 2 : (b >= 0xe0 && b < 0xf0) ? 3 : (b >= 0xf0 && b < 0xf8) ? 4 : 1;
    if (pos + len > s.size()) return 1;
    for (size_t i = 1; i < len; ++i) {
        if ((static_cast<uint8_t>(s[pos + i]) & 0xc0) != 0x80) return 1;
    }
    return static_cast<uint32_t>(len);
}

}  // namespace

void spm_escape_whitespace(std::string_view text, bool add_prefix, std::string & out) {
    out.clear();
    out.reserve(text.size() + 8);
    if (add_prefix) out.append(k_space_marker);
    for (char c : text) {
        if (c == ' ') {
            out.append(k_space_marker);
        } else {
            out.push_back(c);
        }
    }
}

SpmModel SpmModel::build(const Vocab & vocab) {
    SpmModel model;
    for (unsigned b = 0; b < 256; ++b) {
        int32_t id = vocab.find(format("<0x%02X>", b));
        if (id < 0) id = vocab.find(std::string(1, static_cast<char>(b)));
        model.byte_ids_[b] = id;
    }
    return model;
}

float SpmModel::score(int32_t id, const Vocab & vocab) const {
    return vocab.scores.empty() ? 0.0f : vocab.scores[static_cast<size_t>(id)];
}

void SpmModel::emit_bytes(std::string_view bytes, const Vocab & vocab, std::vector<int32_t> & out) const {
    emit_byte_tokens(bytes, byte_ids_, vocab.unk, out);
}

void SpmModel::encode_fragment(std::string_view text, const Vocab & vocab, std::vector<int32_t> & out,
                               SpmScratch & scratch) const {
    if (text.empty()) return;

    // Step 3: one symbol per UTF-8 character.
    auto & sym = scratch.symbols;
    sym.clear();
    for (size_t pos = 0; pos < text.size();) {
        const uint32_t len = char_len(text, pos);
        const auto     idx = static_cast<int32_t>(sym.size());
        sym.push_back({static_cast<uint32_t>(pos), len, idx - 1, -1});
        if (idx > 0) sym[static_cast<size_t>(idx - 1)].next = idx;
        pos += len;
    }

    // Max-heap on score, ties to the smaller left index.
    auto & heap = scratch.heap;
    heap.clear();
    const auto worse = [](const SpmScratch::Candidate & a, const SpmScratch::Candidate & b) {
        return a.score != b.score ? a.score < b.score : a.left > b.left;
    };
    const auto try_push = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const auto & l   = sym[static_cast<size_t>(left)];
        const auto & r   = sym[static_cast<size_t>(right)];
        const uint32_t n = l.len + r.len;  // symbols are contiguous: r.start == l.start + l.len
        const int32_t id = vocab.find(text.substr(l.start, n));
        if (id < 0) return;
        heap.push_back({score(id, vocab), left, right, n});
        std::push_heap(heap.begin(), heap.end(), worse);
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_push(i, i + 1);

    // Step 4.
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), worse);
        const SpmScratch::Candidate c = heap.back();
        heap.pop_back();
        auto & l = sym[static_cast<size_t>(c.left)];
        auto & r = sym[static_cast<size_t>(c.right)];
        if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;
        l.len += r.len;
        r.len  = 0;
        l.next = r.next;
        if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = c.left;
        try_push(l.prev, c.left);
        try_push(c.left, l.next);
    }

    // Step 5. A merged symbol is always a token (a pair is only queued when its text is one), so
    // the "recurse into the two parts" branch of §5.7 can never trigger; single characters that
    // are not tokens fall back to bytes.
    for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
        const auto &           s     = sym[static_cast<size_t>(i)];
        const std::string_view piece = text.substr(s.start, s.len);
        if (const int32_t id = vocab.find(piece); id >= 0) {
            out.push_back(id);
        } else {
            emit_bytes(piece, vocab, out);
        }
    }
}

}  // namespace tern::tok
