// `tern chat`: an interactive conversation in BitNet b1.58 2B4T's training format (FORMATS.md
// §5.8), one user turn per input line; stops each reply at the model's end-of-turn tokens. On a
// terminal: line editing and history (line_input.h), Ctrl-C stops a reply and keeps the
// conversation, a progress bar while a long prompt is read, /help.
#include "chat.h"
#include "cli_options.h"
#include "commands.h"
#include "line_input.h"

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/chat_format.h"

#include <cstdio>
#include <unistd.h>

namespace tern::cli {
namespace {

constexpr const char * k_help =
    "  /help          this list\n"
    "  /reset         start a new conversation (the system message stays)\n"
    "  /exit, /quit   leave (so does Ctrl-D, or Ctrl-C twice at the prompt)\n"
    "  Ctrl-C         stop the reply being written; the conversation goes on\n"
    "  arrow keys     edit the line; up and down recall earlier lines\n";

struct PromptInterrupted {};  // thrown out of a prompt's evaluation by Ctrl-C

}  // namespace

void chat(ChatArgs a) {
    finish_sampler_params(a.sampling, a.seed);
    LoadedModel       lm  = load_model(a.model);
    const Tokenizer & tok = *lm.tokenizer;
    const auto        eot = tok.find_token("<|eot_id|>");
    if (!eot) {
        fail(ErrorKind::unsupported,
             format("'%s' is a plain text-continuation model: its vocabulary has no <|eot_id|> token, so it has no "
                    "chat format", printable(lm.model->config().name.empty() ? lm.path : lm.model->config().name).c_str()),
             "use `tern run -p \"...\"` to continue text with it, or chat with a model trained for it, "
             "e.g. BitNet b1.58 2B4T (-m ggml-model-i2_s.gguf)");
    }
    std::string ctx_note;
    Session     session(*lm.model, session_options(a.ctx, *lm.model, &ctx_note));
    Sampler     sampler(a.sampling, static_cast<int32_t>(lm.model->config().n_vocab));
    if (!a.no_warmup) session.warm_up(&sampler);  // (a GPU compiles its decode kernels before the first reply)
    const bool  interactive = ::isatty(STDIN_FILENO) != 0;
    std::fprintf(stderr, "tern: seed %llu%s, %s\n", static_cast<unsigned long long>(sampler.seed()),
                 a.sampling.seed == k_sampler_random_seed ? " (random)" : "", ctx_note.c_str());
    if (interactive) {
        std::fprintf(stderr, "tern: chat started; type a message (/help for commands; Ctrl-C stops a reply, Ctrl-D quits)\n");
    }
    std::optional<Interrupts> interrupts;
    if (interactive) interrupts.emplace();
    LineInput input(interactive);

    auto start = [&] {
        session.reset();
        sampler.reset();
        std::vector<ChatMessage> sys;
        if (!a.system.empty()) sys.push_back({"system", a.system});
        return bitnet_chat_tokens(tok, sys, false);
    };
    std::vector<int32_t> pending = start();  // tokens to feed before the next reply
    std::string          line;
    bool                 first = true;
    bool                 ctrl_c_at_prompt = false;  // the last thing at the prompt was a Ctrl-C
    for (;;) {
        if (first && !a.first_message.empty()) {
            line = a.first_message;
            if (interactive) std::printf("> %s\n", line.c_str());
        } else {
            const LineInput::Status status = input.read("> ", line);
            if (status == LineInput::Status::end) {
                if (interactive) std::fputs("\n", stdout);  // the shell's prompt on a line of its own
                break;
            }
            if (status == LineInput::Status::interrupted) {
                if (ctrl_c_at_prompt) {
                    std::fputs("\n", stdout);
                    break;
                }
                ctrl_c_at_prompt = true;
                std::fputs("^C\n", stdout);
                std::fprintf(stderr, "tern: press Ctrl-C again (or Ctrl-D) to quit\n");
                continue;
            }
        }
        first            = false;
        ctrl_c_at_prompt = false;
        if (line == "/exit" || line == "/quit") break;
        if (line == "/help") {
            std::fputs(k_help, stdout);
            continue;
        }
        if (line == "/reset") {
            pending = start();
            std::fprintf(stderr, "tern: conversation reset\n");
            continue;
        }
        if (line.starts_with('/') && line.find(' ') == std::string::npos) {
            std::fprintf(stderr, "tern: unknown command '%s'; /help lists them\n", printable(line).c_str());
            continue;
        }
        if (line.empty()) continue;
        const std::vector<int32_t> turn = bitnet_chat_turn_tokens(tok, {"user", line}, true);
        const std::vector<int32_t> before = pending;
        pending.insert(pending.end(), turn.begin(), turn.end());
        if (session.n_past() + static_cast<int64_t>(pending.size()) >= session.n_ctx()) {
            std::fprintf(stderr, "tern: the message does not fit: the context (%lld tokens) is full; /reset to start "
                                 "over or raise -c\n",
                         static_cast<long long>(session.n_ctx()));
            pending = before;
            continue;
        }
        const int64_t n_past_before = session.n_past();
        int32_t       last_id       = -1;
        bool          stopped       = false;
        GenerationStats st;
        try {
            PromptProgress progress(session, "reading the conversation", [] {
                if (Interrupts::pending()) throw PromptInterrupted{};
            });
            st = generate(session, tok, sampler, pending, a.n_predict, [&](int32_t id, const std::string & piece) {
                if (id >= 0) last_id = id;
                write_text(stdout, piece);
                std::fflush(stdout);
                if (Interrupts::take()) {
                    stopped = true;
                    return false;
                }
                return true;
            });
        } catch (const PromptInterrupted &) {
            Interrupts::take();
            session.rewind(n_past_before);
            pending = before;
            std::fprintf(stderr, "\ntern: stopped while reading the message; it was dropped\n");
            continue;
        }
        std::fputs("\n", stdout);
        std::fflush(stdout);
        if (stopped) std::fprintf(stderr, "tern: reply stopped (Ctrl-C); the conversation goes on\n");
        // The reply's last token was sampled but not fed: an end-of-turn token, or (stopped by
        // Ctrl-C, -n or the context) the reply's last word, which the model should see too.
        pending.clear();
        if (!st.stopped_by_eog && last_id >= 0) pending.push_back(last_id);
        pending.push_back(*eot);
        if (!st.stopped_by_eog && !stopped && session.n_past() + 2 >= session.n_ctx()) {
            std::fprintf(stderr, "tern: the context is full; /reset to start over\n");
        }
        if (a.single_turn) break;
    }
}

void register_chat(CLI::App & app) {
    auto   args = std::make_shared<ChatArgs>();
    auto * cmd  = app.add_subcommand("chat", "talk with the model, one line per turn (BitNet 2B4T chat format)");
    add_model_args(*cmd, args->model);
    cmd->add_option("--system,--system-prompt", args->system, "system message (-sys; empty for none)")->capture_default_str();
    cmd->add_option("-n,--n-predict,--predict", args->n_predict, "most tokens per reply (-1 = until end of turn)")
        ->check(int_in(-1, int64_t{1} << 24))->capture_default_str();
    cmd->add_flag("--single-turn", args->single_turn, "llama.cpp's -st: answer one message, then exit");
    cmd->add_flag("--no-warmup", args->no_warmup,
                  "skip the warm-up decode steps at start (on a GPU they compile the decode kernels before the first reply)");
    auto conversation = std::make_shared<bool>(false);
    cmd->add_flag("--conversation", *conversation, "llama.cpp's -cnv: accepted (chat is always a conversation)");
    cmd->add_flag_callback("--no-conversation", [] {
        fail(ErrorKind::invalid_argument, "-no-cnv: `tern chat` is always a conversation",
             "use `tern run -p \"...\"` to continue text");
    }, "llama.cpp's -no-cnv: refused (use `tern run`)");
    add_context_args(*cmd, args->ctx);
    add_sampler_args(*cmd, args->sampling, args->seed);
    cmd->footer("Example: tern chat -m ggml-model-i2_s.gguf --temp 0.7 -sys \"You are a pirate.\"\n"
                "The default model (no -m) is a text-continuation model and has no chat format.\n"
                "Input lines are user turns. In the chat:\n" + std::string(k_help));
    cmd->callback([args, conversation] { chat(*args); });
}

}  // namespace tern::cli
