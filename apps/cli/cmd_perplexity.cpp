// `tern perplexity`: BOS followed by a file's tokens, evaluated in one context; prints the
// perplexity exp(mean NLL of tokens 1..n-1), optionally all logits as float32 rows.
#include "cli_common.h"
#include "commands.h"

#include "core/error.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace tern::cli {
namespace {

struct PerplexityArgs {
    ModelArgs   model;
    ContextArgs ctx;
    std::string file;
    bool        json = false;
    std::string logits_out;
};

// -log softmax(logits)[target], computed in double.
double nll(const float * logits, int64_t n_vocab, int32_t target) {
    double max = logits[0];
    for (int64_t i = 1; i < n_vocab; ++i) max = std::max(max, static_cast<double>(logits[i]));
    double sum = 0.0;
    for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
    return std::log(sum) + max - static_cast<double>(logits[target]);
}

void perplexity(const PerplexityArgs & a) {
    const std::string text = read_prompt("", a.file, true);
    LoadedModel       lm   = load_model(a.model, a.json);
    const Tokenizer & tok  = *lm.tokenizer;
    std::vector<int32_t> ids;
    if (tok.bos_id() >= 0) ids.push_back(tok.bos_id());
    const std::vector<int32_t> body = tok.encode(text, false, false);
    ids.insert(ids.end(), body.begin(), body.end());
    if (ids.size() < 2) fail(ErrorKind::invalid_argument, "the file has too little text: need at least one token after BOS");
    SessionOptions so = session_options(a.ctx, *lm.model);
    const auto     n  = static_cast<int64_t>(ids.size());
    if (n > so.n_ctx) {
        fail(ErrorKind::invalid_argument,
             format("the file is %lld tokens (with BOS) but the context holds %lld", static_cast<long long>(n),
                    static_cast<long long>(so.n_ctx)),
             format("raise the context with -c %lld (the model was trained with %lld), or use a shorter file",
                    static_cast<long long>(n), static_cast<long long>(lm.model->config().n_ctx_train)));
    }
    Session       session(*lm.model, so);
    const int64_t n_vocab = lm.model->config().n_vocab;
    const int64_t chunk   = std::min<int64_t>(so.n_batch, n);
    std::vector<float> logits(static_cast<size_t>(chunk * n_vocab));
    FILE * out = nullptr;
    if (!a.logits_out.empty()) {
        out = std::fopen(a.logits_out.c_str(), "wb");
        if (!out) fail(ErrorKind::io, format("cannot create '%s': %s", a.logits_out.c_str(), std::strerror(errno)));
    }
    double    sum_nll = 0.0;
    const auto t0     = std::chrono::steady_clock::now();
    for (int64_t start = 0; start < n; start += chunk) {
        const int64_t m = std::min(chunk, n - start);
        session.eval(std::span<const int32_t>(ids.data() + start, static_cast<size_t>(m)),
                     std::span<float>(logits.data(), static_cast<size_t>(m * n_vocab)));
        for (int64_t i = 0; i < m; ++i) {
            const int64_t pos = start + i;
            if (pos + 1 < n) sum_nll += nll(logits.data() + i * n_vocab, n_vocab, ids[static_cast<size_t>(pos + 1)]);
        }
        if (out && std::fwrite(logits.data(), sizeof(float), static_cast<size_t>(m * n_vocab), out) !=
                       static_cast<size_t>(m * n_vocab)) {
            std::fclose(out);
            fail(ErrorKind::io, format("cannot write '%s'", a.logits_out.c_str()));
        }
    }
    if (out && std::fclose(out) != 0) fail(ErrorKind::io, format("cannot write '%s'", a.logits_out.c_str()));
    const double ms   = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double mean = sum_nll / static_cast<double>(n - 1);
    const double ppl  = std::exp(mean);
    if (a.json) {
        nlohmann::json j = {{"n_tokens", n}, {"n_scored", n - 1}, {"nll", mean}, {"ppl", ppl},
                            {"n_ctx", so.n_ctx}, {"eval_ms", ms}};
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("perplexity: %.4f over %lld tokens (mean NLL %.6f nats; %.1f tok/s)\n", ppl,
                    static_cast<long long>(n - 1), mean, 1000.0 * static_cast<double>(n) / ms);
    }
}

}  // namespace

void register_perplexity(CLI::App & app) {
    auto   args = std::make_shared<PerplexityArgs>();
    auto * cmd  = app.add_subcommand("perplexity", "perplexity of a text file, evaluated in one context");
    add_model_args(*cmd, args->model);
    cmd->add_option("-f,--file", args->file, "text file")->required()->check(CLI::ExistingFile);
    cmd->add_flag("--json", args->json, "print one JSON object (n_tokens, ppl, nll, ...) instead of text");
    cmd->add_option("--logits-out", args->logits_out,
                    "write float32 little-endian logits [n_tokens][n_vocab]; row i follows tokens 0..i");
    add_context_args(*cmd, args->ctx);
    cmd->footer("Example: tern perplexity -m ggml-model-i2_s.gguf -f wiki.test.txt -c 4096 --json");
    cmd->callback([args] { perplexity(*args); });
}

}  // namespace tern::cli
