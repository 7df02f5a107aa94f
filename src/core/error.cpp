// Error construction, printf-style formatting and the assertion handler.
#include "core/error.h"

#include <cstdarg>
#include <vector>

namespace tern {

const char * error_kind_name(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::invalid_argument: return "invalid_argument";
        case ErrorKind::invalid_model:    return "invalid_model";
        case ErrorKind::unsupported:      return "unsupported";
        case ErrorKind::io:               return "io";
        case ErrorKind::device:           return "device";
        case ErrorKind::internal:         return "internal";
    }
    return "unknown";
}

Error::Error(ErrorKind kind, std::string message, std::string hint)
    : std::runtime_error(std::move(message)), kind_(kind), hint_(std::move(hint)) {}

std::string format(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    va_list copy;
    va_copy(copy, args);
    const int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    std::string out;
    if (n > 0) {
        out.resize(static_cast<size_t>(n));
        std::vsnprintf(out.data(), out.size() + 1, fmt, args);
    }
    va_end(args);
    return out;
}

void fail(ErrorKind kind, std::string message, std::string hint) {
    throw Error(kind, std::move(message), std::move(hint));
}

void assert_fail(const char * file, int line, const char * cond, const std::string & msg) {
    std::fprintf(stderr, "%s:%d: internal error: assertion '%s' failed: %s\n", file, line, cond, msg.c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace tern
