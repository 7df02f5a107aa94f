// `tern synth`: write a random-weight model of a named shape (BitNet, or a llama / qwen3 / phi3 family shape).
#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"

#include "core/error.h"
#include "core/output_file.h"
#include "synth/synth.h"

#include <cstdio>

namespace tern::cli {
namespace {

struct SynthArgs {
    std::string shape, output, type, embd_type, vocab;
    uint64_t    seed = 1;
    int64_t     layers = 0;
    bool        list = false;
};

DType parse_type(const std::string & name, const char * flag) {
    const auto t = dtype_from_name(name);
    if (!t) fail(ErrorKind::invalid_argument, format("%s: unknown type '%s'", flag, name.c_str()));
    return *t;
}

void synth(const SynthArgs & a) {
    if (a.list || a.shape.empty()) {
        for (const auto & s : synth_shapes()) std::printf("%-13s %s\n", s.name.c_str(), s.description.c_str());
        if (a.shape.empty() && !a.list) fail(ErrorKind::invalid_argument, "no shape given", "tern synth SHAPE -o FILE");
        return;
    }
    if (a.output.empty()) fail(ErrorKind::invalid_argument, "no output file given", "pass -o FILE.gguf");
    check_output_path(a.output);  // before any work: -o must be a regular file or a new one
    SynthOptions o;
    o.shape       = a.shape;
    o.output_path = a.output;
    o.seed        = a.seed;
    if (!a.type.empty()) o.linear_type = parse_type(a.type, "--type");
    if (!a.embd_type.empty()) o.embd_type = parse_type(a.embd_type, "--embd-type");
    o.vocab_json  = a.vocab;
    o.n_layer     = a.layers;
    write_synthetic_model(o);
    std::fprintf(stderr, "tern: wrote %s (shape %s, seed %llu, random weights)\n", a.output.c_str(), a.shape.c_str(),
                 static_cast<unsigned long long>(a.seed));
}

}  // namespace

void register_synth(CLI::App & app) {
    auto   args = std::make_shared<SynthArgs>();
    auto * cmd  = app.add_subcommand("synth", "write a random-weight model of a named shape (tests, benchmarks)");
    cmd->add_option("shape", args->shape,
                    "tiny, small, bitnet-2b4t, llama-3.2-1b, qwen3-1.7b, phi-3-mini or falcon3-1b (--list shows them)");
    cmd->add_option("-o,--output", args->output,
                    "output GGUF file (a new or regular file; written to a temp file and renamed when complete)");
    cmd->add_option("--seed", args->seed, "random seed (same seed, same file)")->check(int_in(0, INT64_MAX))
        ->capture_default_str();
    cmd->add_option("--type", args->type,
                    "type of the projections (default: the shape's; BitNet shapes: i2_s, tq2_0 or tq1_0)")
        ->check(one_of({"i2_s", "tq2_0", "tq1_0", "q1_0", "q2_0", "q4_0", "q8_0", "q4_k", "q6_k", "f16", "bf16", "f32"}));
    cmd->add_option("--embd-type", args->embd_type,
                    "type of the embedding and LM head (default: f16 for BitNet shapes, llama-quantize's choice otherwise)")
        ->check(one_of({"f16", "f32", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}));
    cmd->add_option("--vocab", args->vocab,
                    "tokenizer.json for bitnet-2b4t, llama-3.2-1b or qwen3-1.7b (default: the npm copy scripts/setup.sh installs)")
        ->check(readable_file());
    cmd->add_option("--layers", args->layers, "write only this many layers (0 = the shape's; quick tests)")
        ->check(int_in(0, 4096));
    cmd->add_flag("--list", args->list, "list the shapes");
    cmd->footer("Example: tern synth tiny -o tiny.gguf --seed 1\n"
                "         tern synth bitnet-2b4t -o synth-2b4t.gguf      (1.2 GB, the shape of BitNet b1.58 2B4T)");
    cmd->callback([args] { synth(*args); });
}

}  // namespace tern::cli
