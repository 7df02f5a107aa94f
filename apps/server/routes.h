// Route handlers shared between http_server.cpp (plumbing, small endpoints) and completions.cpp
// (the two generation endpoints). Internal to the server.
#pragma once

#include "api_error.h"
#include "http_server.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace tern::server {

// JSON text that is always valid UTF-8 (token pieces may hold partial sequences: replaced by U+FFFD).
std::string dump_json(const nlohmann::json & j);
void        send_json(httplib::Response & res, int status, const nlohmann::json & body);
void        send_error(httplib::Response & res, const ApiError & e);

// POST /v1/completions and /v1/chat/completions: validate, tokenize, queue, then answer as JSON or
// as server-sent events. Throws ApiError for everything the client must hear about before any
// answer is sent.
void handle_generation(const ServedModel & model, const HttpOptions & options, Endpoint endpoint,
                       const httplib::Request & req, httplib::Response & res);

}  // namespace tern::server
