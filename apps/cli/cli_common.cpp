// Option groups, model loading and prompt reading for the subcommands.
#include "cli_common.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#ifdef TERN_HAS_WEBGPU
#include "backend/webgpu/webgpu_backend.h"
#endif
#include "core/mmap.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace tern::cli {

std::string default_model_path() {
    if (const char * env = std::getenv("TERN_MODEL"); env && *env) return env;
    // Next to the executable: <prefix>/bin/tern -> <prefix>/share/models (install tree and build/bin).
    std::error_code ec;
    const auto      exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        for (const auto & rel : {"../share/models", "../../share/models", "../share/tern/models"}) {
            const auto p = exe.parent_path() / rel / k_default_model_name;
            if (std::filesystem::exists(p, ec)) return std::filesystem::weakly_canonical(p, ec).string();
        }
    }
    return std::string(TERN_SOURCE_DIR) + "/share/models/" + k_default_model_name;
}

void add_model_args(CLI::App & app, ModelArgs & args) {
    app.add_option("-m,--model", args.model,
                   std::string("model file (GGUF); default: tern's own ") + k_default_model_name +
                       " (a small BitNet b1.58 trained on Moby Dick and State of the Union addresses; "
                       "$TERN_MODEL overrides)")
        ->check(CLI::ExistingFile);
    app.add_option("-t,--threads", args.threads, "CPU threads (0 = all hardware threads)")
        ->check(CLI::Range(0, 1024))->capture_default_str();
    app.add_option("--backend", args.backend,
                   "compute backend: cpu, webgpu (a GPU through WebGPU; a CPU-only adapter such as SwiftShader "
                   "needs TERN_WEBGPU_ALLOW_CPU=1), or auto (webgpu on a real GPU, else cpu)")
        ->check(CLI::IsMember({"cpu", "webgpu", "auto"}))
        ->capture_default_str();
}

void add_context_args(CLI::App & app, ContextArgs & args) {
    app.add_option("-c,--ctx-size", args.n_ctx, "context size in tokens (0 = the model's trained context)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))->capture_default_str();
    app.add_option("-b,--batch-size", args.n_batch, "tokens per forward pass while reading the prompt")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))->capture_default_str();
    app.add_option("--cache-type-k", args.cache_type_k, "KV cache type for K: f16 (as bitnet.cpp) or f32 (exact)")
        ->check(CLI::IsMember({"f16", "f32"}))->capture_default_str();
    app.add_option("--cache-type-v", args.cache_type_v, "KV cache type for V: f16 or f32")
        ->check(CLI::IsMember({"f16", "f32"}))->capture_default_str();
}

void add_sampler_args(CLI::App & app, SamplerParams & p) {
    app.add_option("--temp", p.temp, "temperature (0 = greedy)")->capture_default_str();
    app.add_option("--top-k", p.top_k, "top-k sampling (0 = off)")->capture_default_str();
    app.add_option("--top-p", p.top_p, "top-p sampling (1 = off)")->capture_default_str();
    app.add_option("--min-p", p.min_p, "min-p sampling (0 = off)")->capture_default_str();
    app.add_option("--repeat-penalty", p.repeat_penalty, "repetition penalty (1 = off)")->capture_default_str();
    app.add_option("--repeat-last-n", p.repeat_last_n, "tokens the penalties look back at (0 = none, -1 = all)")
        ->capture_default_str();
    app.add_option("--presence-penalty", p.presence_penalty, "presence penalty (0 = off)")->capture_default_str();
    app.add_option("--frequency-penalty", p.frequency_penalty, "frequency penalty (0 = off)")->capture_default_str();
    app.add_option("-s,--seed", p.seed, "random seed (4294967295 = pick one)")->capture_default_str();
}

std::unique_ptr<GgufFile> open_model_file(const std::string & path) {
    return std::make_unique<GgufFile>(with_context(format("cannot load model '%s'", path.c_str()), [&] {
        return GgufFile::open(path);
    }));
}

