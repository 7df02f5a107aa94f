// `tern inspect`: metadata, tensors (type, shape, bytes) and the derived model configuration. A
// truncated file still shows what it holds, then fails (exit 1) saying where it ends.
#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"

#include "core/error.h"
#include "core/utf8.h"
#include "model/model_config.h"

#include <cstdio>

namespace tern::cli {
namespace {

struct InspectArgs {
    std::string model;
    bool        all_tensors = false;
};

void inspect(const InspectArgs & a) {
    GgufReadOptions options;
    options.partial = true;  // a file cut short: show what is complete, and say so
    const auto f = open_model_file(a.model, options);
    std::printf("file: %s (%s), GGUF v%u, alignment %u, %zu metadata keys, %zu tensors%s\n\n", f->path().c_str(),
                human_bytes(static_cast<double>(f->file_size())).c_str(), f->version(), f->alignment(), f->kvs().size(),
                f->tensors().size(), f->truncation().empty() ? "" : " read before the file ends");
    std::printf("metadata:\n");
    for (const auto & kv : f->kvs()) {
        std::printf("  %-48s %s\n", printable(kv.key).c_str(), GgufFile::describe(kv.value).c_str());
    }
    std::printf("\ntensors:\n  %-36s %-6s %-22s %12s\n", "name", "type", "shape (ne0 first)", "bytes");
    size_t total = 0, shown = 0;
    for (const auto & t : f->tensors()) {
        total += t.n_bytes;
        const bool layer = t.name.starts_with("blk.");
        if (layer && !a.all_tensors && !t.name.starts_with("blk.0.")) continue;
        std::string shape = "[";
        for (uint32_t d = 0; d < t.n_dims; ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
        shape += "]";
        std::printf("  %-36s %-6s %-22s %12zu\n", printable(t.name).c_str(), std::string(dtype_name(t.type)).c_str(),
                    shape.c_str(), t.n_bytes);
        ++shown;
    }
    if (shown < f->tensors().size()) {
        std::printf("  ... %zu more (layers 1.. have the same tensors; --all shows them)\n", f->tensors().size() - shown);
    }
    std::printf("  total tensor data: %s\n\n", human_bytes(static_cast<double>(total)).c_str());
    if (!f->truncation().empty()) {  // shown what it holds; still an error, so scripts notice
        std::fflush(stdout);
        fail(ErrorKind::invalid_model, format("'%s' is incomplete: %s", f->path().c_str(), f->truncation().c_str()),
                 "the metadata and tensors above are what the file holds before it ends; the download or copy "
                 "may be incomplete: compare the file size with the original");
    }
    try {
        const ModelConfig c = read_model_config(*f);
        std::printf("model: %s%s\n", printable(c.arch).c_str(), c.synthetic ? " (synthetic: random weights)" : "");
        std::printf("  n_vocab %lld, n_ctx_train %lld, n_embd %lld, n_layer %lld, n_ff %lld\n",
                    static_cast<long long>(c.n_vocab), static_cast<long long>(c.n_ctx_train),
                    static_cast<long long>(c.n_embd), static_cast<long long>(c.n_layer), static_cast<long long>(c.n_ff));
        std::printf("  n_head %lld, n_head_kv %lld, head_dim %lld, n_rot %lld, rope base %g, rms eps %g, ffn %s\n",
                    static_cast<long long>(c.n_head), static_cast<long long>(c.n_head_kv),
                    static_cast<long long>(c.head_dim), static_cast<long long>(c.n_rot),
                    static_cast<double>(c.rope_freq_base), static_cast<double>(c.norm_eps),
                    c.ffn_act == FfnActivation::relu2 ? "relu2" : "silu");
        std::printf("  LM head: %s\n", f->find_tensor("output.weight") ? "output.weight" : "tied to token_embd.weight");
    } catch (const Error & e) {
        std::printf("model: not runnable by tern: %s\n", e.what());
    }
}

}  // namespace

void register_inspect(CLI::App & app) {
    auto   args = std::make_shared<InspectArgs>();
    auto * cmd  = app.add_subcommand("inspect", "show a GGUF file's metadata, tensors and model configuration");
    cmd->add_option("-m,--model,model", args->model, std::string("model file (GGUF); default: ") + k_default_model_name)
        ->check(readable_file());
    cmd->add_flag("--all", args->all_tensors, "list the tensors of every layer, not only layer 0");
    cmd->footer("Example: tern inspect            (tern's default model)\n"
                "         tern inspect -m ggml-model-i2_s.gguf --all");
    cmd->callback([args] { inspect(*args); });
}

}  // namespace tern::cli
