// WebEngine: the engine as the browser build drives it (apps/web/tern_web.cpp exports it to
// JavaScript). generate() runs tern::generate (engine/session.h), the loop `tern run` runs: the
// prompt, then greedy decoding on the device (Session::decode_greedy: ids come back in batches while
// the device runs ahead) or sampling (on the device where the backend samples the chain, else from
// each step's logits), each token handed to a callback as it comes. In a Web Worker that callback is
// a JavaScript import which, under JSPI, suspends the WebAssembly stack while the worker posts the
// token and yields to its event loop, which is how "stop" gets in (web/worker.js).
#pragma once

#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "sampler/sampler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tern::web {

struct GenerateParams {
    SamplerParams sampling;
    int64_t       n_predict = 128;  // < 0: until end of text or a full context
    int64_t       n_ctx     = 0;    // <= 0: the model's training context
    bool          chat      = false;  // the prompt is one user message in the model's chat format
};

// Throws Error(unsupported) when a file of file_bytes cannot be loaded on `backend` for want of
// WebAssembly memory (the CPU backend holds the whole file in the heap; WebGPU streams it).
void check_fits(uint64_t file_bytes, const std::string & backend);

class WebEngine {
public:
    // Loads a GGUF file (in the wasm build's file system: in memory, a File or Blob, or a host file
    // under Node) on `backend`: "cpu" (the reference kernels, one thread; the whole file in the
    // heap, so it must fit it) or "webgpu" (navigator.gpu through web/webgpu-library.js; a software
    // adapter such as SwiftShader only with allow_cpu_adapter; the file is read a layer at a time,
    // GgufFile::open_streamed, so it may be larger than the heap; progress(bytes read, all tensor
    // bytes) after each tensor). Throws Error naming the file on a bad model or one that cannot fit
    // the heap, or Error(device) when WebGPU is unavailable.
    using LoadProgress = std::function<void(uint64_t done, uint64_t total)>;
    WebEngine(const std::string & path, const std::string & backend, bool allow_cpu_adapter,
              const LoadProgress & progress = {});

    const std::string & backend_description() const { return backend_description_; }
    // The model's chat format (chat_template.h: from tokenizer.chat_template or the vocabulary);
    // none for a text-continuation model or a template tern does not recognise.
    ChatTemplate chat_template() const { return chat_; }

    const ModelConfig & config() const { return model_->config(); }
    const Tokenizer &   tokenizer() const { return *tokenizer_; }
    uint64_t            file_size() const { return file_->file_size(); }

    // Tokenizes `prompt` (BOS added, special-token text parsed, as `tern run` does; with params.chat,
    // a one-message conversation in the chat format with the assistant's header, as `tern chat`'s
    // first turn, and the format's end-of-turn marker also stops), validates the settings, and
    // generates as `tern run` does (the first generation on each decoding path warms it up first, as
    // `tern run` does before its prompt). on_token(id, text) gets each token with the text that
    // became complete with it (possibly empty inside a UTF-8 sequence), then once (-1, rest) if text
    // was still pending; it returns false to stop. Throws Error.
    struct Result {
        GenerationStats stats;
        bool            stopped = false;  // on_token returned false
        // How the ids were chosen: "greedy on the device", "sampled on the device", "sampled on the
        // host from each step's logits" (the chain has penalties, or the device cannot sample it), or
        // "on the CPU" (the CPU backend).
        const char *    decoding = "";
        // Of stats.generate_ms, the host's time recording and submitting decode steps (not waiting for
        // the device: Session::take_encode_seconds); near decode_ms, the host is the bottleneck.
        double          host_ms = 0;
    };
    Result generate(const std::string & prompt, const GenerateParams & params, const TokenCallback & on_token);

    // On a GPU, run before the first request, as `tern run` does before its prompt, so that the
    // first request pays for no compiles: the decode kernels (Session::warm_up, greedy and the
    // default sampling chain) on a session of the model's training context (at most
    // k_warm_up_max_ctx), then on a hardware
    // adapter a short and a long prompt's kernels and k_warm_up_tier_steps decode steps (V8
    // compiles the hot code with its optimizing tier meanwhile). tern_web_load calls it.
    void   warm_up_at_load();
    double warm_up_ms() const { return warm_up_ms_; }

private:
    static constexpr const char * k_warm_up_text        = "Once upon a time, in a land far away, there lived";
    static constexpr int64_t      k_warm_up_short_prompt = 5;
    static constexpr int64_t      k_warm_up_long_prompt  = 40;  // over gemm_min_tokens and 32 (the GEMM's tiles)
    static constexpr int64_t      k_warm_up_tier_steps   = 96;  // three batches of decode_greedy
    static constexpr int64_t      k_warm_up_max_ctx      = 4096;

    // Makes the session of n_ctx positions (a new one if the context differs) and rewinds it.
    void use_session(int64_t n_ctx);
    // Session::warm_up for the sampler's decoding path unless it ran on this session.
    void warm_up(const Sampler & sampler);
    bool samples_on_device(const Sampler & sampler) const;  // the chain runs on the device

    std::unique_ptr<GgufFile>         file_;
    std::unique_ptr<Backend>          backend_;
    std::unique_ptr<BitnetModel>      model_;
    std::unique_ptr<Tokenizer>        tokenizer_;
    std::unique_ptr<Session>          session_;
    std::string                       backend_description_;
    ChatTemplate                      chat_ = ChatTemplate::none;
    int64_t n_ctx_session_ = 0;      // the context the current session was made with
    bool    warmed_greedy_  = false;  // the decoding paths warmed up on this session
    bool    warmed_sampled_ = false;
    double  warm_up_ms_     = 0;
};

}  // namespace tern::web
