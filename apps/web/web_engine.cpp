// WebEngine: the browser build's engine (see web_engine.h).
#include "web_engine.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/webgpu/webgpu_backend.h"
#include "backend/webgpu/webgpu_backend_impl.h"
#include "core/error.h"

#include <emscripten/heap.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>

namespace tern::web {

namespace {

// The CPU backend maps the whole file into the heap (it keeps pointers into it); what the heap must
// hold besides: the KV cache, buffers and the sampler's scratch.
constexpr uint64_t k_cpu_heap_reserve = uint64_t{512} << 20;

double gigabytes(uint64_t n) { return static_cast<double>(n) / 1e9; }

uint64_t file_bytes(const std::string & path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail(ErrorKind::io, format("cannot open '%s': %s", path.c_str(), std::strerror(errno)));
    return static_cast<uint64_t>(st.st_size);
}

}  // namespace

void check_fits(uint64_t file_bytes, const std::string & backend) {
    const uint64_t heap_max = emscripten_get_heap_max();
    if (backend == "cpu" && file_bytes + k_cpu_heap_reserve > heap_max) {
        fail(ErrorKind::unsupported,
             format("the file is %.2f GB; the CPU backend holds the whole file in WebAssembly memory, which is at "
                    "most %.2f GB (%.2f GB with room to run)", gigabytes(file_bytes), gigabytes(heap_max),
                    gigabytes(heap_max - k_cpu_heap_reserve)),
             "use the WebGPU backend, which reads the file tensor by tensor, or a smaller model");
    }
}

WebEngine::WebEngine(const std::string & path, const std::string & backend, bool allow_cpu_adapter,
                     const LoadProgress & progress) {
    if (backend == "cpu") {
        backend_ = make_cpu_backend({1});  // no threads: the wasm build runs without SharedArrayBuffer
    } else if (backend == "webgpu") {
        WebGpuOptions o;
        o.allow_cpu_adapter = allow_cpu_adapter;
        backend_            = make_webgpu_backend(o);
    } else {
        fail(ErrorKind::invalid_argument, format("unknown backend '%s'", backend.c_str()), "use cpu or webgpu");
    }
    backend_description_ = backend == "cpu" ? "cpu (WebAssembly SIMD128): " + backend_->device_info().description
                                            : backend_->device_info().description;
    const uint64_t heap_max = emscripten_get_heap_max();
    with_context(format("cannot load model '%s'", path.c_str()), [&] {
        const uint64_t size = file_bytes(path);
        check_fits(size, backend);
        try {
            // WebGPU copies every weight to the GPU: the file is read a layer at a time (GgufFile::open_streamed),
            // so the heap never holds it whole.
            if (backend == "webgpu") {
                file_ = std::make_unique<GgufFile>(GgufFile::open_streamed(path));
                if (progress) file_->set_read_progress(progress);
            } else {
                file_ = std::make_unique<GgufFile>(GgufFile::open(path));
            }
            model_ = BitnetModel::load(*file_, *backend_);
        } catch (const std::bad_alloc &) {
            uint64_t largest = 0;
            for (const GgufTensorInfo & t : file_ ? file_->tensors() : std::vector<GgufTensorInfo>{}) {
                largest = std::max<uint64_t>(largest, t.n_bytes);
            }
            fail(ErrorKind::unsupported,
                 format("out of WebAssembly memory (%.2f GB at most) loading a %.2f GB file%s", gigabytes(heap_max),
                        gigabytes(size),
                        largest ? format(" whose largest tensor is %.2f GB", gigabytes(largest)).c_str() : ""),
                 backend == "cpu" ? "use the WebGPU backend, which reads the file tensor by tensor, or a smaller model"
                                  : "use a smaller model");
        }
        tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
        if (tokenizer_->n_vocab() != model_->config().n_vocab) {
            fail(ErrorKind::invalid_model, format("the tokenizer has %d tokens but the model has %lld embedding rows",
                                                  tokenizer_->n_vocab(),
                                                  static_cast<long long>(model_->config().n_vocab)));
        }
    });
    try {
        chat_ = choose_chat_template(*tokenizer_, file_->get_string("tokenizer.chat_template"), std::nullopt).template_;
    } catch (const Error &) {
        chat_ = ChatTemplate::none;  // a template tern does not recognise: text continuation only
    }
}

void WebEngine::use_session(int64_t n_ctx) {
    if (!session_ || n_ctx_session_ != n_ctx) {
        session_.reset();  // free the old KV cache first
        SessionOptions so;
        so.n_ctx        = n_ctx;
        session_        = std::make_unique<Session>(*model_, so);
        n_ctx_session_  = n_ctx;
        warmed_greedy_  = false;
        warmed_sampled_ = false;
    }
    session_->reset();
}

bool WebEngine::samples_on_device(const Sampler & sampler) const {
    return sampler.chain_only() && backend_->samples_on_device(sampler.chain());
}

void WebEngine::warm_up(const Sampler & sampler) {
    const bool sampled_on_device = samples_on_device(sampler);
    if (warmed_greedy_ && (!sampled_on_device || warmed_sampled_)) return;
    session_->warm_up(&sampler);  // compiles the decode kernels now, not inside the first tokens
    warmed_greedy_  = true;
    warmed_sampled_ = warmed_sampled_ || sampled_on_device;
}

void WebEngine::warm_up_at_load() {
    if (!backend_->counts_dispatches()) return;  // the CPU backend has nothing to compile
    const auto t0 = std::chrono::steady_clock::now();
    // The page's default context (the training context), up to k_warm_up_max_ctx: a long-context
    // model's full KV cache is not made at load for a page that may ask for less (a request on
    // another context makes its session, and warms up its positions, with the kernels compiled).
    use_session(std::min<int64_t>(model_->config().n_ctx_train, k_warm_up_max_ctx));
    const Sampler sampler(SamplerParams{}, static_cast<int32_t>(model_->config().n_vocab));  // the default chain
    warm_up(sampler);
    // A software adapter (SwiftShader: tests) compiles quickly and runs a step ~100 times slower
    // than a GPU: the rest would cost its tests seconds and gain nothing.
    const auto * gpu = dynamic_cast<const WebGpuBackend *>(backend_.get());
    if (gpu == nullptr || gpu->context().adapter().is_cpu) {
        warm_up_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return;
    }
    // The prompt's kernels: a short prompt takes the per-token forms, one of gemm_min_tokens or more
    // the GEMMs and prompt attention (webgpu_prefill.cpp); without this the first request's prompt
    // compiles them (~0.9 s for 5 tokens on an H200 under dawn.node).
    std::vector<int32_t> ids = tokenizer_->encode(k_warm_up_text, /*add_bos=*/true, /*parse_special=*/false);
    if (ids.empty()) ids.push_back(0);
    while (static_cast<int64_t>(ids.size()) < k_warm_up_long_prompt) ids.push_back(ids.back());
    for (const int64_t n : {k_warm_up_short_prompt, k_warm_up_long_prompt}) {
        if (n >= n_ctx_session_) continue;
        session_->reset();
        session_->eval(std::span<const int32_t>(ids).first(static_cast<size_t>(n)));
    }
    // Decode steps beyond the warm-up's few, so that the JavaScript engine has compiled the step's
    // hot code (the wasm and the webgpu.h glue) with its optimizing tier before the first request.
    session_->reset();
    if (k_warm_up_tier_steps < n_ctx_session_) {
        session_->decode_greedy(0, k_warm_up_tier_steps, [](int32_t) { return true; });
    }
    backend_->synchronize();
    session_->reset();
    warm_up_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

WebEngine::Result WebEngine::generate(const std::string & prompt, const GenerateParams & params,
                                      const TokenCallback & on_token) {
    validate(params.sampling);
    std::vector<int32_t> ids, stop_ids;
    if (params.chat) {
        if (chat_ == ChatTemplate::none) {
            fail(ErrorKind::unsupported, format("'%s' has no chat format tern recognises", model_->config().name.c_str()),
                 "turn the chat format off to continue text with it");
        }
        ids      = chat_template_tokens(chat_, *tokenizer_, {{"user", prompt}}, /*add_generation_prompt=*/true);
        stop_ids = chat_template_stop_tokens(chat_, *tokenizer_);
    } else {
        ids = tokenizer_->encode(prompt, /*add_bos=*/true, /*parse_special=*/true);
    }
    if (ids.empty()) fail(ErrorKind::invalid_argument, "the prompt is empty and the model adds no BOS token");
    const int64_t n_ctx = params.n_ctx > 0 ? params.n_ctx : model_->config().n_ctx_train;
    if (static_cast<int64_t>(ids.size()) >= n_ctx) {
        fail(ErrorKind::invalid_argument,
             format("the prompt is %zu tokens, but the context holds %lld (and generation needs room)", ids.size(),
                    static_cast<long long>(n_ctx)),
             "raise the context size or shorten the prompt");
    }
    use_session(n_ctx);
    Sampler    sampler(params.sampling, static_cast<int32_t>(model_->config().n_vocab));
    const bool sampled_on_device = samples_on_device(sampler);
    warm_up(sampler);
    Result r;
    // generate()'s own test for the greedy path (engine/session.cpp).
    const SamplerParams & sp = params.sampling;
    const bool plain_greedy  = sp.temp <= 0.0f && sp.repeat_penalty == 1.0f && sp.frequency_penalty == 0.0f &&
                              sp.presence_penalty == 0.0f;
    r.decoding = !backend_->counts_dispatches() ? "on the CPU"
                 : plain_greedy                 ? "greedy on the device"
                 : sampled_on_device            ? "sampled on the device"
                                                : "sampled on the host from each step's logits";
    bool end_of_turn = false;
    session_->take_encode_seconds();
    r.stats = tern::generate(*session_, *tokenizer_, sampler, ids, params.n_predict < 0 ? -1 : params.n_predict,
                             [&](int32_t id, const std::string & text) {
                                 if (id >= 0 && std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) {
                                     end_of_turn = true;  // the chat format's end of turn: not shown
                                     return false;
                                 }
                                 if (end_of_turn && id < 0) return false;
                                 if (!on_token(id, text)) r.stopped = true;
                                 return !r.stopped;
                             });
    r.host_ms = 1e3 * session_->take_encode_seconds();
    if (end_of_turn) {
        r.stats.stopped_by_eog = true;
        r.stats.n_generated -= 1;  // the end-of-turn token was counted as generated
    }
    return r;
}

}  // namespace tern::web
