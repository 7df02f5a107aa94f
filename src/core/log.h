// Logging through one sink (stderr by default). Messages are prefixed with the module, not the
// function: "gguf: ...", "tokenizer: ...". The level is set once by the CLI (-v / --log-level).
#pragma once

#include <functional>
#include <string>

namespace tern {

enum class LogLevel : int { error = 0, warn = 1, info = 2, debug = 3 };

void     set_log_level(LogLevel level);
LogLevel log_level();
// Replaces the sink (tests capture messages). nullptr restores stderr.
void set_log_sink(std::function<void(LogLevel, const std::string &)> sink);
void log_message(LogLevel level, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace tern

#define TERN_LOG_ERROR(...) ::tern::log_message(::tern::LogLevel::error, __VA_ARGS__)
#define TERN_LOG_WARN(...)  ::tern::log_message(::tern::LogLevel::warn, __VA_ARGS__)
#define TERN_LOG_INFO(...)                                                                   \
    do {                                                                                     \
        if (::tern::log_level() >= ::tern::LogLevel::info) ::tern::log_message(::tern::LogLevel::info, __VA_ARGS__); \
    } while (0)
#define TERN_LOG_DEBUG(...)                                                                  \
    do {                                                                                     \
        if (::tern::log_level() >= ::tern::LogLevel::debug) ::tern::log_message(::tern::LogLevel::debug, __VA_ARGS__); \
    } while (0)
