// Shared pieces of the `tern` subcommands: option groups declared once (so --help and validation
// agree), model loading with one line about the model, the context size rule, and prompt reading.
#pragma once

#include "backend/backend.h"
#include "core/progress.h"
#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

namespace tern::cli {

// The model tern ships (share/models/, see its MODEL.md): used when -m is not given.
constexpr const char * k_default_model_name = "tern-32m-en.gguf";
// $TERN_MODEL if set, else share/models/<k_default_model_name> next to the build or install tree.
std::string default_model_path();

// The context a session gets without -c: the model's trained context, at most this (llama.cpp's
// default), so that a file claiming a huge context does not allocate gigabytes of KV cache.
constexpr int64_t k_default_max_context = 4096;

struct ModelArgs {
    std::string   model;                   // -m (empty: the default model)
    int           threads = 0;             // -t, 0 = all hardware threads
    int           threads_batch = 0;       // -tb (llama.cpp): accepted; tern uses -t for prompts too
    std::string   backend = "cpu";         // --backend: cpu, webgpu or auto
    CLI::Option * backend_option = nullptr;  // to tell "--backend cpu" from the default
    std::optional<int> n_gpu_layers;       // -ngl (llama.cpp): > 0 picks the GPU, 0 the CPU
    std::string   flash_attn;              // -fa on|off|auto (llama.cpp): accepted with a note
};

struct ContextArgs {
    int64_t     n_ctx    = 0;    // -c, 0 = min(the model's context_length, k_default_max_context)
    int64_t     n_batch  = 512;  // -b
    int64_t     n_ubatch = 0;    // -ub (llama.cpp's physical batch), 0 = not given; tern evaluates min(b, ub)
    std::string cache_type_k = "f16";
    std::string cache_type_v = "f16";
};

void add_model_args(CLI::App & app, ModelArgs & args);
void add_context_args(CLI::App & app, ContextArgs & args);
// The sampling flags; --seed goes to `seed_text` (parse_seed turns it into params.seed).
void add_sampler_args(CLI::App & app, SamplerParams & params, std::string & seed_text);
// validate(params) plus the seed: -1 means random.
void finish_sampler_params(SamplerParams & params, const std::string & seed_text);

// The backend named by --backend (or -ngl). "auto" takes a real GPU through WebGPU when there is
// one and the CPU otherwise; `note` then says which and why (one line for stderr). "webgpu" throws
// Error(device) when there is no usable GPU adapter.
struct BackendChoice {
    std::unique_ptr<Backend> backend;
    std::string              note;
};
// `pipeline_list`: the WebGPU backend's list of the pipelines to build ahead (pipeline_list_path).
BackendChoice make_backend(const ModelArgs & args, int64_t n_layer, const std::string & pipeline_list = {});

// tern's cache folder: $TERN_CACHE_DIR (set but empty: none), else $XDG_CACHE_HOME/tern, else
// ~/.cache/tern; "" when there is none.
std::string tern_cache_dir();
// The file that lists the pipelines runs of the model file `path` (of `size` bytes) used on the GPU:
// <cache>/pipelines/<hash of the absolute path and size>.txt; "" without a cache folder.
std::string pipeline_list_path(const std::string & path, uint64_t size);

// A loaded model with everything needed to run it. Members are declared in dependency order.
struct LoadedModel {
    std::unique_ptr<GgufFile>    file;
    std::unique_ptr<Backend>     backend;
    std::unique_ptr<BitnetModel> model;
    std::unique_ptr<Tokenizer>   tokenizer;
    std::string                  path;
    double                       load_ms = 0;
};

// Opens, validates and uploads the model; prints one line about it (and notes: synthetic weights,
// llama.cpp flags that change nothing, -t above the core count) to stderr unless quiet.
LoadedModel load_model(const ModelArgs & args, bool quiet = false);
// Only the file (tokenize, inspect): path may be empty (the default model).
std::unique_ptr<GgufFile> open_model_file(const std::string & path, const GgufReadOptions & options = {});
// The -m path, or the default model's (Error(io) when it is missing).
std::string model_path_or_default(const std::string & path);

// The session's context and batch: -c, or min(trained context, k_default_max_context); warns when
// -c exceeds the trained context. `note` gets a short description for the command's log line, e.g.
// "context 4096 (trained 8192; -c raises it)".
SessionOptions session_options(const ContextArgs & args, const BitnetModel & model, std::string * note = nullptr);

// The prompt from -p or -f (exactly one may be given; empty if neither and !required).
std::string read_prompt(const std::string & prompt, const std::string & file, bool required);

// "1.23 GB", "456.7 MB".
std::string human_bytes(double bytes);

// Whether stderr is a terminal (progress and spinners draw only then).
bool stderr_is_terminal();

// A progress bar on stderr while a session evaluates a long prompt (drawn only on a terminal and
// only once the prompt has taken a second), erased when the scope ends. after_batch (optional) runs
// after every batch; it may throw to abandon the prompt (chat's Ctrl-C).
class PromptProgress {
public:
    explicit PromptProgress(Session & session, std::string label = "processing prompt",
                            std::function<void()> after_batch = {});
    ~PromptProgress();
    PromptProgress(const PromptProgress &)             = delete;
    PromptProgress & operator=(const PromptProgress &) = delete;

private:
    Session &                    session_;
    std::string                  label_;
    std::function<void()>        after_batch_;
    std::unique_ptr<ProgressBar> bar_;
};

// Text that may hold any byte (a NUL from a prompt file) to a stream, as is.
void write_text(FILE * stream, std::string_view text);

}  // namespace tern::cli
