// The C functions the browser build exports to JavaScript (web/tern-engine.js wraps them).
// One engine per WebAssembly instance. Every function catches tern::Error at this boundary:
// it returns -1 (or 0 for a pointer) and tern_web_error() gives the message and hint.
// Strings go in as UTF-8 C strings and come out as pointers into memory the engine owns, valid
// until the next call.
#include "web_engine.h"

#include "core/error.h"

#include <emscripten/emscripten.h>

#include <cmath>
#include <memory>
#include <new>
#include <string>

namespace {

std::unique_ptr<tern::web::WebEngine> g_engine;
tern::web::GenerateParams             g_params;
std::string                           g_error, g_json, g_stats;

template <typename Fn>
int guarded(Fn && fn) {
    try {
        return fn();
    } catch (const tern::Error & e) {
        g_error = e.what();
        if (!e.hint().empty()) g_error += "\nhint: " + e.hint();
    } catch (const std::bad_alloc &) {
        g_error = "out of memory (the WebAssembly heap is limited to 4 GB)";
    } catch (const std::exception & e) {
        g_error = std::string("internal error: ") + e.what();
    }
    return -1;
}

std::string json_escape(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            out += tern::format("\\u%04x", c);
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

tern::web::WebEngine & engine() {
    if (!g_engine) tern::fail(tern::ErrorKind::invalid_argument, "no model is loaded", "call loadModel() first");
    return *g_engine;
}

}  // namespace

extern "C" {

// Implemented in JavaScript (web/engine-library.js): takes one generated token (id -1: text that was
// still pending at the end) and returns 0 to stop. Under JSPI it suspends while the worker yields.
int tern_web_token(int32_t id, const char * text, size_t n_bytes);
// Implemented in JavaScript too: bytes of weights read so far of all, while a model loads.
void tern_web_progress(double done, double total);

EMSCRIPTEN_KEEPALIVE const char * tern_web_error() { return g_error.c_str(); }

// Loads the GGUF file at `path` in the module's file system on `backend` ("cpu" or "webgpu";
// allow_cpu_adapter: accept a software WebGPU adapter), replacing any loaded model, and on a GPU warms
// it up (WebEngine::warm_up_at_load: the first request compiles nothing). A WebGPU load reports its
// progress through the JavaScript import tern_web_progress.
EMSCRIPTEN_KEEPALIVE int tern_web_load(const char * path, const char * backend, int allow_cpu_adapter) {
    return guarded([&] {
        g_engine.reset();
        g_engine = std::make_unique<tern::web::WebEngine>(
            path, backend, allow_cpu_adapter != 0,
            [](uint64_t done, uint64_t total) { tern_web_progress(static_cast<double>(done), static_cast<double>(total)); });
        try {
            g_engine->warm_up_at_load();
        } catch (...) {
            g_engine.reset();  // a failed load leaves no model, as JavaScript's loadModel assumes
            throw;
        }
        return 0;
    });
}

// Drops the loaded model with its backend: the GPU's buffers and the device are destroyed, after the
// work still queued ran (under JSPI the wait suspends). Nothing loaded: nothing to do.
EMSCRIPTEN_KEEPALIVE int tern_web_unload() {
    return guarded([&] {
        g_engine.reset();
        return 0;
    });
}

// 0 when a file of `n_bytes` can be loaded on `backend` as far as memory goes, else -1 (the message
// in tern_web_error): JavaScript asks before it reads a large File or Blob into memory.
EMSCRIPTEN_KEEPALIVE int tern_web_check_fits(double n_bytes, const char * backend) {
    return guarded([&] {
        tern::web::check_fits(static_cast<uint64_t>(n_bytes), backend);
        return 0;
    });
}

// The loaded model as JSON: {"name","arch","n_layer","n_embd","n_vocab","n_ctx_train","file_bytes",
// "synthetic","backend","chat_template","warm_up_ms" (of the load: WebEngine::warm_up_at_load)}.
EMSCRIPTEN_KEEPALIVE const char * tern_web_model_info() {
    if (guarded([] {
            const tern::ModelConfig & c = engine().config();
            g_json = tern::format(R"({"name":"%s","arch":"%s","n_layer":%lld,"n_embd":%lld,"n_vocab":%lld,)"
                                  R"("n_ctx_train":%lld,"file_bytes":%llu,"synthetic":%s,"backend":"%s","chat_template":"%s",)"
                                  R"("warm_up_ms":%.1f})",
                                  json_escape(c.name).c_str(), json_escape(c.arch).c_str(),
                                  static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd),
                                  static_cast<long long>(c.n_vocab), static_cast<long long>(c.n_ctx_train),
                                  static_cast<unsigned long long>(engine().file_size()), c.synthetic ? "true" : "false",
                                  json_escape(engine().backend_description()).c_str(),
                                  std::string(tern::chat_template_name(engine().chat_template())).c_str(),
                                  engine().warm_up_ms());
            return 0;
        }) != 0) {
        return nullptr;
    }
    return g_json.c_str();
}

// Sampler settings for the next tern_web_start (llama.cpp's meanings; see sampler/sampler.h).
// seed < 0: a random seed. chat != 0: the prompt is a user message in the model's chat format.
EMSCRIPTEN_KEEPALIVE void tern_web_set_params(double temp, int top_k, double top_p, double min_p,
                                              double repeat_penalty, int repeat_last_n, double seed,
                                              double n_predict, double n_ctx, int chat) {
    tern::SamplerParams & s = g_params.sampling;
    s.temp           = static_cast<float>(temp);
    s.top_k          = top_k;
    s.top_p          = static_cast<float>(top_p);
    s.min_p          = static_cast<float>(min_p);
    s.repeat_penalty = static_cast<float>(repeat_penalty);
    s.repeat_last_n  = repeat_last_n;
    s.seed = seed < 0 || !std::isfinite(seed) ? tern::k_sampler_random_seed : static_cast<uint64_t>(seed);
    g_params.n_predict = static_cast<int64_t>(n_predict);
    g_params.n_ctx     = static_cast<int64_t>(n_ctx);
    g_params.chat      = chat != 0;
}

// Generates for `prompt` with the settings of tern_web_set_params (WebEngine::generate: `tern
// run`'s loop), handing each token to the JavaScript import tern_web_token (web/engine-library.js)
// as it comes. Returns the number of tokens generated, or -1; tern_web_stats() describes the run.
EMSCRIPTEN_KEEPALIVE int tern_web_generate(const char * prompt) {
    return guarded([&] {
        const tern::web::WebEngine::Result r =
            engine().generate(prompt, g_params, [](int32_t id, const std::string & text) {
                return tern_web_token(id, text.data(), text.size()) != 0;
            });
        const tern::GenerationStats & s = r.stats;
        g_stats = tern::format(R"({"n_prompt":%lld,"n_generated":%lld,"prompt_ms":%.3f,"generate_ms":%.3f,)"
                              R"("decode_ms":%.3f,"host_ms":%.3f,"stopped_by_eog":%s,"stopped":%s,"decoding":"%s"})",
                              static_cast<long long>(s.n_prompt), static_cast<long long>(s.n_generated), s.prompt_ms,
                              s.generate_ms, s.decode_ms, r.host_ms, s.stopped_by_eog ? "true" : "false",
                              r.stopped ? "true" : "false", r.decoding);
        return static_cast<int>(s.n_generated);
    });
}

// The last tern_web_generate as JSON: {"n_prompt","n_generated","prompt_ms","generate_ms",
// "decode_ms" (tokens 2..n, as `tern run` reports), "host_ms" (of generate_ms, recording and submitting
// decode steps: WebEngine::Result::host_ms), "stopped_by_eog","stopped","decoding" (WebEngine::Result)}.
EMSCRIPTEN_KEEPALIVE const char * tern_web_stats() { return g_stats.c_str(); }

// Token ids of `text` as a JSON array (BOS added, special tokens parsed), or nullptr.
EMSCRIPTEN_KEEPALIVE const char * tern_web_tokenize(const char * text) {
    if (guarded([&] {
            g_json = "[";
            for (int32_t id : engine().tokenizer().encode(text, true, true)) {
                if (g_json.size() > 1) g_json += ',';
                g_json += std::to_string(id);
            }
            g_json += ']';
            return 0;
        }) != 0) {
        return nullptr;
    }
    return g_json.c_str();
}

}  // extern "C"
