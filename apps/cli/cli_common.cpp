// Option groups, model loading, the context rule and prompt reading for the subcommands.
#include "cli_common.h"

#include "cli_options.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/fnv1a.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "core/utf8.h"
#ifdef TERN_HAS_WEBGPU
#include "backend/webgpu/webgpu_backend.h"
#endif
#include "core/mmap.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <unistd.h>

namespace tern::cli {
namespace {

// Runs fn; an Error gets "cannot load model 'PATH': " in front, unless it names the file already
// (the GGUF reader's messages start with it: no "cannot load model 'x': 'x': ...").
template <typename Fn>
auto with_model_context(const std::string & path, Fn && fn) -> decltype(fn()) {
    try {
        return fn();
    } catch (const Error & e) {
        std::string       m      = e.what();
        const std::string quoted = "'" + path + "'";
        if (m.starts_with(quoted + ": ")) m = m.substr(quoted.size() + 2);
        else if (m.find(quoted) != std::string::npos) throw;
        throw Error(e.kind(), "cannot load model " + quoted + ": " + m, e.hint());
    }
}

}  // namespace

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

std::string model_path_or_default(const std::string & path) {
    if (!path.empty()) return path;
    const std::string p = default_model_path();
    if (!std::filesystem::exists(p)) {
        fail(ErrorKind::io, format("no -m given, and the default model '%s' is missing", p.c_str()),
             "pass a model with -m FILE.gguf, or set TERN_MODEL");
    }
    return p;
}

void add_model_args(CLI::App & app, ModelArgs & args) {
    app.add_option("-m,--model", args.model,
                   std::string("model file (GGUF); default: tern's own ") + k_default_model_name +
                       " (a small BitNet b1.58 trained on Moby Dick and State of the Union addresses; "
                       "$TERN_MODEL overrides)")
        ->check(readable_file());
    app.add_option("-t,--threads", args.threads, "CPU threads (0 = all hardware threads)")
        ->check(int_in(0, 1024))->capture_default_str();
    app.add_option("--threads-batch", args.threads_batch,
                   "llama.cpp's -tb: accepted; tern uses the -t threads for prompt processing too")
        ->check(int_in(0, 1024));
    args.backend_option =
        app.add_option("--backend", args.backend,
                       "compute backend: cpu, webgpu (a GPU through WebGPU; a CPU-only adapter such as SwiftShader "
                       "needs TERN_WEBGPU_ALLOW_CPU=1), or auto (webgpu on a real GPU, else cpu)")
            ->check(one_of({"cpu", "webgpu", "auto"}))
            ->capture_default_str();
    app.add_option("--n-gpu-layers,--gpu-layers", args.n_gpu_layers,
                   "llama.cpp's -ngl: N > 0 (or -1) runs the model on the GPU (as --backend auto: the CPU when there "
                   "is none), 0 on the CPU; tern offloads all layers or none")
        ->check(int_in(-1, 1 << 20));
    app.add_option("--flash-attn", args.flash_attn,
                   "llama.cpp's -fa [on|off|auto]: accepted; tern has one attention implementation per backend")
        ->check(one_of({"on", "off", "auto"}));
}

void add_context_args(CLI::App & app, ContextArgs & args) {
    app.add_option("-c,--ctx-size", args.n_ctx,
                   format("context size in tokens (0 = the model's trained context, at most %lld; a larger -c raises it)",
                          static_cast<long long>(k_default_max_context)))
        ->check(int_in(0, int64_t{1} << 24))->capture_default_str();
    app.add_option("-b,--batch-size", args.n_batch, "tokens per forward pass while reading the prompt")
        ->check(int_in(1, int64_t{1} << 16))->capture_default_str();
    app.add_option("--ubatch-size", args.n_ubatch,
                   "llama.cpp's -ub (physical batch): tern evaluates min(-b, -ub) tokens per forward pass")
        ->check(int_in(1, int64_t{1} << 16));
    const auto kv_type = one_of({"f16", "f32"});
    app.add_option("--cache-type-k", args.cache_type_k, "KV cache type for K (-ctk): f16 (as bitnet.cpp) or f32 (exact)")
        ->check(kv_type)->capture_default_str();
    app.add_option("--cache-type-v", args.cache_type_v, "KV cache type for V (-ctv): f16 or f32")
        ->check(kv_type)->capture_default_str();
}

void add_sampler_args(CLI::App & app, SamplerParams & p, std::string & seed_text) {
    app.add_option("--temp", p.temp, "temperature (0 = greedy)")->check(number_in(0, 1e6))->capture_default_str();
    app.add_option("--top-k", p.top_k, "top-k sampling (0 = off)")->check(int_in(0, 1 << 30))->capture_default_str();
    app.add_option("--top-p", p.top_p, "top-p sampling, in (0, 1] (1 = off)")->check(finite_number())->capture_default_str();
    app.add_option("--min-p", p.min_p, "min-p sampling, in [0, 1] (0 = off)")->check(number_in(0, 1))->capture_default_str();
    app.add_option("--repeat-penalty", p.repeat_penalty, "repetition penalty (1 = off)")->check(finite_number())
        ->capture_default_str();
    app.add_option("--repeat-last-n", p.repeat_last_n, "tokens the penalties look back at (0 = none, -1 = all)")
        ->check(int_in(-1, 1 << 30))->capture_default_str();
    app.add_option("--presence-penalty", p.presence_penalty, "presence penalty (0 = off)")->check(finite_number())
        ->capture_default_str();
    app.add_option("--frequency-penalty", p.frequency_penalty, "frequency penalty (0 = off)")->check(finite_number())
        ->capture_default_str();
    app.add_option("-s,--seed", seed_text, "random seed (-1 = pick one at random, and print it)")->check(seed_value())
        ->default_str("-1");
}

void finish_sampler_params(SamplerParams & p, const std::string & seed_text) {
    p.seed = seed_text.empty() ? k_sampler_random_seed : parse_seed(seed_text);
    validate(p);
}

std::unique_ptr<GgufFile> open_model_file(const std::string & path_in, const GgufReadOptions & options) {
    const std::string path = model_path_or_default(path_in);
    return with_model_context(path, [&] { return std::make_unique<GgufFile>(GgufFile::open(path, options)); });
}

std::string tern_cache_dir() {
    if (const char * dir = std::getenv("TERN_CACHE_DIR")) return dir;
    if (const char * xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') return std::string(xdg) + "/tern";
    if (const char * home = std::getenv("HOME"); home && *home == '/') return std::string(home) + "/.cache/tern";
    return {};
}

std::string pipeline_list_path(const std::string & path, uint64_t size) {
    const std::string dir = tern_cache_dir();
    if (dir.empty()) return {};
    std::error_code   ec;
    const auto        abs  = std::filesystem::absolute(path, ec);
    const std::string what = (ec ? path : abs.string()) + "\n" + std::to_string(size);
    return format("%s/pipelines/%016llx.txt", dir.c_str(), static_cast<unsigned long long>(fnv1a(what)));
}

BackendChoice make_backend(const ModelArgs & args, int64_t n_layer, const std::string & pipeline_list) {
    BackendChoice c;
    std::string   backend = args.backend;
    const bool    explicit_backend = args.backend_option && args.backend_option->count() > 0;
    if (args.n_gpu_layers) {
        const int  ngl = *args.n_gpu_layers;
        const bool gpu = ngl != 0;
        if (explicit_backend) {
            if (gpu != (backend != "cpu")) {
                c.note = format("-ngl %d is ignored: --backend %s decides", ngl, backend.c_str());
            }
        } else {
            backend = gpu ? "auto" : "cpu";
            if (gpu && ngl > 0 && ngl < n_layer) {
                c.note = format("-ngl %d: tern runs all %lld layers on one backend, not some of them", ngl,
                                static_cast<long long>(n_layer));
            }
        }
    }
    auto add_note = [&](const std::string & n) { c.note = c.note.empty() ? n : c.note + "; " + n; };
    if (backend == "cpu") {
        c.backend = make_cpu_backend({args.threads});
        return c;
    }
#ifdef TERN_HAS_WEBGPU
    WebGpuOptions gpu_options;
    gpu_options.pipeline_list = pipeline_list;
    if (const std::string dir = tern_cache_dir(); !dir.empty()) gpu_options.blob_cache_dir = dir + "/dawn";
    if (backend == "webgpu") {
        c.backend = make_webgpu_backend(gpu_options);  // Error(device) with the reason and a hint
        return c;
    }
    // auto: a real GPU adapter if there is one, else the CPU, saying why.
    const WgpuProbe probe = probe_webgpu_adapter();
    if (probe.adapter && !probe.adapter->is_cpu) {
        try {
            c.backend = make_webgpu_backend(gpu_options);
            add_note(format("backend auto -> webgpu (%s, %s)", probe.adapter->name.c_str(), probe.adapter->backend.c_str()));
            return c;
        } catch (const Error & e) {
            add_note(format("backend auto -> cpu (WebGPU adapter '%s' failed: %s)", probe.adapter->name.c_str(), e.what()));
        }
    } else if (probe.adapter) {
        add_note(format("backend auto -> cpu (the only WebGPU adapter, '%s', runs on the CPU)", probe.adapter->name.c_str()));
    } else {
        add_note("backend auto -> cpu (" + probe.reason + ")");
    }
#else
    (void)pipeline_list;
    if (backend == "webgpu") {
        fail(ErrorKind::unsupported, "this build of tern has no WebGPU backend",
             "reconfigure with -DTERN_WEBGPU=ON, or use --backend cpu");
    }
    add_note("backend auto -> cpu (this build has no WebGPU backend)");
#endif
    c.backend = make_cpu_backend({args.threads});
    return c;
}

LoadedModel load_model(const ModelArgs & args, bool quiet) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    LoadedModel m;
    // -v: where the load's time goes.
    auto lap = [t = t0](const char * what) mutable {
        const auto now = clock::now();
        TERN_LOG_INFO("load: %s %.0f ms", what, std::chrono::duration<double, std::milli>(now - t).count());
        t = now;
    };
    m.path = model_path_or_default(args.model);
    m.file = open_model_file(m.path);
    const int64_t n_layer = with_model_context(m.path, [&] { return read_model_config(*m.file).n_layer; });
    lap("opening the file");
    BackendChoice choice = make_backend(args, n_layer, pipeline_list_path(m.path, m.file->file_size()));
    m.backend            = std::move(choice.backend);
    lap("starting the backend");
    with_model_context(m.path, [&] {
        // The tokenizer is built on another thread while the weights load (both only read the file).
        auto tokenizer = std::async(std::launch::async,
                                    [&file = *m.file] { return std::make_unique<Tokenizer>(Tokenizer::from_gguf(file)); });
        m.model = BitnetModel::load(*m.file, *m.backend);
        lap("loading the weights");
        m.tokenizer = tokenizer.get();
        lap("waiting for the tokenizer");
        if (m.tokenizer->n_vocab() != m.model->config().n_vocab) {
            fail(ErrorKind::invalid_model, format("the tokenizer has %d tokens but the model has %lld embedding rows",
                                                  m.tokenizer->n_vocab(),
                                                  static_cast<long long>(m.model->config().n_vocab)));
        }
    });
    m.load_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (quiet) return m;
    const ModelConfig & c = m.model->config();
    std::fprintf(stderr, "tern: %s (%s, %lld layers, n_embd %lld, %s) on %s\n",
                 printable(c.name.empty() ? m.path : c.name).c_str(), printable(c.arch).c_str(),
                 static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd),
                 human_bytes(static_cast<double>(m.file->file_size())).c_str(),
                 m.backend->device_info().description.c_str());
    if (!choice.note.empty()) std::fprintf(stderr, "tern: %s\n", choice.note.c_str());
    if (c.synthetic) {
        std::fprintf(stderr, "note: this model has random weights (made by `tern synth`); its text is meaningless\n");
    }
    const int cores = default_thread_count();
    if (args.threads > cores && m.backend->name() == "cpu") {
        std::fprintf(stderr, "warning: -t %d is more threads than this machine has (%d); that is usually slower\n",
                     args.threads, cores);
    }
    if (args.threads_batch > 0 && args.threads_batch != (args.threads > 0 ? args.threads : cores)) {
        std::fprintf(stderr, "note: -tb %d is ignored: tern uses the -t threads (%d) for prompt processing too\n",
                     args.threads_batch, args.threads > 0 ? args.threads : cores);
    }
    if (args.flash_attn == "off") {
        std::fprintf(stderr, "note: -fa off changes nothing: tern has one attention implementation per backend\n");
    }
    return m;
}

