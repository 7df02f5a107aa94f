// `tern tokenize`: print the token ids of a text as one JSON array.
#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"

#include "core/error.h"

#include <cstdio>

namespace tern::cli {
namespace {

struct TokenizeArgs {
    std::string model, prompt, file;
    bool        bos           = false;
    bool        parse_special = false;
};

void tokenize(const TokenizeArgs & a) {
    const std::string text = read_prompt(a.prompt, a.file, true);  // at most k_max_text_file_bytes from -f
    const auto        file = open_model_file(a.model);
    const Tokenizer   tok  = with_context(format("cannot load the tokenizer of '%s'", file->path().c_str()),
                                          [&] { return Tokenizer::from_gguf(*file); });
    const std::vector<int32_t> ids = tok.encode(text, a.bos, a.parse_special);
    std::string                out = "[";
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
    out += "]\n";
    std::fputs(out.c_str(), stdout);
}

}  // namespace

void register_tokenize(CLI::App & app) {
    auto   args = std::make_shared<TokenizeArgs>();
    auto * cmd  = app.add_subcommand("tokenize", "print the token ids of a text as a JSON array");
    cmd->add_option("-m,--model", args->model,
                    std::string("model file (GGUF; only its tokenizer is read); default: ") + k_default_model_name)
        ->check(readable_file());
    cmd->add_option("-p,--prompt", args->prompt, "text to tokenize");
    cmd->add_option("-f,--file", args->file, "read the text from a file (at most 256 MiB)")->check(readable_file());
    cmd->add_flag("--bos", args->bos, "prepend the BOS token (if the vocabulary uses one)");
    cmd->add_flag("--parse-special", args->parse_special, "turn special-token text such as <|eot_id|> into its id");
    cmd->footer("Example: tern tokenize -p \"Hello world\"   ->   [40, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100]");
    cmd->callback([args] { tokenize(*args); });
}

}  // namespace tern::cli
