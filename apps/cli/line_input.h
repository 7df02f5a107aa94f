// Reading chat input: with line editing and history (libedit, BSD-licensed, through its
// readline-compatible API) when stdin is a terminal, plain lines otherwise; and Ctrl-C as a
// request to stop, not a kill: while an Interrupts object lives, SIGINT only sets a flag, which the
// chat checks between tokens (stop the reply) and at the prompt (first Ctrl-C clears the line, a
// second one in a row quits).
#pragma once

#include <optional>
#include <string>

namespace tern::cli {

// SIGINT -> a flag, for the lifetime of the object (the previous handler comes back after).
class Interrupts {
public:
    Interrupts();
    ~Interrupts();
    Interrupts(const Interrupts &)             = delete;
    Interrupts & operator=(const Interrupts &) = delete;

    // Whether Ctrl-C was pressed since the last take(); clears the flag.
    static bool take();
    static bool pending();
};

class LineInput {
public:
    enum class Status { line, interrupted, end };  // a line; Ctrl-C at the prompt; Ctrl-D / end of input

    // interactive: line editing, history and the prompt (stdin is a terminal); else lines from stdin.
    explicit LineInput(bool interactive);
    ~LineInput();

    // Reads one line (without the newline) into `line`.
    Status read(const std::string & prompt, std::string & line);

private:
    bool interactive_;
};

}  // namespace tern::cli
