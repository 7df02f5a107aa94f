// StreamingDecoder: token ids -> text chunks that never end inside a UTF-8 sequence (FORMATS.md
// §5.9: a character's bytes can span several byte-level tokens, e.g. an emoji split in three).
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace tern {

StreamingDecoder::StreamingDecoder(const Tokenizer & tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string StreamingDecoder::push(int32_t id) {
    pending_ += tokenizer_.token_to_piece(id, render_special_);
    // Hold back a sequence that is valid so far but incomplete; everything before it is final.
    const size_t keep  = utf8_incomplete_tail(pending_);
    const size_t ready = pending_.size() - keep;
    std::string  out   = utf8_replace_invalid(std::string_view(pending_).substr(0, ready));
    pending_.erase(0, ready);
    return out;
}

std::string StreamingDecoder::flush() {
    std::string out = utf8_replace_invalid(pending_);
    pending_.clear();
    return out;
}

}  // namespace tern
