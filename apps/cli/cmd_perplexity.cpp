// `tern perplexity`: llama-perplexity's method. The file's tokens (BOS first) are cut into windows
// of -c tokens; each window is evaluated from scratch with its first token replaced by BOS, and the
// second half of it is scored (every token then has at least c/2 tokens of context), so numbers
// compare with llama.cpp's. --score-all scores every token of a window instead (with -c at least
// the file's length: the plain perplexity of the whole file in one context). --kl-divergence-base
// FILE saves the run's log-probabilities; adding --kl-divergence compares this run with them.
#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"
#include "perplexity_stats.h"

#include "core/error.h"
#include "core/output_file.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace tern::cli {
namespace {

// llama-perplexity's default context (it sets 512 before reading flags); perplexities people
// quote for wikitext-2 use it.
constexpr int64_t k_perplexity_default_ctx = 512;

struct PerplexityArgs {
    ModelArgs   model;
    ContextArgs ctx;
    std::string file;
    int64_t     chunks    = -1;
    bool        score_all = false;
    bool        json      = false;
    std::string logits_out;
    std::string kl_base;
    bool        kl = false;
};

double percentile(std::vector<float> v, double p) {
    if (v.empty()) return 0.0;
    const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

void perplexity(const PerplexityArgs & a) {
    if (a.kl && a.kl_base.empty()) {
        fail(ErrorKind::invalid_argument, "--kl-divergence needs --kl-divergence-base FILE (the base run's file)",
             "first run `tern perplexity -f TEXT --kl-divergence-base base.kld` with the reference model or backend");
    }
    if (!a.kl && a.file.empty()) {
        fail(ErrorKind::invalid_argument, "no text given", "pass the text to score with -f FILE (e.g. wiki.test.raw)");
    }
    std::unique_ptr<KlBaseReader> base;
    if (a.kl) base = std::make_unique<KlBaseReader>(a.kl_base);
    const std::string text = a.file.empty() ? std::string() : read_prompt("", a.file, true);
    LoadedModel       lm   = load_model(a.model, a.json);
    const Tokenizer & tok  = *lm.tokenizer;
    const int64_t     n_vocab = lm.model->config().n_vocab;

    std::vector<int32_t> tokens;
    if (base) {
        const KlBaseHeader & h = base->header();
        if (h.n_vocab != n_vocab) {
            fail(ErrorKind::invalid_argument, format("the KL-divergence base '%s' has %u logits per token, this model %lld",
                                                     a.kl_base.c_str(), h.n_vocab, static_cast<long long>(n_vocab)),
                 "compare models that share a vocabulary");
        }
        tokens = h.tokens;
        for (int32_t t : tokens) {
            if (t < 0 || t >= n_vocab) {
                fail(ErrorKind::invalid_argument, format("the KL-divergence base '%s' holds token id %d, outside this "
                                                         "model's vocabulary", a.kl_base.c_str(), t));
            }
        }
    } else {
        if (tok.bos_id() >= 0) tokens.push_back(tok.bos_id());
        const std::vector<int32_t> body = tok.encode(text, false, false);
        tokens.insert(tokens.end(), body.begin(), body.end());
    }
    if (base && !text.empty()) {
        std::vector<int32_t> from_text;
        if (tok.bos_id() >= 0) from_text.push_back(tok.bos_id());
        const std::vector<int32_t> body = tok.encode(text, false, false);
        from_text.insert(from_text.end(), body.begin(), body.end());
        if (from_text != tokens) {
            fail(ErrorKind::invalid_argument,
                 format("-f '%s' does not tokenize to the tokens the KL-divergence base was made from", a.file.c_str()),
                 "leave -f out: --kl-divergence scores the base file's own tokens");
        }
    }
    const auto n_tokens = static_cast<int64_t>(tokens.size());

    // The window: -c, the base file's, or llama-perplexity's default (at most the trained context).
    const int64_t trained = lm.model->config().n_ctx_train;
    int64_t       n_ctx   = a.ctx.n_ctx > 0 ? a.ctx.n_ctx : std::min(trained, k_perplexity_default_ctx);
    if (base) {
        if (a.ctx.n_ctx > 0 && a.ctx.n_ctx != base->header().n_ctx) {
            fail(ErrorKind::invalid_argument, format("-c %lld differs from the KL-divergence base's window of %u tokens",
                                                     static_cast<long long>(a.ctx.n_ctx), base->header().n_ctx),
                 "leave -c out: the base decides the window");
        }
        n_ctx = base->header().n_ctx;
    } else if (a.ctx.n_ctx > trained) {
        std::fprintf(stderr, "warning: -c %lld is above the context the model was trained with (%lld)\n",
                     static_cast<long long>(a.ctx.n_ctx), static_cast<long long>(trained));
    }
    int64_t n_chunk = n_tokens / n_ctx;
    if (n_chunk == 0 && a.score_all && n_tokens >= 2) {
        n_ctx   = n_tokens;  // the whole file in one window
        n_chunk = 1;
    }
    if (n_chunk == 0) {
        fail(ErrorKind::invalid_argument,
             format("the file is %lld tokens (with BOS), less than one window of -c %lld tokens", static_cast<long long>(n_tokens),
                    static_cast<long long>(n_ctx)),
             format("use a longer text, -c %lld or less, or --score-all to score the whole file in one window",
                    static_cast<long long>(std::max<int64_t>(2, n_tokens))));
    }
    const int64_t first = base ? base->header().first : a.score_all ? 0 : n_ctx / 2;
    if (base) n_chunk = std::min<int64_t>(n_chunk, base->header().n_chunk);
    if (a.chunks > 0) n_chunk = std::min(n_chunk, a.chunks);
    const int64_t unscored_tail = n_tokens - n_chunk * n_ctx;

    SessionOptions so = session_options(a.ctx, *lm.model);
    so.n_ctx          = n_ctx;
    Session       session(*lm.model, so);
    const int64_t n_batch = std::min(so.n_batch, n_ctx);

    std::unique_ptr<OutputFile> logits_out;
    if (!a.logits_out.empty()) logits_out = std::make_unique<OutputFile>(a.logits_out);
    std::unique_ptr<KlBaseWriter> base_out;
    if (!a.kl && !a.kl_base.empty()) {
        KlBaseHeader h;
        h.n_vocab = static_cast<uint32_t>(n_vocab);
        h.n_ctx   = static_cast<uint32_t>(n_ctx);
        h.n_chunk = static_cast<uint32_t>(n_chunk);
        h.first   = static_cast<uint32_t>(first);
        h.tokens  = tokens;
        base_out  = std::make_unique<KlBaseWriter>(a.kl_base, h);
    }
    if (!a.json) {
        std::fprintf(stderr, "tern: %lld tokens; %lld window%s of %lld tokens, scoring %s of each%s\n",
                     static_cast<long long>(n_tokens), static_cast<long long>(n_chunk), n_chunk == 1 ? "" : "s",
                     static_cast<long long>(n_ctx),
                     first == 0 ? "every token" : format("the last %lld tokens", static_cast<long long>(n_ctx - 1 - first)).c_str(),
                     unscored_tail > 0 ? format(" (the last %lld tokens fill no window and are not scored)",
                                                static_cast<long long>(unscored_tail)).c_str()
                                       : "");
    }

    const bool  add_bos = tok.add_bos() && tok.bos_id() >= 0;
    RunningMean nll;
    KlSummary   kl;
    std::vector<float>   logits(static_cast<size_t>(n_batch * n_vocab));
    std::vector<float>   base_lp;
    std::vector<double>  running;  // the estimate after each window
    std::vector<int32_t> window(static_cast<size_t>(n_ctx));
    ProgressBar          bar("perplexity", static_cast<uint64_t>(n_chunk * n_ctx), true, 1.0);
    const auto           t0 = std::chrono::steady_clock::now();
    for (int64_t k = 0; k < n_chunk; ++k) {
        std::copy_n(tokens.begin() + k * n_ctx, n_ctx, window.begin());
        if (add_bos) window[0] = tok.bos_id();
        session.reset();
        for (int64_t start = 0; start < n_ctx; start += n_batch) {
            const int64_t m = std::min(n_batch, n_ctx - start);
            session.eval(std::span<const int32_t>(window.data() + start, static_cast<size_t>(m)),
                         std::span<float>(logits.data(), static_cast<size_t>(m * n_vocab)));
            if (logits_out) logits_out->write(logits.data(), static_cast<size_t>(m * n_vocab) * sizeof(float));
            for (int64_t i = 0; i < m; ++i) {
                const int64_t pos = start + i;
                if (pos < first || pos + 1 >= n_ctx) continue;
                const std::span<const float> row(logits.data() + i * n_vocab, static_cast<size_t>(n_vocab));
                const int32_t                target = window[static_cast<size_t>(pos + 1)];
                if (base) {
                    const double base_nll = base->next_row(base_lp);
                    const KlRow  r        = compare_with_base(row, base_lp, base_nll, target);
                    kl.add(r);
                    nll.add(r.nll);
                } else {
                    nll.add(token_nll(row, target));
                    if (base_out) base_out->add_row(row, target);
                }
            }
            bar.update(static_cast<uint64_t>(k * n_ctx + start + m));
        }
        running.push_back(std::exp(nll.mean));
        bar.set_suffix(format("window %lld/%lld, ppl %.4f", static_cast<long long>(k + 1), static_cast<long long>(n_chunk),
                              running.back()));
        if (!a.json && !bar.active()) {  // llama-perplexity's running estimate: [1]8.1234,[2]...
            std::printf("[%lld]%.4f,", static_cast<long long>(k + 1), running.back());
            std::fflush(stdout);
        }
    }
    bar.finish(false);
    if (logits_out) logits_out->commit();
    if (base_out) base_out->commit();
    const double ms     = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double ppl    = std::exp(nll.mean);
    const double ppl_se = ppl * nll.stderr_of_mean();
    const double tps    = ms > 0 ? 1000.0 * static_cast<double>(n_chunk * n_ctx) / ms : 0.0;
    const double ppl_base = base ? std::exp(kl.nll_base.mean) : 0.0;
    if (a.json) {
        nlohmann::json j = {{"n_tokens", n_tokens}, {"n_ctx", n_ctx}, {"n_chunks", n_chunk}, {"first_scored", first},
                            {"n_scored", nll.n}, {"nll", nll.mean}, {"nll_stderr", nll.stderr_of_mean()}, {"ppl", ppl},
                            {"ppl_stderr", ppl_se}, {"chunk_ppl", running}, {"eval_ms", ms}};
        if (base) {
            j["kl_divergence"] = {{"ppl_base", ppl_base},
                                  {"delta_ppl", ppl - ppl_base},
                                  {"mean_log_ppl_ratio", kl.log_ratio.mean},
                                  {"mean_log_ppl_ratio_stderr", kl.log_ratio.stderr_of_mean()},
                                  {"kld_mean", kl.kld.mean},
                                  {"kld_stderr", kl.kld.stderr_of_mean()},
                                  {"kld_max", percentile(kl.klds, 1.0)},
                                  {"kld_99_9", percentile(kl.klds, 0.999)},
                                  {"kld_99", percentile(kl.klds, 0.99)},
                                  {"kld_median", percentile(kl.klds, 0.5)},
                                  {"same_top_p", kl.same_top.mean},
                                  {"same_top_p_stderr", kl.same_top.stderr_of_mean()}};
        }
        std::printf("%s\n", j.dump().c_str());
        return;
    }
    if (!bar.active()) std::printf("\n");
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_se);
    std::printf("perplexity: %.4f over %lld tokens in %lld window%s of %lld (mean NLL %.6f nats; %.1f tok/s)\n", ppl,
                static_cast<long long>(nll.n), static_cast<long long>(n_chunk), n_chunk == 1 ? "" : "s",
                static_cast<long long>(n_ctx), nll.mean, tps);
    if (!base) return;
    const double r = kl.same_top.mean;
    std::printf("\n====== Perplexity statistics ======\n");
    std::printf("Mean PPL(Q)                   : %10.6f +/- %10.6f\n", ppl, ppl_se);
    std::printf("Mean PPL(base)                : %10.6f +/- %10.6f\n", ppl_base, ppl_base * kl.nll_base.stderr_of_mean());
    std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f +/- %10.6f\n", kl.log_ratio.mean, kl.log_ratio.stderr_of_mean());
    std::printf("Mean PPL(Q)/PPL(base)         : %10.6f\n", std::exp(kl.log_ratio.mean));
    std::printf("Mean PPL(Q)-PPL(base)         : %10.6f\n", ppl - ppl_base);
    std::printf("\n====== KL divergence statistics ======\n");
    std::printf("Mean    KLD: %10.6f +/- %10.6f\n", kl.kld.mean, kl.kld.stderr_of_mean());
    std::printf("Maximum KLD: %10.6f\n", percentile(kl.klds, 1.0));
    std::printf("99.9%%   KLD: %10.6f\n", percentile(kl.klds, 0.999));
    std::printf("99.0%%   KLD: %10.6f\n", percentile(kl.klds, 0.99));
    std::printf("Median  KLD: %10.6f\n", percentile(kl.klds, 0.5));
    std::printf("\n====== Token probability statistics ======\n");
    std::printf("Same top p: %6.3f +/- %5.3f %%\n", 100.0 * r, 100.0 * kl.same_top.stderr_of_mean());
}

}  // namespace

