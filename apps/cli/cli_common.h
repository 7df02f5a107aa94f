// Shared pieces of the `tern` subcommands: option groups declared once (so --help and validation
// agree), model loading with a timing line, and prompt reading.
#pragma once

#include "backend/backend.h"
#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace tern::cli {

// The model tern ships (share/models/, see its MODEL.md): used when -m is not given.
constexpr const char * k_default_model_name = "tern-32m-en.gguf";
// $TERN_MODEL if set, else share/models/<k_default_model_name> next to the build or install tree.
std::string default_model_path();

struct ModelArgs {
    std::string model;         // -m (empty: the default model)
    int         threads = 0;   // -t, 0 = all hardware threads
    std::string backend = "cpu";  // --backend: cpu, webgpu or auto
};

struct ContextArgs {
    int64_t     n_ctx   = 0;      // -c, 0 = the model's context_length
    int64_t     n_batch = 512;    // -b
    std::string cache_type_k = "f16";
    std::string cache_type_v = "f16";
};

void add_model_args(CLI::App & app, ModelArgs & args);
void add_context_args(CLI::App & app, ContextArgs & args);
void add_sampler_args(CLI::App & app, SamplerParams & params);

// The backend named by --backend. "auto" takes a real GPU through WebGPU when there is one and the
// CPU otherwise; `note` then says which and why (one line for stderr). "webgpu" throws
// Error(device) when there is no usable GPU adapter.
struct BackendChoice {
    std::unique_ptr<Backend> backend;
    std::string              note;
};
BackendChoice make_backend(const ModelArgs & args);

// A loaded model with everything needed to run it. Members are declared in dependency order.
struct LoadedModel {
    std::unique_ptr<GgufFile>    file;
    std::unique_ptr<Backend>     backend;
    std::unique_ptr<BitnetModel> model;
    std::unique_ptr<Tokenizer>   tokenizer;
    double                       load_ms = 0;
};

// Opens, validates and uploads the model; prints one line about it (and a note for synthetic
// models) to stderr unless quiet.
LoadedModel load_model(const ModelArgs & args, bool quiet = false);
// Only the file and its tokenizer (tokenize, inspect).
std::unique_ptr<GgufFile> open_model_file(const std::string & path);

SessionOptions session_options(const ContextArgs & args, const BitnetModel & model);

// The prompt from -p or -f (exactly one may be given; empty if neither and !required).
std::string read_prompt(const std::string & prompt, const std::string & file, bool required);

// "1.23 GB", "456.7 MB".
std::string human_bytes(double bytes);

}  // namespace tern::cli
