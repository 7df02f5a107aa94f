// WebEngine: pull-based generation for the browser build (see web_engine.h).
#include "web_engine.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/webgpu/webgpu_backend.h"
#include "core/error.h"

#include <algorithm>

namespace tern::web {

WebEngine::WebEngine(const std::string & path, const std::string & backend, bool allow_cpu_adapter) {
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
    with_context(format("cannot load model '%s'", path.c_str()), [&] {
        file_      = std::make_unique<GgufFile>(GgufFile::open(path));
        model_     = BitnetModel::load(*file_, *backend_);
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

int64_t WebEngine::start(const std::string & prompt, const GenerateParams & params) {
    done_ = true;
    validate(params.sampling);
    std::vector<int32_t> ids;
    stop_ids_.clear();
    if (params.chat) {
        if (chat_ == ChatTemplate::none) {
            fail(ErrorKind::unsupported, format("'%s' has no chat format tern recognises", model_->config().name.c_str()),
                 "turn the chat format off to continue text with it");
        }
        ids       = chat_template_tokens(chat_, *tokenizer_, {{"user", prompt}}, /*add_generation_prompt=*/true);
        stop_ids_ = chat_template_stop_tokens(chat_, *tokenizer_);
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
    if (!session_ || n_ctx_session_ != n_ctx) {
        session_.reset();  // free the old KV cache first
        SessionOptions so;
        so.n_ctx       = n_ctx;
        session_       = std::make_unique<Session>(*model_, so);
        n_ctx_session_ = n_ctx;
    }
    session_->reset();
    sampler_ = std::make_unique<Sampler>(params.sampling, static_cast<int32_t>(model_->config().n_vocab));
    decoder_ = std::make_unique<StreamingDecoder>(*tokenizer_);
    for (int32_t id : ids) sampler_->accept(id);  // the penalties see the prompt, as in generate()
    session_->eval(ids);
    limit_          = params.n_predict < 0 ? n_ctx : params.n_predict;
    n_generated_    = 0;
    have_logits_    = true;
    stopped_by_eog_ = false;
    done_           = limit_ == 0;
    return static_cast<int64_t>(ids.size());
}

std::optional<WebEngine::Token> WebEngine::next(std::string & text_at_end) {
    text_at_end.clear();
    if (!done_ && !have_logits_) {
        done_ = true;  // the context filled up: the last id was handed out, not fed
    }
    if (done_) {
        if (decoder_) text_at_end = decoder_->flush();
        return std::nullopt;
    }
    // Greedy (temp <= 0) is the sampler's argmax; the native loop takes it on the device, with the
    // same lowest-index tie break. Penalties, when set, see every drawn token (decode_sampled).
    const int32_t id = sampler_->sample(session_->logits());
    sampler_->accept(id);
    if (tokenizer_->is_eog(id) || std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) {
        stopped_by_eog_ = true;
        done_           = true;
        text_at_end     = decoder_->flush();
        return std::nullopt;
    }
    ++n_generated_;
    Token t{id, decoder_->push(id)};
    have_logits_ = false;
    if (n_generated_ >= limit_) {
        done_ = true;
    } else if (session_->n_past() < session_->n_ctx()) {
        session_->eval({&id, 1});
        have_logits_ = true;
    }
    return t;
}

}  // namespace tern::web
