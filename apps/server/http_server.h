// The HTTP face of `tern serve` (cpp-httplib): OpenAI endpoints, /health, /metrics, /tokenize,
// /detokenize and the chat page at /. Starts listening before the model is loaded (/health says
// "loading model" meanwhile); attach() hands it the model once it is ready.
#pragma once

#include "openai_request.h"
#include "scheduler.h"
#include "tokenizer/chat_template.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace tern::server {

struct HttpOptions {
    std::string   host           = "127.0.0.1";
    int           port           = 8080;       // 0: any free port (bound_port() tells which)
    std::string   api_key;                     // empty: no authentication
    std::string   cors_origin    = "*";        // Access-Control-Allow-Origin; empty: no CORS headers
    size_t        max_body_bytes = 4u << 20;   // larger bodies: 413
    int           timeout_s      = 60;         // a request (headers and body) must arrive within this
    int           n_threads      = 0;          // HTTP worker threads; 0: slots + queue + 4
    RequestLimits limits;
    SamplerParams defaults;                    // sampling when a request does not say
    int64_t       n_predict      = -1;         // max_tokens when a request does not say (-1: to the context's end)
};

// The loaded model as the routes see it.
struct ServedModel {
    std::string         id;            // what /v1/models lists and responses name
    const Tokenizer *   tokenizer = nullptr;
    Scheduler *         scheduler = nullptr;
    ChatTemplate        chat = ChatTemplate::none;
    std::string         chat_reason;   // why that format (for the 400 on chat without a format)
    std::vector<int32_t> chat_stop_ids;
    int64_t             n_ctx = 0;     // positions per request (prompt + reply)
    int64_t             n_vocab = 0;
};

class HttpServer {
public:
    explicit HttpServer(HttpOptions options);
    ~HttpServer();
    // Binds host:port; throws Error(io) naming them when it cannot.
    void bind();
    int  bound_port() const;
    // Serves until stop() (blocking; run it on its own thread).
    void serve();
    void stop();
    // The model is ready: generation endpoints answer from now on. `model` must outlive the server.
    void attach(const ServedModel & model);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tern::server
