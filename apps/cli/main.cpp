// tern: the command-line interface. Subcommands live in cmd_*.cpp; this file parses, dispatches and
// maps failures to exit codes: 0 ok, 1 runtime or model error, 2 usage error.
#include "commands.h"

#include "core/error.h"
#include "core/log.h"

#include <cstdio>
#include <cstring>

namespace {

void print_error(const char * message, const std::string & hint) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", message);
    if (!hint.empty()) std::fprintf(stderr, "hint: %s\n", hint.c_str());
}

}  // namespace

int main(int argc, char ** argv) {
    CLI::App app{"tern: run ternary (1.58-bit) BitNet b1.58 language models from GGUF files", "tern"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "tern 0.1.0");
    int verbosity = 0;
    app.add_flag("-v,--verbose", verbosity, "more log output (repeat for debug)");
    app.parse_complete_callback([&] {
        tern::set_log_level(verbosity >= 2 ? tern::LogLevel::debug : verbosity == 1 ? tern::LogLevel::info : tern::LogLevel::warn);
    });
    app.footer("Run `tern <command> --help` for the options of a command.");
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

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp & e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp & e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion & e) {
        return app.exit(e);
    } catch (const CLI::ParseError & e) {
        const std::string cmd = app.get_subcommands().empty() ? "" : " " + app.get_subcommands()[0]->get_name();
        print_error(e.what(), "run `tern" + cmd + " --help` to see the options");
        return 2;
    } catch (const tern::Error & e) {
        print_error(e.what(), e.hint());
        return e.kind() == tern::ErrorKind::invalid_argument ? 2 : 1;
    } catch (const std::bad_alloc &) {
        print_error("out of memory", "use a smaller context (-c) or batch (-b)");
        return 1;
    } catch (const std::exception & e) {
        print_error(e.what(), "");
        return 1;
    }
    return 0;
}
