// Reading a command line as a llama.cpp user writes it. CLI11 reads "-ngl 99" as "-n gl 99" and
// "-fa" as "-f a"; tern first rewrites llama.cpp's multi-letter short flags that name a feature tern
// has into tern's long options ("-ngl" -> "--n-gpu-layers", "-sys" -> "--system-prompt"), and turns
// every other unknown option into a clear error ("unknown option '-hf' (llama.cpp's '-hf,
// --hf-repo' is not supported by tern: ...)"), before CLI11 parses anything. It also resolves the
// command itself: `tern help [command]` and unknown or misspelt commands ("did you mean 'run'?").
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace tern::cli {

// args: argv[1..] as given. Returns the arguments CLI11 should parse (in order). Throws
// Error(invalid_argument) naming the option or command, with a hint. `tern help [cmd]` becomes
// `[cmd] --help`.
std::vector<std::string> normalize_args(const CLI::App & app, const std::vector<std::string> & args);

// The registered commands, one "  name   description" line each, for messages.
std::string command_list(const CLI::App & app);

}  // namespace tern::cli
