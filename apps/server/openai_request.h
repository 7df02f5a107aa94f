// OpenAI request bodies (/v1/completions, /v1/chat/completions) read and validated into one
// GenerationRequest. Every rejection is an ApiError 400 naming the field (param), so a client sees
// what it sent wrong; nothing here touches the model.
#pragma once

#include "api_error.h"
#include "sampler/sampler.h"
#include "tokenizer/chat_format.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern::server {

enum class Endpoint { completions, chat };

// Request limits (server flags).
struct RequestLimits {
    int64_t max_tokens  = 4096;  // --max-tokens-limit: the most a request may ask for
    size_t  max_stops   = 16;    // stop strings per request
    size_t  max_stop_bytes = 256;
};

struct GenerationRequest {
    Endpoint                 endpoint = Endpoint::completions;
    std::string              model;            // as sent (echoed back); "" if absent
    std::string              prompt_text;      // completions: the prompt as text
    std::vector<int32_t>     prompt_ids;       // completions: a prompt given as token ids
    bool                     prompt_is_ids = false;
    std::vector<ChatMessage> messages;         // chat
    std::optional<int64_t>   max_tokens;       // absent: until the context is full (or --n-predict)
    SamplerParams            sampling;         // server defaults overridden by the request
    std::vector<std::string> stop;
    bool                     stream        = false;
    bool                     include_usage = false;  // stream_options.include_usage
    int                      logprobs      = -1;     // -1: none; else how many alternatives per token (0..20)
    bool                     ignore_eos    = false;  // llama.cpp extension: keep going past end-of-generation
};

// Parses `body` (the raw HTTP body) for `endpoint`. `defaults` are the server's sampling defaults.
// Throws ApiError(400) for malformed JSON (including invalid UTF-8), a wrong type, an out-of-range
// value, an unknown field, or a feature tern does not have (n > 1, tools, echo, ...).
GenerationRequest parse_generation_request(std::string_view body, Endpoint endpoint, const SamplerParams & defaults,
                                           const RequestLimits & limits);

// The body parsed as a JSON object, or ApiError(400) saying why not.
nlohmann::json parse_json_object(std::string_view body);

}  // namespace tern::server
