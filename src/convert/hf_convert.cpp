// convert_hf_checkpoint: options, config, tokenizer, the metadata of FORMATS.md §4.3 in file order,
// and the lazy GGUF write. Tensor mapping and payloads live in convert_plan.cpp.
#include "convert/hf_convert.h"

#include "convert/convert_plan.h"
#include "convert/family_convert.h"
#include "convert/hf_family_config.h"
#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "core/error.h"
#include "core/llama_ftype.h"
#include "core/log.h"
#include "core/mmap.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/hf_tokenizer_json.h"

#include <cstdio>
#include <filesystem>

namespace tern {
namespace {

namespace fs = std::filesystem;

constexpr int32_t k_token_type_unused = 5;  // FORMATS.md §5.2

void validate_options(const ConvertOptions & o) {
    if (o.input_dir.empty()) fail(ErrorKind::invalid_argument, "convert: no input folder given");
    if (o.output_path.empty()) fail(ErrorKind::invalid_argument, "convert: no output path given");
    if (o.ternary_type != DType::i2_s && o.ternary_type != DType::tq2_0 && o.ternary_type != DType::tq1_0) {
        fail(ErrorKind::invalid_argument,
             format("--type must be i2_s, tq2_0 or tq1_0 (got %s)", std::string(dtype_name(o.ternary_type)).c_str()),
             "i2_s is the layout of the official 2B4T GGUF");
    }
    switch (o.embd_type) {
        case DType::f32: case DType::f16: case DType::bf16: case DType::q8_0: case DType::q6_k: case DType::q4_k:
        case DType::q4_0: break;
        default:
            fail(ErrorKind::invalid_argument,
                 format("--embd-type must be f32, f16, bf16, q8_0, q6_k, q4_k or q4_0 (got %s)",
                        std::string(dtype_name(o.embd_type)).c_str()),
                 "the official 2B4T GGUF uses f16");
    }
    if (o.arch != "bitnet-b1.58" && o.arch != "bitnet-25") {
        fail(ErrorKind::invalid_argument, format("--arch must be bitnet-b1.58 or bitnet-25 (got %s)", o.arch.c_str()),
             "both name the 2B4T graph (ReLU², sub-norms, NeoX RoPE); bitnet-b1.58 is the current official name");
    }
}

std::string model_name(const std::string & input_dir) {
    std::error_code ec;
    fs::path        p = fs::weakly_canonical(fs::path(input_dir), ec);
    if (ec) p = fs::path(input_dir).lexically_normal();
    std::string name = p.filename().string();
    if (name.empty()) name = p.parent_path().filename().string();  // "dir/" -> "dir"
    return name.empty() ? "bitnet" : name;
}

// Token id for a GGUF key: the tokenizer's value, else config.json's, else the fallback.
uint32_t special_id(const char * what, std::optional<int32_t> from_tokenizer, std::optional<int64_t> from_config,
                    std::optional<int64_t> fallback, int64_t n_vocab) {
    std::optional<int64_t> id;
    if (from_tokenizer) {
        id = *from_tokenizer;
    } else if (from_config) {
        id = from_config;
    } else {
        id = fallback;
    }
    if (!id) {
        fail(ErrorKind::invalid_model, format("no %s token id in tokenizer_config.json or config.json", what),
                 "tokenizer_config.json names it (e.g. \"bos_token\") or config.json gives \"bos_token_id\" / \"eos_token_id\"");
    }
    if (*id < 0 || *id >= n_vocab) {
        fail(ErrorKind::invalid_model, format("%s token id %lld is outside the vocabulary [0, %lld)", what, (long long) *id,
                                              (long long) n_vocab));
    }
    return static_cast<uint32_t>(*id);
}

void write_metadata(GgufWriter & w, const ConvertOptions & o, const HfBitnetConfig & c, TokenizerMetadata tok) {
    const std::string a = o.arch + ".";
    if (static_cast<int64_t>(tok.tokens.size()) > c.vocab_size) {
        fail(ErrorKind::invalid_model,
             format("tokenizer.json has %zu tokens, but config.json \"vocab_size\" (the rows of the embedding) is %lld",
                    tok.tokens.size(), (long long) c.vocab_size));
    }
    if (tok.token_types.size() != tok.tokens.size()) {
        fail(ErrorKind::internal, format("tokenizer import gave %zu token types for %zu tokens", tok.token_types.size(),
                                         tok.tokens.size()));
    }
    // Pad to the embedding's row count, as HF converters do: "[PAD<i>]", type UNUSED.
    for (auto i = static_cast<int64_t>(tok.tokens.size()); i < c.vocab_size; ++i) {
        tok.tokens.push_back("[PAD" + std::to_string(i) + "]");
        tok.token_types.push_back(k_token_type_unused);
    }
    const uint32_t bos = special_id("BOS", tok.bos_id, c.bos_token_id, std::nullopt, c.vocab_size);
    const uint32_t eos = special_id("EOS", tok.eos_id, c.eos_token_id, std::nullopt, c.vocab_size);
    const uint32_t pad = special_id("padding", tok.pad_id, c.pad_token_id, eos, c.vocab_size);
    if (!tok.add_bos) TERN_LOG_INFO("convert: the tokenizer does not say whether to add BOS; writing add_bos_token = true");

    // FORMATS.md §4.3, in file order. tokenizer.chat_template is left out on purpose: the official
    // one is a placeholder that tern never renders (§5.8).
    w.set_string("general.architecture", o.arch);
    w.set_string("general.name", model_name(o.input_dir));
    w.set_u32(a + "vocab_size", static_cast<uint32_t>(c.vocab_size));
    w.set_u32(a + "context_length", static_cast<uint32_t>(c.context_length));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(c.hidden_size));
    w.set_u32(a + "block_count", static_cast<uint32_t>(c.n_layers));
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(c.head_dim));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(c.n_heads));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
    if (c.head_dim * c.n_heads != c.hidden_size) {  // only when head_dim is not n_embd / n_head (§4.16)
        w.set_u32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim));
        w.set_u32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim));
    }
    w.set_bool("tokenizer.ggml.add_bos_token", tok.add_bos.value_or(true));
    w.set_f32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
    w.set_f32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
    w.set_u32("general.file_type", llama_file_type(o.ternary_type));
    w.set_string("tokenizer.ggml.model", tok.model);
    // One key beyond the official file: its missing pre-tokenizer name is a known defect that makes
    // stock bitnet.cpp tokenize with the wrong regex (FORMATS.md §5.6, microsoft/BitNet PR #508).
    if (!tok.pre.empty()) w.set_string("tokenizer.ggml.pre", tok.pre);
    w.set_string_array("tokenizer.ggml.tokens", tok.tokens);
    tok.scores.resize(tok.tokens.size(), 0.0f);  // gpt2 vocabularies have none: zeros, as in the official file
    w.set_f32_array("tokenizer.ggml.scores", tok.scores);
    w.set_i32_array("tokenizer.ggml.token_type", tok.token_types);
    w.set_string_array("tokenizer.ggml.merges", tok.merges);
    w.set_u32("tokenizer.ggml.bos_token_id", bos);
    w.set_u32("tokenizer.ggml.eos_token_id", eos);
    w.set_u32("tokenizer.ggml.padding_token_id", pad);
    w.set_u32("general.quantization_version", 2);
}