BackendChoice make_backend(const ModelArgs & args) {
    BackendChoice c;
    if (args.backend == "cpu") {
        c.backend = make_cpu_backend({args.threads});
        return c;
    }
    if (args.backend != "webgpu" && args.backend != "auto") {
        fail(ErrorKind::invalid_argument, format("unknown backend '%s'", args.backend.c_str()),
             "use --backend cpu, webgpu or auto");
    }
#ifdef TERN_HAS_WEBGPU
    if (args.backend == "webgpu") {
        c.backend = make_webgpu_backend({});  // Error(device) with the reason and a hint
        return c;
    }
    // auto: a real GPU adapter if there is one, else the CPU, saying why.
    const WgpuProbe probe = probe_webgpu_adapter();
    if (probe.adapter && !probe.adapter->is_cpu) {
        try {
            c.backend = make_webgpu_backend({});
            c.note    = format("backend auto -> webgpu (%s, %s)", probe.adapter->name.c_str(),
                               probe.adapter->backend.c_str());
            return c;
        } catch (const Error & e) {
            c.note = format("backend auto -> cpu (WebGPU adapter '%s' failed: %s)", probe.adapter->name.c_str(), e.what());
        }
    } else if (probe.adapter) {
        c.note = format("backend auto -> cpu (the only WebGPU adapter, '%s', runs on the CPU)",
                        probe.adapter->name.c_str());
    } else {
        c.note = "backend auto -> cpu (" + probe.reason + ")";
    }
#else
    if (args.backend == "webgpu") {
        fail(ErrorKind::unsupported, "this build of tern has no WebGPU backend",
             "reconfigure with -DTERN_WEBGPU=ON, or use --backend cpu");
    }
    c.note = "backend auto -> cpu (this build has no WebGPU backend)";
#endif
    c.backend = make_cpu_backend({args.threads});
    return c;
}

LoadedModel load_model(const ModelArgs & args_in, bool quiet) {
    using clock = std::chrono::steady_clock;
    const auto  t0   = clock::now();
    ModelArgs   args = args_in;
    if (args.model.empty()) {
        args.model = default_model_path();
        if (!std::filesystem::exists(args.model)) {
            fail(ErrorKind::io, format("no -m given, and the default model '%s' is missing", args.model.c_str()),
                 "pass a model with -m FILE.gguf, or set TERN_MODEL");
        }
    }
    LoadedModel m;
    m.file = open_model_file(args.model);
    BackendChoice choice = make_backend(args);
    m.backend            = std::move(choice.backend);
    with_context(format("cannot load model '%s'", args.model.c_str()), [&] {
        m.model     = BitnetModel::load(*m.file, *m.backend);
        m.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*m.file));
        if (m.tokenizer->n_vocab() != m.model->config().n_vocab) {
            fail(ErrorKind::invalid_model, format("the tokenizer has %d tokens but the model has %lld embedding rows",
                                                  m.tokenizer->n_vocab(),
                                                  static_cast<long long>(m.model->config().n_vocab)));
        }
    });
    m.load_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (!quiet) {
        const ModelConfig & c = m.model->config();
        std::fprintf(stderr, "tern: %s (%s, %lld layers, n_embd %lld, %s) on %s\n",
                     c.name.empty() ? args.model.c_str() : c.name.c_str(), c.arch.c_str(),
                     static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd),
                     human_bytes(static_cast<double>(m.file->file_size())).c_str(),
                     m.backend->device_info().description.c_str());
        if (!choice.note.empty()) std::fprintf(stderr, "tern: %s\n", choice.note.c_str());
        if (c.synthetic) {
            std::fprintf(stderr, "note: this model has random weights (made by `tern synth`); its text is meaningless\n");
        }
    }
    return m;
}

SessionOptions session_options(const ContextArgs & args, const BitnetModel & model) {
    SessionOptions o;
    o.n_ctx   = args.n_ctx > 0 ? args.n_ctx : model.config().n_ctx_train;
    o.n_batch = args.n_batch;
    o.type_k  = args.cache_type_k == "f32" ? DType::f32 : DType::f16;
    o.type_v  = args.cache_type_v == "f32" ? DType::f32 : DType::f16;
    return o;
}

std::string read_prompt(const std::string & prompt, const std::string & file, bool required) {
    if (!prompt.empty() && !file.empty()) {
        fail(ErrorKind::invalid_argument, "give the prompt with -p or -f, not both");
    }
    if (!file.empty()) return read_file_text(file);
    if (prompt.empty() && required) fail(ErrorKind::invalid_argument, "no input: give -p TEXT or -f FILE");
    return prompt;
}

std::string human_bytes(double bytes) {
    if (bytes >= 1e9) return format("%.2f GB", bytes / 1e9);
    if (bytes >= 1e6) return format("%.1f MB", bytes / 1e6);
    if (bytes >= 1e3) return format("%.1f kB", bytes / 1e3);
    return format("%.0f B", bytes);
}

}  // namespace tern::cli
