// tern: the command-line interface. Subcommands live in cmd_*.cpp and register themselves below;
// this file reads the command line (llama.cpp's flags included, llama_flags.h), dispatches, and maps
// failures to "error: ... / hint: ..." and exit codes: 0 ok, 1 runtime or model error, 2 usage error.
#include "commands.h"
#include "llama_flags.h"

#include "core/error.h"
#include "core/log.h"

#include <cstdio>
#include <cstring>
#include <new>

namespace {

void print_error(const std::string & message, const std::string & hint) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", message.c_str());
    if (!hint.empty()) std::fprintf(stderr, "hint: %s\n", hint.c_str());
}

// CLI11's messages, said the way tern says things (the option, what was expected, what was found).
std::string parse_error_message(const CLI::ParseError & e) {
    std::string m = e.what();
    const std::string extras1 = "The following argument was not expected: ";
    const std::string extras2 = "The following arguments were not expected: ";
    if (m.starts_with(extras1)) return "unexpected argument '" + m.substr(extras1.size()) + "'";
    if (m.starts_with(extras2)) return "unexpected arguments: " + m.substr(extras2.size());
    if (m == "A subcommand is required") return "no command given";
    if (m.ends_with(" is required")) return "missing " + m.substr(0, m.size() - 12);
    // "--prompt: 1 required TEXT missing" (an option at the end of the line without its value)
    if (const size_t p = m.find(": 1 required "); p != std::string::npos && m.ends_with(" missing")) {
        return "option '" + m.substr(0, p) + "' needs a value";
    }
    return m;
}

}  // namespace

int main(int argc, char ** argv) {
    CLI::App app{"tern: run ternary (1.58-bit) BitNet b1.58 language models from GGUF files", "tern"};
    app.require_subcommand(1);
    app.fallthrough();  // -v after the command works too
    app.set_version_flag("--version", "tern 0.1.0");
    int verbosity = 0;
    app.add_flag("-v,--verbose", verbosity, "more log output (repeat for debug)");
    app.parse_complete_callback([&] {
        tern::set_log_level(verbosity >= 2 ? tern::LogLevel::debug : verbosity == 1 ? tern::LogLevel::info : tern::LogLevel::warn);
    });
    app.footer("Run `tern <command> --help` (or `tern help <command>`) for the options of a command.\n"
               "llama.cpp's flags work where tern has the feature (-ngl, -fa, -ctk, -ctv, -sys, -cnv, -ub, ...).");
    // The commands, in the order --help lists them. A new command: cmd_<name>.cpp with
    // register_<name>(app), declared in commands.h, and one line here.
    tern::cli::register_run(app);
    tern::cli::register_chat(app);
    tern::cli::register_tokenize(app);
    tern::cli::register_perplexity(app);
    tern::cli::register_inspect(app);
    tern::cli::register_convert(app);
    tern::cli::register_synth(app);
    tern::cli::register_quantize(app);
    tern::cli::register_bench(app);
    tern::cli::register_serve(app);

    std::string command;
    try {
        const std::vector<std::string> args = tern::cli::normalize_args(app, std::vector<std::string>(argv + 1, argv + argc));
        for (const auto & a : args) {
            if (!a.starts_with('-')) {
                command = a;
                break;
            }
        }
        app.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes them in reverse
    } catch (const CLI::CallForHelp & e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp & e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion & e) {
        return app.exit(e);
    } catch (const CLI::ParseError & e) {
        const std::string message = parse_error_message(e);
        if (message == "no command given") {
            print_error(message, "the commands are:\n" + tern::cli::command_list(app) +
                                     "run `tern <command> --help` for the options of one");
        } else {
            print_error(message, "run `tern" + (command.empty() ? "" : " " + command) + " --help` to see the options");
        }
        return 2;
    } catch (const tern::Error & e) {
        print_error(e.what(), e.hint());
        return e.kind() == tern::ErrorKind::invalid_argument ? 2 : 1;
    } catch (const std::bad_alloc &) {
        const bool has_context = command == "run" || command == "chat" || command == "perplexity" || command == "bench";
        print_error("out of memory", has_context ? "use a smaller context (-c) or batch (-b)"
                                                 : "the input needs more memory than this machine has free");
        return 1;
    } catch (const std::exception & e) {
        print_error(e.what(), "");
        return 1;
    }
    return 0;
}
