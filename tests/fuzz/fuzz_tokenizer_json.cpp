// libFuzzer target: the Hugging Face tokenizer.json importer (tokenizer_metadata_from_hf_text), then
// the GGUF metadata it would write, read back as a tokenizer (as `tern convert` output is).
#include "fuzz_common.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string_view text(reinterpret_cast<const char *>(data), size);
    tern::fuzz::expect_clean([&] {
        const tern::TokenizerMetadata meta = tern::tokenizer_metadata_from_hf_text(text, "tokenizer.json", 1 << 16);
        if (meta.tokens.size() != meta.token_types.size()) tern::fuzz::finding("tokens and types differ in length");
        tern::GgufWriter w;
        w.set_string("general.architecture", "bitnet-b1.58");
        tern::write_tokenizer_metadata(w, meta);
        const auto            bytes = w.to_bytes();
        const tern::GgufFile  f     = tern::GgufFile::from_bytes(bytes);
        const tern::Tokenizer tok   = tern::Tokenizer::from_gguf(f);
        (void) tok.encode("Hello world <|eot_id|> 123", true, true);
    });
    return 0;
}
