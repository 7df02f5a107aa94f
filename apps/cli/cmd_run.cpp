// `tern run`: continue a prompt, streaming the text to stdout and a timing line to stderr (or one
// JSON object with --json). With -cnv it starts `tern chat` (llama.cpp's conversation mode).
#include "chat.h"
#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"

#include "core/error.h"
#include "core/utf8.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace tern::cli {
namespace {

struct RunArgs {
    ModelArgs     model;
    ContextArgs   ctx;
    SamplerParams sampling;
    std::string   seed;
    std::string   prompt, file, system;
    int64_t       n_predict         = 128;
    bool          no_display_prompt = false;
    bool          truncate          = false;
    bool          json              = false;
    bool          conversation      = false;
    bool          no_conversation   = false;
    bool          no_warmup         = false;
};

std::string plural(int64_t n, const char * word) {
    return format("%lld %s%s", static_cast<long long>(n), word, n == 1 ? "" : "s");
}

double per_second(int64_t n, double ms) { return ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0; }

// "5 tokens in 12.3 ms (2.46 ms/token, 406.50 tok/s)"; rates only when something was timed.
std::string timing(int64_t n, double ms) {
    if (n <= 0 || ms <= 0) return plural(n, "token");
    return format("%s in %.1f ms (%.2f ms/token, %.2f tok/s)", plural(n, "token").c_str(), ms,
                  ms / static_cast<double>(n), per_second(n, ms));
}

void start_chat(const RunArgs & a) {
    ChatArgs c;
    c.model         = a.model;
    c.ctx           = a.ctx;
    c.sampling      = a.sampling;
    c.seed          = a.seed;
    c.first_message = read_prompt(a.prompt, a.file, false);
    if (!a.system.empty()) c.system = a.system;
    c.n_predict     = a.n_predict;
    c.no_warmup     = a.no_warmup;
    chat(c);
}

void run(RunArgs a) {
    if (a.conversation) return start_chat(a);
    if (!a.system.empty()) {
        fail(ErrorKind::invalid_argument, "-sys (--system-prompt) is a chat's system message; `tern run` continues text",
             "use `tern chat -sys \"...\"`, or add -cnv");
    }
    finish_sampler_params(a.sampling, a.seed);
    const std::string text = read_prompt(a.prompt, a.file, false);
    LoadedModel       lm   = load_model(a.model);
    const Tokenizer & tok  = *lm.tokenizer;
    std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/true, /*parse_special=*/true);
    if (ids.empty()) {
        fail(ErrorKind::invalid_argument, "the prompt is empty and the model adds no BOS token", "give a prompt with -p");
    }
    if (tok.add_bos() && ids.size() >= 2 && ids[0] == tok.bos_id() && ids[1] == tok.bos_id()) {
        std::fprintf(stderr, "warning: the prompt starts with %s and tern adds one too, so the model sees two; "
                             "leave it out of the prompt\n",
                     printable(tok.token_text(tok.bos_id())).c_str());
    }
    std::string          ctx_note;
    const SessionOptions so    = session_options(a.ctx, *lm.model, &ctx_note);
    const int64_t        n_ctx = so.n_ctx;
    std::string          echo  = text;  // what the model sees, as text
    if (static_cast<int64_t>(ids.size()) >= n_ctx) {
        if (!a.truncate) {
            fail(ErrorKind::invalid_argument,
                 format("the prompt is %zu tokens, but the context holds %lld (and generation needs room)", ids.size(),
                        static_cast<long long>(n_ctx)),
                 "raise -c, shorten the prompt, or pass --truncate-prompt to keep only its end");
        }
        // Keep the first token (BOS) and the last tokens, leaving a quarter of the context to generate.
        const size_t         keep = static_cast<size_t>(std::max<int64_t>(1, n_ctx - 1 - n_ctx / 4));
        std::vector<int32_t> cut{ids.front()};
        cut.insert(cut.end(), ids.end() - static_cast<std::ptrdiff_t>(keep), ids.end());
        std::fprintf(stderr, "note: prompt truncated from %zu to %zu tokens; the echo shows what the model sees\n",
                     ids.size(), cut.size());
        ids  = std::move(cut);
        echo = tok.decode(std::span<const int32_t>(ids).subspan(ids.front() == tok.bos_id() ? 1 : 0), true);
    }
    const int64_t n_prompt = static_cast<int64_t>(ids.size());
    // The last generated token is never fed, so n_ctx - n_prompt + 1 tokens fit.
    const int64_t room = n_ctx - n_prompt + 1;
    if (a.n_predict > room) {
        std::fprintf(stderr, "warning: -n %lld does not fit: the context holds %lld tokens and the prompt takes %lld, "
                             "so generation stops after %lld (raise -c)\n",
                     static_cast<long long>(a.n_predict), static_cast<long long>(n_ctx),
                     static_cast<long long>(n_prompt), static_cast<long long>(room));
    }
    Session session(*lm.model, so);
    Sampler sampler(a.sampling, static_cast<int32_t>(lm.model->config().n_vocab));
    const auto t_warm = std::chrono::steady_clock::now();
    // (a GPU compiles its decode kernels here, for the positions this run can reach)
    if (!a.no_warmup) session.warm_up(&sampler, a.n_predict < 0 ? -1 : n_prompt + a.n_predict);
    const double warm_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_warm).count();
    std::fprintf(stderr, "tern: seed %llu%s, %s, prompt %s\n", static_cast<unsigned long long>(sampler.seed()),
                 a.sampling.seed == k_sampler_random_seed ? " (random)" : "", ctx_note.c_str(),
                 plural(n_prompt, "token").c_str());
    if (!a.no_display_prompt && !a.json) {
        write_text(stdout, echo);
        std::fflush(stdout);
    }
    std::string generated;
    GenerationStats st;
    {
        PromptProgress progress(session);
        st = generate(session, tok, sampler, ids, a.n_predict, [&](int32_t, const std::string & piece) {
            if (a.json) {
                generated += piece;
            } else {
                write_text(stdout, piece);
                std::fflush(stdout);
            }
            return true;
        });
    }
    const std::string stop = st.stopped_by_eog                                       ? "end_of_text"
                             : a.n_predict >= 0 && st.n_generated >= a.n_predict ? "n_predict"
                                                                                  : "context_full";
    const int64_t n_decode = std::max<int64_t>(0, st.n_generated - 1);
    if (a.json) {
        const ModelConfig & c = lm.model->config();
        nlohmann::json j = {
            {"model", c.name.empty() ? lm.path : c.name},
            {"backend", std::string(lm.backend->name())},
            {"seed", sampler.seed()},
            {"n_ctx", n_ctx},
            {"prompt", echo},
            {"text", generated},
            {"n_prompt_tokens", n_prompt},
            {"n_generated_tokens", st.n_generated},
            {"stop", stop},
            {"timings",
             {{"load_ms", lm.load_ms},
              {"warmup_ms", warm_ms},
              {"prompt_ms", st.prompt_ms},
              {"prompt_tokens_per_second", per_second(n_prompt, st.prompt_ms)},
              {"generation_ms", st.generate_ms},
              {"decode_steps", n_decode},
              {"decode_ms", st.decode_ms},
              {"decode_ms_per_token", n_decode > 0 ? st.decode_ms / static_cast<double>(n_decode) : 0.0},
              {"decode_tokens_per_second", n_decode > 0 ? per_second(n_decode, st.decode_ms) : 0.0}}},
        };
        // Generated bytes need not be valid UTF-8 (a token may end inside a character): U+FFFD then.
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
        std::fputs("\n", stdout);
    }
    std::fflush(stdout);
    // The first token comes from the prompt's logits; generation speed is over the decode steps
    // that made the rest (as llama.cpp's "eval time ... runs").
    std::string gen = plural(st.n_generated, "token");
    if (n_decode > 0) {
        gen += format(", %s in %.1f ms (%.2f ms/token, %.2f tok/s)", plural(n_decode, "decode step").c_str(), st.decode_ms,
                      st.decode_ms / static_cast<double>(n_decode), per_second(n_decode, st.decode_ms));
    } else if (st.n_generated == 1) {
        gen += " (from the prompt's logits: no decode step to time)";
    }
    std::fprintf(stderr, "tern: load %.0f ms | warm-up %.0f ms | prompt %s | generated %s%s\n", lm.load_ms, warm_ms,
                 timing(n_prompt, st.prompt_ms).c_str(),
                 gen.c_str(),
                 stop == "end_of_text"    ? ", stopped at end of text"
                 : stop == "context_full" ? format(", stopped: the context (%lld tokens) is full", static_cast<long long>(n_ctx)).c_str()
                                                       : "");
}

}  // namespace

