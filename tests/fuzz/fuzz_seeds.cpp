// Writes the seed corpus of every fuzz target into DIR/<target>/, made from the project's own
// small files and generators (tern synth, the GGUF seed set, a safetensors builder), so that no
// binary seed files live in the repository. Usage: fuzz_seeds DIR
#include "core/mmap.h"
#include "gguf_seeds.h"
#include "st_builder.h"
#include "synth/synth.h"

#include <cstdio>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {

void put(const fs::path & dir, const std::string & name, const std::string & bytes) {
    fs::create_directories(dir);
    tern::write_file_bytes((dir / name).string(),
                           std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
}

void copy(const fs::path & dir, const std::string & name, const std::string & source) {
    put(dir, name, tern::read_file_text(std::string(TERN_SOURCE_DIR) + "/" + source, size_t{64} << 20));
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const fs::path root = argv[1];
    for (const auto & [name, bytes] : tern::test::gguf_seed_files()) {
        put(root / "gguf", name + ".gguf", std::string(bytes.begin(), bytes.end()));
    }
    // Models: tern's tiny shape in three weight layouts (model_fuzz), also GGUF seeds.
    struct Variant {
        const char * name;
        tern::DType  linear, embd;
    };
    for (const Variant v : {Variant{"tiny-i2s-q8", tern::DType::i2_s, tern::DType::q8_0},
                            Variant{"tiny-tq2-f16", tern::DType::tq2_0, tern::DType::f16},
                            Variant{"tiny-tq1-q4k", tern::DType::tq1_0, tern::DType::q4_k}}) {
        tern::SynthOptions o;
        o.shape       = "tiny";
        o.output_path = (root / "model" / (std::string(v.name) + ".gguf")).string();
        o.linear_type = v.linear;
        o.embd_type   = v.embd;
        o.progress    = false;
        fs::create_directories(root / "model");
        tern::write_synthetic_model(o);
    }
    for (const char * ckpt : {"tiny_tied", "hd128_untied", "online_masters"}) {
        const std::string base = std::string("tests/data/hf_parity/") + ckpt;
        copy(root / "hf_config", std::string(ckpt) + ".json", base + "/config.json");
        copy(root / "tokenizer_json", std::string(ckpt) + ".json", base + "/tokenizer.json");
    }
    for (const char * vocab : {"llama-bpe", "qwen2", "phi-3"}) {
        copy(root / "tokenizer", std::string(vocab) + ".txt", std::string("tests/data/llama-vocab/ggml-vocab-") + vocab + ".gguf.inp");
    }
    put(root / "tokenizer", "specials.txt", "<|begin_of_text|>Hello<|eot_id|> world \xe6\x9d\xb1\xe4\xba\xac 123\n\t");
    // Safetensors: small files with every dtype tern reads, metadata, an empty and a scalar tensor.
    const auto st = tern::test::build_safetensors(
        {{"w.packed", "U8", {2, 3}, {1, 2, 3, 4, 5, 6}},
         {"w.scale", "BF16", {1}, tern::test::bf16_bytes({0.75f})},
         {"norm", "F32", {2}, tern::test::f32_bytes({1.5f, -2.0f})},
         {"half", "F16", {2}, {0x00, 0x3c, 0x00, 0xc0}},
         {"i8", "I8", {4}, {0xff, 1, 2, 0x80}},
         {"scalar", "F32", {}, tern::test::f32_bytes({3.0f})},
         {"empty", "F32", {0, 5}, {}}},
        {{"format", "pt"}});
    put(root / "safetensors", "small.safetensors", std::string(st.begin(), st.end()));
    return 0;
}
