// `tern run`: generate a continuation of a prompt, streaming text to stdout and a timing summary
// to stderr.
#include "cli_common.h"
#include "commands.h"

#include "core/error.h"

#include <chrono>
#include <cstdio>

namespace tern::cli {
namespace {

struct RunArgs {
    ModelArgs     model;
    ContextArgs   ctx;
    SamplerParams sampling;
    std::string   prompt, file;
    int64_t       n_predict         = 128;
    bool          no_display_prompt = false;
    bool          truncate          = false;
    bool          no_warmup         = false;
};

void run(const RunArgs & a) {
    validate(a.sampling);
    const std::string text = read_prompt(a.prompt, a.file, false);
    LoadedModel       lm   = load_model(a.model);
    const Tokenizer & tok  = *lm.tokenizer;
    std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/true, /*parse_special=*/true);
    if (ids.empty()) {
        fail(ErrorKind::invalid_argument, "the prompt is empty and the model adds no BOS token", "give a prompt with -p");
    }
    const SessionOptions so = session_options(a.ctx, *lm.model);
    const int64_t n_ctx = so.n_ctx;
    if (static_cast<int64_t>(ids.size()) >= n_ctx) {
        if (!a.truncate) {
            fail(ErrorKind::invalid_argument,
                 format("the prompt is %zu tokens, but the context holds %lld (and generation needs room)", ids.size(),
                        static_cast<long long>(n_ctx)),
                 "raise -c, shorten the prompt, or pass --truncate-prompt to keep only its end");
        }
        // Keep the first token (BOS) and the last tokens, leaving a quarter of the context to generate.
        const size_t keep = static_cast<size_t>(std::max<int64_t>(1, n_ctx - 1 - n_ctx / 4));
        std::vector<int32_t> cut{ids.front()};
        cut.insert(cut.end(), ids.end() - static_cast<std::ptrdiff_t>(keep), ids.end());
        std::fprintf(stderr, "note: prompt truncated from %zu to %zu tokens\n", ids.size(), cut.size());
        ids = std::move(cut);
    }
    Session session(*lm.model, so);
    Sampler sampler(a.sampling, static_cast<int32_t>(lm.model->config().n_vocab));
    const auto t_warm = std::chrono::steady_clock::now();
    if (!a.no_warmup) session.warm_up(&sampler);
    const double warm_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_warm).count();
    std::fprintf(stderr, "tern: seed %llu, context %lld, prompt %zu tokens\n",
                 static_cast<unsigned long long>(sampler.seed()), static_cast<long long>(n_ctx), ids.size());
    if (!a.no_display_prompt) {
        std::fputs(text.c_str(), stdout);
        std::fflush(stdout);
    }
    const GenerationStats st = generate(session, tok, sampler, ids, a.n_predict, [](int32_t, const std::string & piece) {
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
        return true;
    });
    std::fputs("\n", stdout);
    std::fflush(stdout);
    auto rate = [](int64_t n, double ms) { return ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0; };
    std::fprintf(stderr,
                 "tern: load %.0f ms | warm-up %.0f ms | prompt %lld tokens in %.1f ms (%.2f tok/s) | generated %lld "
                 "tokens in %.1f ms (%.2f tok/s)%s\n",
                 lm.load_ms, warm_ms, static_cast<long long>(st.n_prompt), st.prompt_ms, rate(st.n_prompt, st.prompt_ms),
                 static_cast<long long>(st.n_generated), st.generate_ms, rate(st.n_generated, st.generate_ms),
                 st.stopped_by_eog ? ", stopped at end of text" : "");
}

}  // namespace

void register_run(CLI::App & app) {
    auto   args = std::make_shared<RunArgs>();
    auto * cmd  = app.add_subcommand("run", "generate text that continues a prompt");
    add_model_args(*cmd, args->model);
    cmd->add_option("-p,--prompt", args->prompt, "prompt text (special-token text such as <|eot_id|> is parsed)");
    cmd->add_option("-f,--file", args->file, "read the prompt from a file")->check(CLI::ExistingFile);
    cmd->add_option("-n,--n-predict", args->n_predict, "tokens to generate (-1 = until end of text or full context)")
        ->check(CLI::Range(int64_t{-1}, int64_t{1} << 24))->capture_default_str();
    cmd->add_flag("--no-display-prompt", args->no_display_prompt, "do not echo the prompt before the generated text");
    cmd->add_flag("--truncate-prompt", args->truncate, "keep only the end of a prompt longer than the context");
    cmd->add_flag("--no-warmup", args->no_warmup,
                  "skip the warm-up decode step before the prompt (on a GPU it compiles the decode kernels, so that "
                  "the generation time is the tokens' own)");
    add_context_args(*cmd, args->ctx);
    add_sampler_args(*cmd, args->sampling);
    cmd->footer("Examples:\n  tern run -p \"The ship\" -n 64 --temp 0.7 --seed 42        (tern's default model)\n  tern run -m ggml-model-i2_s.gguf -p \"The capital of France is\" --temp 0");
    cmd->callback([args] { run(*args); });
}

}  // namespace tern::cli
