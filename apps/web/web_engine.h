// WebEngine: the engine as the browser build drives it (apps/web/tern_web.cpp exports it to
// JavaScript). A Web Worker cannot take a "stop" message while a call into WebAssembly runs, so
// generation is pull-based: start() reads the prompt, then each next() produces one token and
// returns, and the worker yields to its event loop between calls. The tokens are generate()'s
// (engine/session.h) for the same model, prompt and sampler settings: the sampler sees the prompt,
// draws from each position's logits, and stops at an end-of-generation token, after n_predict
// tokens, or when the context is full.
#pragma once

#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "sampler/sampler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tern::web {

struct GenerateParams {
    SamplerParams sampling;
    int64_t       n_predict = 128;  // < 0: until end of text or a full context
    int64_t       n_ctx     = 0;    // <= 0: the model's training context
    bool          chat      = false;  // the prompt is one user message in the model's chat format
};

class WebEngine {
public:
    // Loads a GGUF file (the wasm build's in-memory file system holds it) on `backend`: "cpu" (the
    // reference kernels, one thread) or "webgpu" (navigator.gpu through web/webgpu-library.js; a
    // software adapter such as SwiftShader only with allow_cpu_adapter). Throws Error naming the file
    // on a bad model, or Error(device) when WebGPU is unavailable.
    WebEngine(const std::string & path, const std::string & backend, bool allow_cpu_adapter);

    const std::string & backend_description() const { return backend_description_; }
    // The model's chat format (chat_template.h: from tokenizer.chat_template or the vocabulary);
    // none for a text-continuation model or a template tern does not recognise.
    ChatTemplate chat_template() const { return chat_; }

    const ModelConfig & config() const { return model_->config(); }
    const Tokenizer &   tokenizer() const { return *tokenizer_; }
    size_t              file_size() const { return file_->file_size(); }

    // Tokenizes `prompt` (BOS added, special-token text parsed, as `tern run` does; with params.chat,
    // a one-message conversation in the chat format with the assistant's header, as `tern chat`'s
    // first turn, and the format's end-of-turn marker also stops), validates the settings and
    // evaluates the prompt. Returns the number of prompt tokens. Throws Error.
    int64_t start(const std::string & prompt, const GenerateParams & params);

    // The next token: its id and the text that became complete with it (possibly empty inside a
    // UTF-8 sequence), or nullopt when generation ended (then `text` holds what was pending).
    struct Token {
        int32_t     id = -1;
        std::string text;
    };
    std::optional<Token> next(std::string & text_at_end);

    bool stopped_by_eog() const { return stopped_by_eog_; }

private:
    std::unique_ptr<GgufFile>         file_;
    std::unique_ptr<Backend>          backend_;
    std::unique_ptr<BitnetModel>      model_;
    std::unique_ptr<Tokenizer>        tokenizer_;
    std::unique_ptr<Session>          session_;
    std::unique_ptr<Sampler>          sampler_;
    std::unique_ptr<StreamingDecoder> decoder_;
    std::string                       backend_description_;
    ChatTemplate                      chat_ = ChatTemplate::none;
    std::vector<int32_t>              stop_ids_;  // the chat format's end-of-turn ids (chat only)
    int64_t n_ctx_session_ = 0;  // the context the current session was made with
    int64_t limit_         = 0;
    int64_t n_generated_   = 0;
    bool    have_logits_   = false;  // the session's logits are those of the last fed position
    bool    done_          = true;
    bool    stopped_by_eog_ = false;
};

}  // namespace tern::web
