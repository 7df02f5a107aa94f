// libFuzzer target: encoding arbitrary bytes with a byte-level BPE vocabulary (tern's own, from a
// synthesized model) and a SentencePiece one (phi-3, tests/data). For BPE without special-token
// parsing, decoding the ids must give the bytes back.
#include "fuzz_common.h"
#include "gguf/gguf_reader.h"
#include "synth/synth.h"
#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <memory>
#include <unistd.h>

namespace {

std::unique_ptr<tern::GgufFile>  g_bpe_file, g_spm_file;
std::unique_ptr<tern::Tokenizer> g_bpe, g_spm;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const std::string path = (std::filesystem::temp_directory_path() / ("tern-fuzz-vocab-" + std::to_string(::getpid()) + ".gguf")).string();
    tern::SynthOptions o;
    o.shape       = "tiny";
    o.output_path = path;
    o.progress    = false;
    tern::write_synthetic_model(o);
    g_bpe_file = std::make_unique<tern::GgufFile>(tern::GgufFile::open(path));
    std::filesystem::remove(path);  // the mapping stays valid
    g_bpe      = std::make_unique<tern::Tokenizer>(tern::Tokenizer::from_gguf(*g_bpe_file));
    const std::string phi3 = std::string(TERN_SOURCE_DIR) + "/tests/data/llama-vocab/ggml-vocab-phi-3.gguf";
    if (std::filesystem::exists(phi3)) {
        g_spm_file = std::make_unique<tern::GgufFile>(tern::GgufFile::open(phi3));
        g_spm      = std::make_unique<tern::Tokenizer>(tern::Tokenizer::from_gguf(*g_spm_file));
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string_view text(reinterpret_cast<const char *>(data), size);
    tern::fuzz::expect_clean([&] {
        const auto ids = g_bpe->encode(text, true, false);
        const auto body = std::span<const int32_t>(ids).subspan(!ids.empty() && ids[0] == g_bpe->bos_id() ? 1 : 0);
        if (g_bpe->decode(body) != text) tern::fuzz::finding("BPE: decode(encode(text)) != text");
        (void) g_bpe->encode(text, false, true);
        if (g_spm) {
            const auto sp = g_spm->encode(text, true, true);
            (void) g_spm->decode(sp);
        }
    });
    return 0;
}
