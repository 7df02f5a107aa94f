// OpenAI-style errors: {"error": {"message", "type", "param", "code"}} with an HTTP status. Every
// failure the server answers goes through here (one mapping, as llama.cpp's format_error_response).
#pragma once

#include "core/error.h"

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace tern::server {

struct ApiError : std::runtime_error {
    int         status;   // HTTP status
    std::string type;     // invalid_request_error, authentication_error, not_found_error, server_error, ...
    std::string param;    // the request field at fault ("" for none)
    std::string code;     // machine-readable ("" for none)

    ApiError(int status_, std::string type_, std::string message, std::string param_ = "", std::string code_ = "")
        : std::runtime_error(std::move(message)), status(status_), type(std::move(type_)), param(std::move(param_)),
          code(std::move(code_)) {}
};

// 400 invalid_request_error naming `param`.
ApiError bad_request(const std::string & message, const std::string & param = "", const std::string & code = "");

// The error body; param and code are null when empty.
nlohmann::json error_body(const ApiError & e);

// A tern::Error raised while serving a request: invalid_argument / unsupported are the client's
// (400), the rest the server's (500). The hint, if any, is appended to the message.
ApiError api_error_from(const Error & e);

// The body OpenAI answers for a bare HTTP status (404 for an unknown path, 413, ...), for replies
// the HTTP library produces itself.
ApiError api_error_for_status(int status);

}  // namespace tern::server
