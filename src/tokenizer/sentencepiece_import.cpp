// SentencePiece tokenizer.model import; see sentencepiece_import.h.
#include "tokenizer/sentencepiece_import.h"

#include "core/error.h"
#include "core/mmap.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>

namespace tern {
namespace {

class Proto {
public:
    Proto(std::span<const uint8_t> b, const std::string & source, size_t base = 0) : b_(b), source_(source), base_(base) {}

    bool done() const { return pos_ >= b_.size(); }
    [[noreturn]] void bad(const char * what) const {
        fail(ErrorKind::invalid_model, format("sentencepiece model '%s': %s at byte %zu", source_.c_str(), what, base_ + pos_),
             "the file is not a SentencePiece tokenizer.model or it is truncated");
    }
    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (pos_ >= b_.size()) bad("truncated varint");
            const uint8_t byte = b_[pos_++];
            v |= static_cast<uint64_t>(byte & 0x7f) << shift;
            if (!(byte & 0x80)) return v;
        }
        bad("varint longer than 10 bytes");
    }
    // Next field: number and wire type; for LEN fields `payload` is set.
    bool next(uint32_t & field, uint32_t & wire, std::span<const uint8_t> & payload, uint64_t & value) {
        if (done()) return false;
        const uint64_t key = varint();
        field = static_cast<uint32_t>(key >> 3), wire = static_cast<uint32_t>(key & 7);
        switch (wire) {
            case 0: value = varint(); break;
            case 1: skip(8); break;
            case 2: {
                const uint64_t n = varint();
                if (n > b_.size() - pos_) bad("length past the end");
                payload = b_.subspan(pos_, static_cast<size_t>(n));
                pos_ += static_cast<size_t>(n);
                break;
            }
            case 5:
                if (b_.size() - pos_ < 4) bad("truncated fixed32");
                value = static_cast<uint64_t>(b_[pos_]) | (static_cast<uint64_t>(b_[pos_ + 1]) << 8) |
                        (static_cast<uint64_t>(b_[pos_ + 2]) << 16) | (static_cast<uint64_t>(b_[pos_ + 3]) << 24);
                pos_ += 4;
                break;
            default: bad("unknown wire type");
        }
        return true;
    }
    size_t offset() const { return base_ + pos_; }

private:
    void skip(size_t n) {
        if (b_.size() - pos_ < n) bad("truncated field");
        pos_ += n;
    }
    std::span<const uint8_t> b_;
    const std::string &      source_;
    size_t                   base_, pos_ = 0;
};

constexpr int32_t k_normal = 1, k_control = 3, k_user_defined = 4, k_unused = 5;

}  // namespace

SpmPieces parse_sentencepiece_model(std::span<const uint8_t> bytes, const std::string & source) {
    SpmPieces                out;
    Proto                    top(bytes, source);
    uint32_t                 field = 0, wire = 0;
    std::span<const uint8_t> payload;
    uint64_t                 value = 0;
    while (top.next(field, wire, payload, value)) {
        if (field == 1 && wire == 2) {
            Proto       p(payload, source, top.offset() - payload.size());
            std::string piece;
            float       score = 0;
            int32_t     type  = k_normal;
            uint32_t    f = 0, w = 0;
            std::span<const uint8_t> s;
            uint64_t                 v = 0;
            while (p.next(f, w, s, v)) {
                if (f == 1 && w == 2) piece.assign(reinterpret_cast<const char *>(s.data()), s.size());
                if (f == 2 && w == 5) {
                    const auto bits = static_cast<uint32_t>(v);
                    std::memcpy(&score, &bits, 4);
                }
                if (f == 3 && w == 0) {
                    if (v < 1 || v > 6) p.bad("piece type outside 1..6");
                    type = static_cast<int32_t>(v);
                }
            }
            out.pieces.push_back(std::move(piece));
            out.scores.push_back(score);
            out.types.push_back(type);
        } else if (field == 3 && wire == 2) {
            Proto                    p(payload, source, top.offset() - payload.size());
            uint32_t                 f = 0, w = 0;
            std::span<const uint8_t> s;
            uint64_t                 v = 0;
            while (p.next(f, w, s, v)) {
                if (f == 3 && w == 0) out.add_dummy_prefix = v != 0;
            }
        }
    }
    if (out.pieces.empty()) fail(ErrorKind::invalid_model, format("sentencepiece model '%s' has no pieces", source.c_str()));
    return out;
}

