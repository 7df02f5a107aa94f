// tern::Error: the one exception type for bad input, bad environment and device failures.
// Thrown deep with "what + which + expected vs got", wrapped with context on the way up
// (rethrow_with_context), caught once at the CLI / server boundary. Programmer bugs use
// TERN_ASSERT, which prints file:line and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tern {

enum class ErrorKind : unsigned char {
    invalid_argument,  // bad flag, prompt or request field   -> exit 2 / HTTP 400
    invalid_model,     // corrupt or inconsistent model file   -> exit 1
    unsupported,       // valid, but not implemented here      -> exit 1
    io,                // open/read/write/mmap failures        -> exit 1
    device,            // GPU adapter, device lost, OOM         -> exit 1
    internal,          // should not happen; still caught at the boundary
};

const char * error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, std::string message, std::string hint = {});
    ErrorKind           kind() const { return kind_; }
    const std::string & hint() const { return hint_; }

private:
    ErrorKind   kind_;
    std::string hint_;
};

// printf-style formatting into a std::string (messages are built rarely; clarity over speed).
std::string format(const char * fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void fail(ErrorKind kind, std::string message, std::string hint = {});

// Calls fn(); if it throws tern::Error, rethrows it with "context: " prepended, keeping kind and hint.
template <typename Fn>
auto with_context(const std::string & context, Fn && fn) -> decltype(fn()) {
    try {
        return fn();
    } catch (const Error & e) {
        throw Error(e.kind(), context + ": " + e.what(), e.hint());
    }
}

[[noreturn]] void assert_fail(const char * file, int line, const char * cond, const std::string & msg);

}  // namespace tern

#define TERN_ASSERT(cond, ...)                                                        \
    do {                                                                              \
        if (!(cond)) ::tern::assert_fail(__FILE__, __LINE__, #cond, ::tern::format(__VA_ARGS__)); \
    } while (0)
