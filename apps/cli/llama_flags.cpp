// llama.cpp's flags as tern reads them, and command resolution; see llama_flags.h.
#include "llama_flags.h"

#include "core/error.h"
#include "core/utf8.h"

#include <algorithm>
#include <cctype>

namespace tern::cli {
namespace {

// A llama.cpp option (common/arg.cpp, llama-bench, llama-perplexity) that a llama.cpp user may type.
// `tern_option` is the long option tern reads it as, or nullptr when tern has no such feature;
// `why` then says so and what to do instead. A command that registers one of llama.cpp's long
// spellings takes the short flag too (option_for), whatever the table says.
struct LlamaFlag {
    const char * names;        // llama.cpp's spellings, as its --help lists them
    const char * tern_option;  // e.g. "--n-gpu-layers"; nullptr: not supported
    const char * why;
};

constexpr const char * k_no_download = "tern does not download models; download the GGUF file and pass it with -m FILE";
constexpr const char * k_no_draft    = "tern has no speculative decoding (draft models)";
constexpr const char * k_one_device  = "tern runs a model on one device; choose it with --backend cpu|webgpu|auto";

constexpr LlamaFlag k_llama_flags[] = {
    // Features tern has, under llama.cpp's long name (registered by the commands that have them).
    {"-ngl, --gpu-layers, --n-gpu-layers", "--n-gpu-layers", nullptr},
    {"-fa, --flash-attn", "--flash-attn", nullptr},
    {"-ctk, --cache-type-k", "--cache-type-k", nullptr},
    {"-ctv, --cache-type-v", "--cache-type-v", nullptr},
    {"-tb, --threads-batch", "--threads-batch", nullptr},
    {"-ub, --ubatch-size", "--ubatch-size", nullptr},
    {"-cnv, --conversation", "--conversation", nullptr},
    {"-no-cnv, --no-conversation", "--no-conversation", nullptr},
    {"-sys, --system-prompt", "--system-prompt", nullptr},
    {"-st, --single-turn", "--single-turn", nullptr},
    // Features tern does not have.
    {"-i, --interactive", nullptr, "for a conversation use `tern chat`"},
    {"-if, --interactive-first", nullptr, "for a conversation use `tern chat`"},
    {"-mli, --multiline-input", nullptr, "`tern chat` reads one line per turn"},
    {"-r, --reverse-prompt", nullptr, "stop strings are not supported; generation stops at end of text or -n tokens"},
    {"-e, --escape", nullptr, "the prompt is used as written; use your shell's quoting ($'...' in bash) for escapes"},
    {"-sp, --special", nullptr, "special tokens are not printed"},
    {"-co, --color", nullptr, "output is not colored"},
    {"-l, --logit-bias", nullptr, "logit biases are not supported"},
    {"-j, --json-schema", nullptr, "grammars and JSON schemas are not supported"},
    {"-jf, --json-schema-file", nullptr, "grammars and JSON schemas are not supported"},
    {"-lv, --verbosity, --log-verbosity", nullptr, "use -v (info) or -vv (debug)"},
    {"-dev, --device", nullptr, k_one_device},
    {"-sm, --split-mode", nullptr, k_one_device},
    {"-ts, --tensor-split", nullptr, k_one_device},
    {"-mg, --main-gpu", nullptr, k_one_device},
    {"-nkvo, --no-kv-offload", nullptr, "the KV cache always lives on the backend that runs the model"},
    {"-ot, --override-tensor", nullptr, k_one_device},
    {"-cmoe, --cpu-moe", nullptr, "tern runs dense BitNet models (no mixture of experts)"},
    {"-ncmoe, --n-cpu-moe", nullptr, "tern runs dense BitNet models (no mixture of experts)"},
    {"-hf, -hfr, --hf-repo", nullptr, k_no_download},
    {"-hff, --hf-file", nullptr, k_no_download},
    {"-hft, --hf-token", nullptr, k_no_download},
    {"-hfd, -hfrd, --hf-repo-draft", nullptr, k_no_download},
    {"-hfv, -hfrv, --hf-repo-v", nullptr, k_no_download},
    {"-hffv, --hf-file-v", nullptr, k_no_download},
    {"-mu, --model-url", nullptr, k_no_download},
    {"-md, --model-draft", nullptr, k_no_draft},
    {"-ngld, --gpu-layers-draft, --n-gpu-layers-draft", nullptr, k_no_draft},
    {"-devd, --device-draft", nullptr, k_no_draft},
    {"-td, --threads-draft", nullptr, k_no_draft},
    {"-tbd, --threads-batch-draft", nullptr, k_no_draft},
    {"-cd, --ctx-size-draft", nullptr, k_no_draft},
    {"-ctkd, --cache-type-k-draft", nullptr, k_no_draft},
    {"-ctvd, --cache-type-v-draft", nullptr, k_no_draft},
    {"-np, --parallel", nullptr, "one sequence at a time; parallel requests are for a server"},
    {"-cb, --cont-batching", nullptr, "one sequence at a time; continuous batching is for a server"},
    {"-nocb, --no-cont-batching", nullptr, "one sequence at a time; continuous batching is for a server"},
    {"-ns, --sequences", nullptr, "one sequence at a time"},
    {"-ps, --p-split", nullptr, k_no_draft},
    {"-lcs, --lookup-cache-static", nullptr, "lookup decoding is not supported"},
    {"-lcd, --lookup-cache-dynamic", nullptr, "lookup decoding is not supported"},
    {"-gan, --grp-attn-n", nullptr, "self-extend (group attention) is not supported; the context is -c tokens"},
    {"-gaw, --grp-attn-w", nullptr, "self-extend (group attention) is not supported; the context is -c tokens"},
    {"-dt, --defrag-thold", nullptr, "tern's KV cache holds one sequence and never needs defragmenting"},
    {"-kvu, --kv-unified", nullptr, "tern's KV cache holds one sequence"},
    {"-dkvc, --dump-kv-cache", nullptr, "the KV cache cannot be dumped"},
    {"-mm, --mmproj", nullptr, "multimodal models are not supported"},
    {"-mmu, --mmproj-url", nullptr, "multimodal models are not supported"},
    {"-C, --cpu-mask", nullptr, "CPU affinity is not supported; use taskset"},
    {"-Cr, --cpu-range", nullptr, "CPU affinity is not supported; use taskset"},
    {"-Cb, --cpu-mask-batch", nullptr, "CPU affinity is not supported; use taskset"},
    {"-Crb, --cpu-range-batch", nullptr, "CPU affinity is not supported; use taskset"},
    {"-to, --timeout", nullptr, "a server option"},
    {"-a, --alias", nullptr, "a server option"},
    {"-sps, --slot-prompt-similarity", nullptr, "a server option"},
    {"-bf, --binary-file", nullptr, "only the perplexity test is supported"},
    {"-pg", nullptr, "`tern bench` runs prompt (-p) and generation (-n) tests separately"},
    {"-mmp, --mmap", nullptr, "tern always maps the model file"},
    {"-embd, --embeddings", nullptr, "embeddings are not supported"},
    {"-oe, --output-err", nullptr, "results go to stdout only"},
    {"--ppl-stride", nullptr, "perplexity uses llama.cpp's default method: windows of -c tokens, second half scored"},
    {"--hellaswag", nullptr, "only perplexity and KL divergence are supported"},
    {"--winogrande", nullptr, "only perplexity and KL divergence are supported"},
    {"--multiple-choice", nullptr, "only perplexity and KL divergence are supported"},
};

std::vector<std::string> split_names(const char * names) {
    std::vector<std::string> out;
    std::string              cur;
    for (const char * p = names;; ++p) {
        if (*p == ',' || *p == ' ' || *p == 0) {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
            if (*p == 0) break;
        } else {
            cur += *p;
        }
    }
    return out;
}

// The long option a command reads a llama.cpp flag as: tern's name for it, or any of llama.cpp's long
// spellings that the command registers (a `tern serve` with --parallel takes -np); "" if none.
std::string option_for(const LlamaFlag & f, const CLI::App & cmd) {
    if (f.tern_option && cmd.get_option_no_throw(f.tern_option)) return f.tern_option;
    for (const auto & n : split_names(f.names)) {
        if (n.starts_with("--") && cmd.get_option_no_throw(n)) return n;
    }
    return {};
}

const LlamaFlag * find_llama_flag(const std::string & name) {
    for (const LlamaFlag & f : k_llama_flags) {
        for (const auto & n : split_names(f.names)) {
            if (n == name) return &f;
        }
    }
    return nullptr;
}

size_t edit_distance(const std::string & a, const std::string & b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

// The closest of `names` to `word`, if it is close enough to be a typo.
std::string closest(const std::string & word, const std::vector<std::string> & names) {
    std::string best;
    size_t      best_d = std::max<size_t>(2, word.size() / 3) + 1;
    for (const auto & n : names) {
        const size_t d = edit_distance(word, n);
        if (d < best_d) best = n, best_d = d;
    }
    return best;
}

std::vector<const CLI::App *> commands(const CLI::App & app) {
    return app.get_subcommands([](const CLI::App *) { return true; });
}

const CLI::App * find_command(const CLI::App & app, const std::string & name) {
    for (const CLI::App * c : commands(app)) {
        if (c->get_name() == name) return c;
    }
    return nullptr;
}

bool is_number(const std::string & s) {
    size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
    if (i >= s.size()) return false;
    bool digit = false;
    for (; i < s.size(); ++i) {
        const char c = s[i];
        if (std::isdigit(static_cast<unsigned char>(c))) {
            digit = true;
        } else if (c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+') {
            return false;
        }
    }
    return digit;
}

bool takes_value(const CLI::Option * o) { return o->get_type_size_max() > 0; }

// The root's flags, accepted anywhere (the root app falls through): -v, -vv, --verbose, -h,
// --help, --version.
bool is_root_flag(const std::string & a) {
    if (a == "--verbose" || a == "-h" || a == "--help" || a == "--version" || a == "--help-all") return true;
    return a.size() >= 2 && a[0] == '-' && a.find_first_not_of('v', 1) == std::string::npos;
}

std::vector<std::string> long_names(const CLI::App & cmd) {
    std::vector<std::string> out;
    for (const CLI::Option * o : cmd.get_options()) {
        for (const auto & n : o->get_lnames()) out.push_back("--" + n);
    }
    return out;
}

[[noreturn]] void unknown_option(const CLI::App & app, const CLI::App & cmd, const std::string & arg) {
    const std::string name = arg.substr(0, arg.find('='));
    const std::string help = "run `tern " + cmd.get_name() + " --help` to see its options";
    if (const LlamaFlag * f = find_llama_flag(name)) {
        std::string where;  // the commands that take it
        for (const CLI::App * c : commands(app)) {
            if (!option_for(*f, *c).empty()) where += (where.empty() ? "`tern " : ", `tern ") + c->get_name() + "`";
        }
        if (where.empty()) {
            fail(ErrorKind::invalid_argument,
                 format("unknown option '%s' (llama.cpp's '%s' is not supported by tern: %s)", printable(name).c_str(),
                        f->names, f->why ? f->why : "no command has it"),
                 help);
        }
        fail(ErrorKind::invalid_argument,
             format("option '%s' (llama.cpp's '%s') does not apply to `tern %s`", printable(name).c_str(), f->names,
                    cmd.get_name().c_str()),
             "it is an option of " + where);
    }
    const bool        single_dash = name.size() > 2 && name[1] != '-';
    const std::string guess       = closest(name, long_names(cmd));
    std::string       hint        = help;
    if (!guess.empty()) {
        hint = "did you mean '" + guess + "'? " + help;
    } else if (const CLI::Option * o = single_dash ? cmd.get_option_no_throw(name.substr(0, 2)) : nullptr) {
        const std::string long_name = o->get_lnames().empty() ? "" : " (--" + o->get_lnames()[0] + ")";
        hint = format("did you mean '%s'%s? tern's one-letter options take their value after a space; %s",
                      name.substr(0, 2).c_str(), long_name.c_str(), help.c_str());
    }
    fail(ErrorKind::invalid_argument, format("unknown option '%s' for `tern %s`", printable(name).c_str(), cmd.get_name().c_str()),
         hint);
}

[[noreturn]] void unknown_command(const CLI::App & app, const std::string & name) {
    std::vector<std::string> names;
    for (const CLI::App * c : commands(app)) names.push_back(c->get_name());
    const std::string guess = closest(name, names);
    fail(ErrorKind::invalid_argument,
         format("unknown command '%s'%s", printable(name).c_str(), guess.empty() ? "" : format(" (did you mean '%s'?)", guess.c_str()).c_str()),
         "the commands are:\n" + command_list(app) + "run `tern <command> --help` for the options of one");
}

}  // namespace

std::string command_list(const CLI::App & app) {
    std::string out;
    for (const CLI::App * c : commands(app)) out += format("  %-11s %s\n", c->get_name().c_str(), c->get_description().c_str());
    return out;
}

std::vector<std::string> normalize_args(const CLI::App & app, const std::vector<std::string> & args) {
    std::vector<std::string> out;
    size_t                   i = 0;
    // Root flags, then the command.
    for (; i < args.size() && args[i].starts_with('-'); ++i) {
        if (!is_root_flag(args[i])) {
            fail(ErrorKind::invalid_argument, format("option '%s' must come after the command", printable(args[i]).c_str()),
                 "write `tern <command> " + printable(args[i]) + " ...`; the commands are:\n" + command_list(app));
        }
        out.push_back(args[i]);
    }
    if (i == args.size()) return out;  // no command: --help, --version, or CLI11's "command required"
    std::string name = args[i++];
    if (name == "help") {  // `tern help` and `tern help run`, as git and cargo have it
        if (i == args.size()) return {"--help"};
        name = args[i++];
        if (!find_command(app, name)) unknown_command(app, name);
        return {name, "--help"};
    }
    const CLI::App * cmd = find_command(app, name);
    if (!cmd) unknown_command(app, name);
    out.push_back(name);

    for (; i < args.size(); ++i) {
        const std::string & a = args[i];
        if (a == "--") {  // everything after is positional
            out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
            break;
        }
        if (a.size() < 2 || a[0] != '-' || is_number(a) || is_root_flag(a)) {
            out.push_back(a);
            continue;
        }
        if (a.starts_with("--")) {
            const CLI::Option * o = cmd->get_option_no_throw(a.substr(0, a.find('=')));
            if (!o) unknown_option(app, *cmd, a);
            out.push_back(a);
            if (takes_value(o) && a.find('=') == std::string::npos && i + 1 < args.size()) out.push_back(args[++i]);
            continue;
        }
        if (a.size() == 2 || find_llama_flag(a)) {
            if (const CLI::Option * o = cmd->get_option_no_throw(a)) {  // tern's own one-letter option
                out.push_back(a);
                if (takes_value(o) && i + 1 < args.size()) out.push_back(args[++i]);
                continue;
            }
            const LlamaFlag * f   = find_llama_flag(a);
            const std::string opt = f ? option_for(*f, *cmd) : std::string();
            if (opt.empty()) unknown_option(app, *cmd, a);
            const CLI::Option * o = cmd->get_option_no_throw(opt);
            if (opt == "--flash-attn") {  // llama.cpp: -fa [on|off|auto]; older versions: a plain flag
                const bool has_value = i + 1 < args.size() &&
                                       (args[i + 1] == "on" || args[i + 1] == "off" || args[i + 1] == "auto");
                out.push_back(opt + "=" + (has_value ? args[++i] : std::string("on")));
                continue;
            }
            out.push_back(opt);
            if (takes_value(o) && i + 1 < args.size()) out.push_back(args[++i]);
            continue;
        }
        // "-n16": a one-letter option with its number attached, as CLI11 reads it.
        if (const CLI::Option * o = cmd->get_option_no_throw(a.substr(0, 2)); o && takes_value(o) && is_number(a.substr(2))) {
            out.push_back(a);
            continue;
        }
        unknown_option(app, *cmd, a);
    }
    return out;
}

}  // namespace tern::cli