void register_perplexity(CLI::App & app) {
    auto   args = std::make_shared<PerplexityArgs>();
    auto * cmd  = app.add_subcommand("perplexity", "perplexity of a text file (llama-perplexity's method), KL divergence");
    add_model_args(*cmd, args->model);
    cmd->add_option("-f,--file", args->file, "text file (at most 256 MiB)")->check(readable_file());
    cmd->add_option("--chunks", args->chunks, "score at most this many windows (default: all)")->check(int_in(1, INT32_MAX));
    cmd->add_flag("--score-all", args->score_all,
                  "score every token of each window, not only its second half; a file shorter than -c is then one window");
    cmd->add_flag("--json", args->json,
                  "print one JSON object (n_tokens, n_ctx, n_chunks, n_scored, ppl, ppl_stderr, chunk_ppl, ...) instead of text");
    cmd->add_option("--logits-out", args->logits_out,
                    "write float32 little-endian logits [n_chunks * n_ctx][n_vocab]: row k*n_ctx + i follows tokens "
                    "0..i of window k (its first token replaced by BOS)");
    cmd->add_option("--kl-divergence-base", args->kl_base,
                    "without --kl-divergence: save this run's log-probabilities to FILE (large: 2 bytes per "
                    "vocabulary entry per scored token; the format is in apps/cli/perplexity_stats.h); with it: the base "
                    "to compare with");
    cmd->add_flag("--kl-divergence", args->kl,
                  "compare this run with --kl-divergence-base FILE on the file's own tokens: mean KL divergence, "
                  "top-token agreement, PPL(Q) vs PPL(base)");
    add_context_args(*cmd, args->ctx);
    cmd->footer("-c is the window (default: 512, as llama-perplexity; at most the trained context).\n"
                "Examples:\n"
                "  tern perplexity -f wiki.test.raw -m ggml-model-i2_s.gguf\n"
                "  tern perplexity -f tests/data/default_model/chunk_000.txt -c 128 --json\n"
                "  tern perplexity -f text.txt --kl-divergence-base base.kld --cache-type-k f32 --cache-type-v f32\n"
                "  tern perplexity --kl-divergence-base base.kld --kl-divergence");
    cmd->callback([args] { perplexity(*args); });
}

}  // namespace tern::cli
