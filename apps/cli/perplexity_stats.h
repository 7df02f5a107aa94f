// Scoring for `tern perplexity`: the negative log-likelihood of a token, the running statistics
// llama-perplexity prints, and the KL-divergence base file (one run's log-probabilities, to compare
// another run against: a quantization, a kernel change, a backend).
//
// KL-divergence base file (little-endian; tern's own format, laid out like llama.cpp's):
//   "TERNKLD1" | u32 n_vocab | u32 n_ctx | u32 n_chunk | u32 first | u32 n_tokens | i32 tokens[n_tokens]
//   then per chunk, per scored position (n_ctx - 1 - first of them), one row:
//     f32 scale | f32 min_log_prob | f32 nll | u16 q[n_vocab]     log p[i] = min_log_prob + q[i] * scale
//   A row covers the 16 nats below its most likely token (step 16/65535 = 0.00024 nats); less
//   likely tokens are stored as the bottom of that range. nll is the exact -log p of the token that
//   follows (llama.cpp reads it from the 16-bit table, which clamps it for unlikely tokens), so
//   PPL(base) is the base run's perplexity. Scored positions: `first` .. n_ctx - 2
//   of each window of n_ctx tokens, predicting the next token (first = n_ctx / 2: llama.cpp's rule).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tern {
class OutputFile;
}

namespace tern::cli {

// -log softmax(logits)[target], computed in double.
double token_nll(std::span<const float> logits, int32_t target);

// Mean and standard error of a sequence of values (Welford), as llama-perplexity reports them.
struct RunningMean {
    int64_t n    = 0;
    double  mean = 0, m2 = 0;
    void    add(double x);
    double  stderr_of_mean() const;  // 0 for n < 2
};

struct KlBaseHeader {
    uint32_t             n_vocab = 0, n_ctx = 0, n_chunk = 0, first = 0;
    std::vector<int32_t> tokens;
    uint64_t rows_per_chunk() const { return n_ctx - 1 - first; }
};

// Writes a base file: header, then rows in scoring order.
class KlBaseWriter {
public:
    KlBaseWriter(const std::string & path, const KlBaseHeader & header);
    ~KlBaseWriter();
    void add_row(std::span<const float> logits, int32_t target);
    void commit();  // the file appears (renamed over the target) only when complete

private:
    std::unique_ptr<OutputFile> out_;
    std::vector<uint16_t>       row_;
};

// Reads a base file row by row; throws Error(invalid_argument/io) naming the file when it is not
// one or is cut short.
class KlBaseReader {
public:
    explicit KlBaseReader(const std::string & path);
    ~KlBaseReader();
    const KlBaseHeader & header() const { return header_; }
    // The next row's log-probabilities, [n_vocab]; returns its exact NLL of the next token.
    double next_row(std::vector<float> & log_probs);

private:
    std::string           path_;
    FILE *                file_ = nullptr;
    KlBaseHeader          header_;
    std::vector<uint16_t> q_;
};

// One scored position compared with the base: KL(base || this), whether the top tokens agree,
// and both NLLs of the actual next token.
struct KlRow {
    double kld = 0, nll = 0, nll_base = 0;
    bool   same_top = false;
};
KlRow compare_with_base(std::span<const float> logits, std::span<const float> base_log_probs, double base_nll,
                        int32_t target);

// The summary llama-perplexity prints for --kl-divergence.
struct KlSummary {
    RunningMean nll, nll_base, log_ratio, kld, same_top;
    std::vector<float> klds;  // every position's KLD, for the percentiles
    void add(const KlRow & r);
};

}  // namespace tern::cli