TokenizerMetadata tokenizer_metadata_from_spm(const std::string & model_path, const std::string & tokenizer_json_path,
                                              const std::string & tokenizer_config_path) {
    const MappedFile  file(model_path);
    const SpmPieces   spm  = parse_sentencepiece_model(file.bytes(), model_path);
    TokenizerMetadata m;
    m.model       = "llama";
    m.pre         = "default";
    m.tokens      = spm.pieces;
    m.scores      = spm.scores;
    m.token_types = spm.types;
    m.add_space_prefix = spm.add_dummy_prefix;
    // Added tokens: from tokenizer.json's "added_tokens", else tokenizer_config.json's "added_tokens_decoder".
    auto add = [&m, &spm](int64_t id, const std::string & text, bool special, const std::string & where) {
        if (id < 0 || id > (int64_t{1} << 24)) fail(ErrorKind::invalid_model, format("%s: token id %lld out of range", where.c_str(), (long long) id));
        const auto i = static_cast<size_t>(id);
        while (m.tokens.size() <= i) {  // holes: [PAD<i>], UNUSED (as llama.cpp pads)
            m.tokens.push_back("[PAD" + std::to_string(m.tokens.size()) + "]");
            m.scores.push_back(-1000.0f);
            m.token_types.push_back(k_unused);
        }
        if (i >= spm.pieces.size() || m.tokens[i] == text) {
            m.tokens[i]      = text;
            m.token_types[i] = special ? k_control : k_user_defined;
            m.scores[i]      = -1000.0f;
        }
    };
    auto read = [](const std::string & path) {
        const MappedFile f(path);
        return nlohmann::json::parse(f.bytes().begin(), f.bytes().end(), nullptr, /*allow_exceptions=*/false);
    };
    if (!tokenizer_json_path.empty() && std::filesystem::exists(tokenizer_json_path)) {
        const auto doc = read(tokenizer_json_path);
        if (doc.is_discarded()) fail(ErrorKind::invalid_model, format("'%s' is not valid JSON", tokenizer_json_path.c_str()));
        if (const auto at = doc.find("added_tokens"); at != doc.end() && at->is_array()) {
            for (const auto & t : *at) {
                if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
                    !t["content"].is_string()) {
                    fail(ErrorKind::invalid_model, format("'%s': malformed entry in added_tokens", tokenizer_json_path.c_str()));
                }
                add(t["id"].get<int64_t>(), t["content"].get<std::string>(), t.value("special", false), tokenizer_json_path);
            }
        }
    } else if (!tokenizer_config_path.empty()) {
        const auto doc = read(tokenizer_config_path);
        if (doc.is_discarded()) fail(ErrorKind::invalid_model, format("'%s' is not valid JSON", tokenizer_config_path.c_str()));
        if (const auto at = doc.find("added_tokens_decoder"); at != doc.end() && at->is_object()) {
            for (auto it = at->begin(); it != at->end(); ++it) {
                const std::string & key = it.key();
                if (key.empty() || key.find_first_not_of("0123456789") != std::string::npos || key.size() > 8 ||
                    !it->is_object() || !it->contains("content") || !(*it)["content"].is_string()) {
                    fail(ErrorKind::invalid_model, format("'%s': malformed entry '%s' in added_tokens_decoder", tokenizer_config_path.c_str(), key.c_str()));
                }
                add(std::stoll(key), (*it)["content"].get<std::string>(), it->value("special", false), tokenizer_config_path);
            }
        }
    }
    if (!tokenizer_config_path.empty()) apply_tokenizer_config(tokenizer_config_path, m);
    auto find = [&m](const char * text) -> std::optional<int32_t> {
        for (size_t i = 0; i < m.tokens.size(); ++i) {
            if (m.tokens[i] == text) return static_cast<int32_t>(i);
        }
        return std::nullopt;
    };
    if (!m.bos_id) m.bos_id = find("<s>");
    if (!m.eos_id) m.eos_id = find("</s>");
    if (!m.unk_id) m.unk_id = find("<unk>");
    return m;
}

}  // namespace tern
