// OpenAI error objects and the status mapping.
#include "api_error.h"

namespace tern::server {

ApiError bad_request(const std::string & message, const std::string & param, const std::string & code) {
    return ApiError(400, "invalid_request_error", message, param, code);
}

nlohmann::json error_body(const ApiError & e) {
    nlohmann::json err = {{"message", e.what()}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
    if (!e.param.empty()) err["param"] = e.param;
    if (!e.code.empty()) err["code"] = e.code;
    return {{"error", err}};
}

ApiError api_error_from(const Error & e) {
    std::string message = e.what();
    if (!e.hint().empty()) message += " (hint: " + e.hint() + ")";
    switch (e.kind()) {
        case ErrorKind::invalid_argument:
        case ErrorKind::unsupported: return bad_request(message);
        default: return ApiError(500, "server_error", message);
    }
}

ApiError api_error_for_status(int status) {
    switch (status) {
        case 400: return bad_request("the request could not be read as HTTP");
        case 404: return ApiError(404, "not_found_error", "no such endpoint", "", "not_found");
        case 405: return ApiError(405, "invalid_request_error", "method not allowed for this endpoint");
        case 408: return ApiError(408, "invalid_request_error", "the request was not received in time", "", "timeout");
        case 413: return ApiError(413, "invalid_request_error", "the request body is larger than the server accepts "
                                                               "(--max-body-size)", "", "request_too_large");
        case 414: return ApiError(414, "invalid_request_error", "the request URI is too long");
        case 503: return ApiError(503, "server_error", "the server is busy", "", "server_busy");
        default: break;
    }
    if (status >= 500) return ApiError(status, "server_error", "internal server error");
    return ApiError(status, "invalid_request_error", "the request was rejected (HTTP " + std::to_string(status) + ")");
}

}  // namespace tern::server
