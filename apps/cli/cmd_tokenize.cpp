// `tern tokenize`: print the token ids of a text as one JSON array.
#include "cli_common.h"
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
    const std::string text = read_prompt(a.prompt, a.file, true);
    const auto        file = open_model_file(a.model);
    const Tokenizer   tok  = with_context(format("cannot load the tokenizer of '%s'", a.model.c_str()),
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
    cmd->add_option("-m,--model", args->model, "model file (GGUF; only its tokenizer is read)")
        ->required()->check(CLI::ExistingFile);
    cmd->add_option("-p,--prompt", args->prompt, "text to tokenize");
    cmd->add_option("-f,--file", args->file, "read the text from a file")->check(CLI::ExistingFile);
    cmd->add_flag("--bos", args->bos, "prepend the BOS token (if the vocabulary uses one)");
    cmd->add_flag("--parse-special", args->parse_special, "turn special-token text such as <|eot_id|> into its id");
    cmd->footer("Example: tern tokenize -m ggml-model-i2_s.gguf -p \"Hello world\"   ->   [9906, 1917]");
    cmd->callback([args] { tokenize(*args); });
}

}  // namespace tern::cli
