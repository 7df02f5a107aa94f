// `tern convert`: a Hugging Face BitNet checkpoint folder -> GGUF in the official 2B4T layout.
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
    std::string input, output, type = "i2_s", embd_type = "f16";
};

void convert(const ConvertArgs & a) {
    check_output_path(a.output);  // before any work: -o must be a regular file or a new one
    ConvertOptions o;
    o.input_dir    = a.input;
    o.output_path  = a.output;
    o.ternary_type = *dtype_from_name(a.type);
    o.embd_type    = *dtype_from_name(a.embd_type);
    convert_hf_checkpoint(o);
    std::fprintf(stderr, "tern: wrote %s\n", a.output.c_str());
}

}  // namespace

void register_convert(CLI::App & app) {
    auto   args = std::make_shared<ConvertArgs>();
    auto * cmd  = app.add_subcommand("convert", "convert a Hugging Face BitNet checkpoint folder to GGUF");
    cmd->add_option("input", args->input, "folder with config.json, *.safetensors and tokenizer.json")
        ->required()->check(CLI::ExistingDirectory);
    cmd->add_option("-o,--output", args->output,
                    "output GGUF file (a new or regular file; written to a temp file and renamed when complete)")
        ->required();
    cmd->add_option("--type", args->type, "type of the ternary projections")->check(one_of({"i2_s", "tq2_0", "tq1_0"}))
        ->capture_default_str();
    cmd->add_option("--embd-type", args->embd_type, "type of the embedding (and untied LM head)")
        ->check(one_of({"f16", "f32", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}))->capture_default_str();
    cmd->footer("Example: tern convert tests/data/hf_parity/tiny_tied -o tiny.gguf\n"
                "         tern convert ./bitnet-b1.58-2B-4T -o bitnet-2b4t-i2_s.gguf   (the Hugging Face folder)");
    cmd->callback([args] { convert(*args); });
}

}  // namespace tern::cli
