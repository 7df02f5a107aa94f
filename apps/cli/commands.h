// Each subcommand registers itself on the root app; its callback runs the command. Errors are
// thrown as tern::Error and turned into "error: ... / hint: ..." and an exit code by main().
#pragma once

#include <CLI/CLI.hpp>

namespace tern::cli {

void register_run(CLI::App & app);
void register_chat(CLI::App & app);
void register_tokenize(CLI::App & app);
void register_perplexity(CLI::App & app);
void register_inspect(CLI::App & app);
void register_convert(CLI::App & app);
void register_synth(CLI::App & app);
void register_quantize(CLI::App & app);
void register_bench(CLI::App & app);
void register_serve(CLI::App & app);

}  // namespace tern::cli
