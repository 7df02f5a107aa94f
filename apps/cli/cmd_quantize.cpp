// `tern quantize IN OUT TYPE`: rewrite a GGUF model's weights in another type, like llama-quantize
// (the rules are in src/convert/quantize_model.h).
#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"

#include "convert/quantize_model.h"
#include "core/error.h"

#include <cstdio>

namespace tern::cli {
namespace {

struct QuantizeArgs {
    std::string input, output, type, output_tensor_type, token_embedding_type;
    bool        allow_requantize = false;
    int         threads          = 0;
};

void quantize(const QuantizeArgs & a) {
    QuantizeOptions o;
    o.input_path       = a.input;
    o.output_path      = a.output;
    o.type             = parse_quantize_type(a.type, "TYPE");
    o.allow_requantize = a.allow_requantize;
    o.threads          = a.threads;
    auto override_type = [](const std::string & name, const char * flag) -> std::optional<DType> {
        if (name.empty()) return std::nullopt;
        const auto t = parse_quantize_type(name, flag);
        if (!t) fail(ErrorKind::invalid_argument, format("%s: COPY is a file type, not a tensor type", flag));
        return t;
    };
    o.output_tensor_type   = override_type(a.output_tensor_type, "--output-tensor-type");
    o.token_embedding_type = override_type(a.token_embedding_type, "--token-embedding-type");
    size_t bytes_in = 0, bytes_out = 0, changed = 0;
    for (const auto & t : quantize_model(o)) {
        bytes_in += t.bytes_in, bytes_out += t.bytes_out;
        if (t.from != t.to) {
            ++changed;
            std::fprintf(stderr, "tern: %-28s %-5s -> %-5s %10s -> %s\n", t.name.c_str(), std::string(dtype_name(t.from)).c_str(),
                         std::string(dtype_name(t.to)).c_str(), human_bytes(static_cast<double>(t.bytes_in)).c_str(),
                         human_bytes(static_cast<double>(t.bytes_out)).c_str());
        }
    }
    std::fprintf(stderr, "tern: wrote %s: %zu tensors converted, weights %s -> %s\n", a.output.c_str(), changed,
                 human_bytes(static_cast<double>(bytes_in)).c_str(), human_bytes(static_cast<double>(bytes_out)).c_str());
}

}  // namespace

void register_quantize(CLI::App & app) {
    auto   args = std::make_shared<QuantizeArgs>();
    auto * cmd  = app.add_subcommand("quantize", "rewrite a GGUF model's weights in another type (like llama-quantize)");
    cmd->add_option("input", args->input, "input GGUF model")->required()->check(readable_file());
    cmd->add_option("output", args->output, "output GGUF file (a new file; an existing regular file is replaced)")->required();
    cmd->add_option("type", args->type, "type of the weight matrices: " + quantize_type_names())->required();
    cmd->add_option("--output-tensor-type", args->output_tensor_type,
                    "type of output.weight (of token_embd.weight when it is the tied LM head)");
    cmd->add_option("--token-embedding-type", args->token_embedding_type, "type of token_embd.weight");
    cmd->add_flag("--allow-requantize", args->allow_requantize,
                  "allow converting tensors that are already quantized (quality drops twice)");
    cmd->add_option("-t,--threads", args->threads, "threads (0 = all)")->check(int_in(0, 1024))->capture_default_str();
    cmd->footer(
        "Defaults as llama-quantize: the LM head becomes Q6_K (Q8_0 / float types keep TYPE; ternary types keep\n"
        "the head as it is), vectors stay F32. Examples:\n"
        "  tern quantize model-f16.gguf model-q4_k.gguf Q4_K\n"
        "  tern quantize ggml-model-i2_s.gguf 2b4t-q6k-head.gguf COPY --token-embedding-type q6_k");
    cmd->callback([args] { quantize(*args); });
}

}  // namespace tern::cli
