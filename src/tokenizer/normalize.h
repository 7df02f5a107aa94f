// Unicode normalization of text before pre-tokenization, as a Hugging Face tokenizer.json's
// "normalizer" does it: Qwen2 / Qwen2.5 / Qwen3 tokenizers apply NFC ({"type": "NFC"}), so a
// decomposed "café" (e + U+0301) gets the ids of the composed one. llama.cpp skips this step;
// tern follows transformers. NFC comes from utf8proc (Debian libutf8proc-dev).
#pragma once

#include <string>
#include <string_view>

namespace tern::tok {

// NFC of UTF-8 text; pure ASCII (already NFC) and invalid UTF-8 (left as it is, byte-level BPE
// encodes any bytes) come back unchanged.
std::string nfc(std::string_view text);

// Whether nfc() can change the text (it has a non-ASCII byte).
bool may_need_nfc(std::string_view text);

}  // namespace tern::tok