SessionOptions session_options(const ContextArgs & args, const BitnetModel & model, std::string * note) {
    const int64_t  trained = model.config().n_ctx_train;
    SessionOptions o;
    if (args.n_ctx > 0) {
        o.n_ctx = args.n_ctx;
        if (args.n_ctx > trained) {
            std::fprintf(stderr, "warning: -c %lld is above the context the model was trained with (%lld); "
                                 "expect worse text past %lld tokens\n",
                         static_cast<long long>(args.n_ctx), static_cast<long long>(trained), static_cast<long long>(trained));
        }
        if (note) *note = format("context %lld", static_cast<long long>(o.n_ctx));
    } else {
        o.n_ctx = std::min(trained, k_default_max_context);
        if (note) {
            *note = o.n_ctx < trained ? format("context %lld (trained %lld; -c raises it)", static_cast<long long>(o.n_ctx),
                                               static_cast<long long>(trained))
                                      : format("context %lld", static_cast<long long>(o.n_ctx));
        }
    }
    o.n_batch = args.n_ubatch > 0 ? std::min(args.n_batch, args.n_ubatch) : args.n_batch;
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

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) != 0; }

PromptProgress::PromptProgress(Session & session, std::string label, std::function<void()> after_batch)
    : session_(session), label_(std::move(label)), after_batch_(std::move(after_batch)) {
    session_.set_eval_progress([this](int64_t done, int64_t total) {
        if (after_batch_) after_batch_();
        if (done == 0) bar_ = std::make_unique<ProgressBar>(label_, static_cast<uint64_t>(total), true, 1.0);
        if (!bar_) return;
        bar_->update(static_cast<uint64_t>(done));
        bar_->set_suffix(format("%lld/%lld tokens", static_cast<long long>(done), static_cast<long long>(total)));
        if (done >= total) bar_.reset();  // erased: the reply starts on a clean line
    });
}

PromptProgress::~PromptProgress() { session_.set_eval_progress({}); }

void write_text(FILE * stream, std::string_view text) {
    if (!text.empty()) std::fwrite(text.data(), 1, text.size(), stream);
}

}  // namespace tern::cli
