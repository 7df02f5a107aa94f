// The log sink: a level filter and an optional replacement sink (used by tests).
#include "core/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace tern {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};
std::mutex       g_mutex;
std::function<void(LogLevel, const std::string &)> g_sink;

const char * level_prefix(LogLevel level) {
    switch (level) {
        case LogLevel::error: return "error: ";
        case LogLevel::warn:  return "warning: ";
        default:              return "";
    }
}
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void set_log_sink(std::function<void(LogLevel, const std::string &)> sink) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_sink = std::move(sink);
}

void log_message(LogLevel level, const char * fmt, ...) {
    if (static_cast<int>(level) > g_level.load()) return;
    char    buf[2048];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_sink) {
        g_sink(level, buf);
    } else {
        std::fprintf(stderr, "%s%s\n", level_prefix(level), buf);
    }
}

}  // namespace tern
