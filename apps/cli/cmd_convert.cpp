// `tern convert`: a Hugging Face checkpoint folder -> GGUF: BitNet (the official 2B4T layout), Llama,
// Qwen3 and Phi-3 (llama.cpp's llama / qwen3 / phi3 layouts).
#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"

#include "convert/hf_convert.h"
#include "core/error.h"
#include "core/output_file.h"

#include <cstdio>

namespace tern::cli {
namespace {

struct ConvertArgs {
    std::string input, output, type, embd_type;
};

void convert(const ConvertArgs & a) {
    check_output_path(a.output);  // before any work: -o must be a regular file or a new one
    ConvertOptions o;
    o.input_dir    = a.input;
    o.output_path  = a.output;
    if (!a.type.empty()) o.ternary_type = o.weight_type.emplace(*dtype_from_name(a.type));
    if (!a.embd_type.empty()) o.embd_type = o.head_type.emplace(*dtype_from_name(a.embd_type));
    convert_hf_checkpoint(o);
    std::fprintf(stderr, "tern: wrote %s\n", a.output.c_str());
}

}  // namespace

void register_convert(CLI::App & app) {
    auto   args = std::make_shared<ConvertArgs>();
    auto * cmd  = app.add_subcommand("convert", "convert a Hugging Face checkpoint folder (BitNet, Llama, Qwen3, Phi-3) to GGUF");
    cmd->add_option("input", args->input, "folder with config.json, *.safetensors and tokenizer.json")
        ->required()->check(CLI::ExistingDirectory);
    cmd->add_option("-o,--output", args->output,
                    "output GGUF file (a new or regular file; written to a temp file and renamed when complete)")
        ->required();
    cmd->add_option("--type", args->type,
                    "type of the weight matrices: BitNet i2_s (default), tq2_0, tq1_0; Llama / Qwen3 / Phi-3 f16 (default), "
                    "bf16, f32, q8_0, q4_0, q4_k, q6_k, or a ternary type for BitNet-quantized Llama checkpoints (default i2_s)")
        ->check(one_of({"i2_s", "tq2_0", "tq1_0", "f16", "bf16", "f32", "q8_0", "q4_0", "q4_k", "q6_k"}));
    cmd->add_option("--embd-type", args->embd_type,
                    "type of the embedding and untied LM head (default f16, or the matrices' float type)")
        ->check(one_of({"f16", "f32", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}));
    cmd->footer("Examples: tern convert tests/data/hf_parity/tiny_tied -o tiny.gguf\n"
                "          tern convert ./bitnet-b1.58-2B-4T -o bitnet-2b4t-i2_s.gguf   (a Hugging Face folder)\n"
                "          tern convert ./Llama-3.2-1B-Instruct -o llama-3.2-1b-f16.gguf   (then tern quantize ... Q4_0)");
    cmd->callback([args] { convert(*args); });
}

}  // namespace tern::cli
