// `tern chat`: an interactive conversation in BitNet b1.58 2B4T's training format (FORMATS.md
// §5.8), one user turn per input line; stops each reply at the model's end-of-turn tokens.
#include "cli_common.h"
#include "commands.h"

#include "core/error.h"
#include "tokenizer/chat_format.h"

#include <cstdio>
#include <iostream>
#include <unistd.h>

namespace tern::cli {
namespace {

struct ChatArgs {
    ModelArgs     model;
    ContextArgs   ctx;
    SamplerParams sampling;
    std::string   system    = "You are a helpful assistant.";
    int64_t       n_predict = 512;
    bool          no_warmup = false;
};

void chat(const ChatArgs & a) {
    validate(a.sampling);
    LoadedModel       lm  = load_model(a.model);
    const Tokenizer & tok = *lm.tokenizer;
    const auto        eot = tok.find_token("<|eot_id|>");
    if (!eot) {
        fail(ErrorKind::unsupported,
             format("'%s' is a plain text-continuation model: its vocabulary has no <|eot_id|> token, so it has no "
                    "chat format", lm.model->config().name.c_str()),
             "use `tern run -p \"...\"` to continue text with it, or chat with a model trained for it, "
             "e.g. BitNet b1.58 2B4T (-m ggml-model-i2_s.gguf)");
    }
    Session session(*lm.model, session_options(a.ctx, *lm.model));
    Sampler sampler(a.sampling, static_cast<int32_t>(lm.model->config().n_vocab));
    if (!a.no_warmup) session.warm_up(&sampler);  // (GPU kernels compiled before the first reply)
    const bool interactive = ::isatty(STDIN_FILENO) != 0;
    if (interactive) std::fprintf(stderr, "tern: chat started; type a message, /reset to start over, /exit or Ctrl-D to quit\n");

    auto start = [&] {
        session.reset();
        sampler.reset();
        std::vector<ChatMessage> sys;
        if (!a.system.empty()) sys.push_back({"system", a.system});
        return bitnet_chat_tokens(tok, sys, false);
    };
    std::vector<int32_t> pending = start();  // tokens to feed before the next reply
    std::string          line;
    for (;;) {
        if (interactive) {
            std::fputs("> ", stdout);
            std::fflush(stdout);
        }
        if (!std::getline(std::cin, line)) break;
        if (line == "/exit" || line == "/quit") break;
        if (line == "/reset") {
            pending = start();
            std::fprintf(stderr, "tern: conversation reset\n");
            continue;
        }
        if (line.empty()) continue;
        const std::vector<int32_t> turn = bitnet_chat_turn_tokens(tok, {"user", line}, true);
        pending.insert(pending.end(), turn.begin(), turn.end());
        if (session.n_past() + static_cast<int64_t>(pending.size()) >= session.n_ctx()) {
            std::fprintf(stderr, "tern: the context is full (%lld tokens); /reset to start over or raise -c\n",
                         static_cast<long long>(session.n_ctx()));
            pending.resize(pending.size() - turn.size());
            continue;
        }
        const GenerationStats st = generate(session, tok, sampler, pending, a.n_predict, [](int32_t, const std::string & piece) {
            std::fputs(piece.c_str(), stdout);
            std::fflush(stdout);
            return true;
        });
        std::fputs("\n", stdout);
        std::fflush(stdout);
        // The reply's end-of-turn token was sampled but not fed; the next turn starts with it.
        pending.assign(1, *eot);
        if (!st.stopped_by_eog && session.n_past() >= session.n_ctx()) {
            std::fprintf(stderr, "tern: the context is full; /reset to start over\n");
        }
    }
}

}  // namespace

void register_chat(CLI::App & app) {
    auto   args = std::make_shared<ChatArgs>();
    auto * cmd  = app.add_subcommand("chat", "talk with the model, one line per turn (BitNet 2B4T chat format)");
    add_model_args(*cmd, args->model);
    cmd->add_option("--system", args->system, "system message (empty for none)")->capture_default_str();
    cmd->add_option("-n,--n-predict", args->n_predict, "most tokens per reply (-1 = until end of turn)")
        ->check(CLI::Range(int64_t{-1}, int64_t{1} << 24))->capture_default_str();
    cmd->add_flag("--no-warmup", args->no_warmup,
                  "skip the warm-up decode step at start (on a GPU it compiles the decode kernels before the first reply)");
    add_context_args(*cmd, args->ctx);
    add_sampler_args(*cmd, args->sampling);
    cmd->footer("Example: tern chat -m ggml-model-i2_s.gguf --temp 0.7\n"
                "The default model (no -m) is a text-continuation model and has no chat format.\n"
                "Input lines are user turns; /reset starts over, /exit quits.");
    cmd->callback([args] { chat(*args); });
}

}  // namespace tern::cli