void register_run(CLI::App & app) {
    auto   args = std::make_shared<RunArgs>();
    auto * cmd  = app.add_subcommand("run", "generate text that continues a prompt");
    add_model_args(*cmd, args->model);
    cmd->add_option("-p,--prompt", args->prompt, "prompt text (special-token text such as <|eot_id|> is parsed)");
    cmd->add_option("-f,--file", args->file, "read the prompt from a file")->check(readable_file());
    cmd->add_option("-n,--n-predict,--predict", args->n_predict,
                    "tokens to generate (-1 = until end of text or full context)")
        ->check(int_in(-1, int64_t{1} << 24))->capture_default_str();
    cmd->add_flag("--no-display-prompt", args->no_display_prompt, "do not echo the prompt before the generated text");
    cmd->add_flag("--truncate-prompt", args->truncate,
                  "keep only the end of a prompt longer than the context (the echo then shows that end)");
    cmd->add_flag("--no-warmup", args->no_warmup,
                  "skip the warm-up decode steps before the prompt (on a GPU they compile the decode kernels, including "
                  "the forms attention takes deeper into the context, so that the decode steps' time is their own)");
    cmd->add_flag("--json", args->json,
                  "print one JSON object (model, seed, n_ctx, prompt, text, token counts, stop reason, timings) "
                  "instead of the text, for scripts");
    cmd->add_flag("--conversation", args->conversation, "llama.cpp's -cnv: start `tern chat` (-p is the first message)");
    cmd->add_flag("--no-conversation", args->no_conversation, "llama.cpp's -no-cnv: continue text (what run does)");
    cmd->add_option("--system-prompt", args->system, "llama.cpp's -sys: the chat's system message (with -cnv)");
    add_context_args(*cmd, args->ctx);
    add_sampler_args(*cmd, args->sampling, args->seed);
    cmd->footer("Examples:\n"
                "  tern run -p \"The ship\" -n 64 --temp 0.7 --seed 42          (tern's default model)\n"
                "  tern run -p \"The ship\" -n 16 --temp 0 --json               (one JSON object for scripts)\n"
                "  tern run -m ggml-model-i2_s.gguf -p \"The capital of France is\" --temp 0 -ngl 99");
    cmd->callback([args] { run(*args); });
}

}  // namespace tern::cli
