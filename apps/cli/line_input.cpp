// libedit's readline with tern's own SIGINT handling; see line_input.h.
#include "line_input.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <editline/readline.h>
#include <iostream>
#include <unistd.h>

namespace tern::cli {
namespace {

volatile sig_atomic_t g_interrupted = 0;
struct sigaction      g_previous {};

void on_sigint(int) { g_interrupted = 1; }

// libedit's input function: a byte from the terminal, or EOF when Ctrl-C interrupts the read, so
// that readline() returns (NULL) at once instead of waiting for Enter. The handler is installed
// without SA_RESTART, so the read fails with EINTR.
int read_key(FILE * in) {
    unsigned char c = 0;
    for (;;) {
        if (g_interrupted) return EOF;  // Ctrl-C before the read began (while the prompt was drawn)
        const ssize_t n = ::read(::fileno(in), &c, 1);
        if (n == 1) return c;
        if (n < 0 && errno == EINTR && !g_interrupted) continue;  // another signal (SIGWINCH)
        return EOF;
    }
}

}  // namespace

Interrupts::Interrupts() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocking read returns EINTR
    ::sigaction(SIGINT, &sa, &g_previous);
}

Interrupts::~Interrupts() { ::sigaction(SIGINT, &g_previous, nullptr); }

bool Interrupts::take() {
    const bool was = g_interrupted != 0;
    g_interrupted  = 0;
    return was;
}

bool Interrupts::pending() { return g_interrupted != 0; }

LineInput::LineInput(bool interactive) : interactive_(interactive) {
    if (!interactive_) return;
    rl_catch_signals = 0;  // SIGINT is Interrupts' business, not libedit's
    rl_getc_function = read_key;
    using_history();
}

LineInput::~LineInput() {
    if (interactive_) clear_history();
}

LineInput::Status LineInput::read(const std::string & prompt, std::string & line) {
    line.clear();
    if (!interactive_) {
        if (!std::getline(std::cin, line)) return Status::end;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return Status::line;
    }
    // A Ctrl-C pressed since the last reply counts as one at this prompt (the flag is not cleared).
    char * text = ::readline(prompt.c_str());
    if (!text) return Interrupts::take() ? Status::interrupted : Status::end;
    line.assign(text);
    std::free(text);
    if (!line.empty()) add_history(line.c_str());
    return Status::line;
}

}  // namespace tern::cli