void log_weight_form(const HfBitnetConfig & c, const ConvertPlan & plan) {
    if (plan.n_packed > 0) {
        if (!c.linear_class_explicit) {
            TERN_LOG_WARN("convert: config.json has no quantization_config.linear_class; using the transformers default "
                          "'bitlinear' (weight_scale is a divisor: scale = 1 / weight_scale)");
        }
        if (c.quantization_mode == "online") {
            TERN_LOG_WARN("convert: quantization_mode is 'online' but the projections are packed U8; converting them as packed");
        }
    }
    if (plan.n_master > 0 && c.quantization_mode == "offline") {
        TERN_LOG_WARN("convert: quantization_mode is 'offline' but the projections are float masters; ternarising them by absmean");
    }
    TERN_LOG_INFO("convert: %lld layers, n_embd %lld, n_ff %lld, %lld/%lld heads, vocab %lld; %lld packed and %lld master "
                  "projections%s",
                  (long long) c.n_layers, (long long) c.hidden_size, (long long) c.intermediate_size,
                  (long long) c.n_heads, (long long) c.n_kv_heads, (long long) c.vocab_size, (long long) plan.n_packed,
                  (long long) plan.n_master, plan.has_output ? ", untied output" : "");
}

}  // namespace

void convert_hf_checkpoint(const ConvertOptions & o) {
    if (o.input_dir.empty()) fail(ErrorKind::invalid_argument, "convert: no input folder given");
    if (o.output_path.empty()) fail(ErrorKind::invalid_argument, "convert: no output path given");
    const fs::path dir(o.input_dir);
    const fs::path config_path = dir / "config.json";
    // Llama / Qwen3 / Phi-3 checkpoints take the family path (family_convert.h).
    if (fs::is_regular_file(config_path)) {
        const std::string text = read_file_text(config_path.string());
        if (is_hf_family_class(hf_architecture(text, config_path.string()))) {
            with_context(format("cannot convert '%s'", o.input_dir.c_str()), [&] {
                convert_hf_family_checkpoint(o, parse_hf_family_config(text, config_path.string()));
            });
            return;
        }
    }
    validate_options(o);
    with_context(format("cannot convert '%s'", o.input_dir.c_str()), [&] {
        if (fs::is_directory(dir) && !fs::exists(config_path)) {
            fail(ErrorKind::io, format("'%s' not found", config_path.string().c_str()),
                 "a Hugging Face checkpoint folder holds config.json next to the weights");
        }
        const auto           ckpt   = SafetensorsCheckpoint::open_dir(o.input_dir);  // checks the folder exists
        const HfBitnetConfig config = read_hf_config(config_path.string());
        ConvertPlan          plan   = plan_conversion(config, ckpt, o.ternary_type, o.embd_type);
        log_weight_form(config, plan);

        const fs::path tokenizer_path = dir / "tokenizer.json";
        if (!fs::exists(tokenizer_path)) {
            fail(ErrorKind::io, format("'%s' not found", tokenizer_path.string().c_str()),
                 "the GGUF embeds the tokenizer; copy tokenizer.json (and tokenizer_config.json) into the folder");
        }
        const fs::path tok_config_path = dir / "tokenizer_config.json";
        // Token ids are bounded by config.json's vocab_size (the embedding's rows).
        TokenizerMetadata tok = tokenizer_metadata_from_hf(tokenizer_path.string(),
                                                           fs::exists(tok_config_path) ? tok_config_path.string() : std::string(),
                                                           config.vocab_size);

        GgufWriter writer;
        write_metadata(writer, o, config, std::move(tok));
        resolve_ternary_scales(plan, config.linear_class, o.progress);  // the last check before writing
        for (const PlannedTensor & t : plan.tensors) {
            std::vector<int64_t> dims = t.is_vector() ? std::vector<int64_t>{t.ne0} : std::vector<int64_t>{t.ne0, t.ne1};
            writer.add_tensor(t.name, t.type, std::move(dims), [&t](std::span<uint8_t> dst) { fill_planned_tensor(t, dst); });
        }
        writer.write_file(o.output_path, o.progress);  // removes its temp file on any failure
        TERN_LOG_INFO("convert: wrote '%s' (%zu tensors, %s projections, %s embedding)", o.output_path.c_str(),
                      plan.tensors.size(), std::string(dtype_name(o.ternary_type)).c_str(),
                      std::string(dtype_name(o.embd_type)).c_str());
    });
}

}  // namespace tern
