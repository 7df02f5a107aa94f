// NLL, running statistics and the KL-divergence base file; see perplexity_stats.h.
#include "perplexity_stats.h"

#include "core/error.h"
#include "core/output_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sys/stat.h>

namespace tern::cli {
namespace {

constexpr char     k_magic[8]     = {'T', 'E', 'R', 'N', 'K', 'L', 'D', '1'};
constexpr float    k_range_nats   = 16.0f;  // below the top token's log-prob, rows are clamped
constexpr uint32_t k_max_vocab    = 1u << 24;

void put_u32(std::vector<uint8_t> & out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

double token_nll(std::span<const float> logits, int32_t target) {
    double max = logits[0];
    for (float l : logits) max = std::max(max, static_cast<double>(l));
    double sum = 0.0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
    return std::log(sum) + max - static_cast<double>(logits[static_cast<size_t>(target)]);
}

void RunningMean::add(double x) {
    ++n;
    const double d = x - mean;
    mean += d / static_cast<double>(n);
    m2 += d * (x - mean);
}

double RunningMean::stderr_of_mean() const {
    if (n < 2) return 0.0;
    return std::sqrt(m2 / static_cast<double>(n - 1) / static_cast<double>(n));
}

KlBaseWriter::KlBaseWriter(const std::string & path, const KlBaseHeader & h) : out_(std::make_unique<OutputFile>(path)) {
    std::vector<uint8_t> head(k_magic, k_magic + 8);
    for (uint32_t v : {h.n_vocab, h.n_ctx, h.n_chunk, h.first, static_cast<uint32_t>(h.tokens.size())}) put_u32(head, v);
    for (int32_t t : h.tokens) put_u32(head, static_cast<uint32_t>(t));
    out_->write(head.data(), head.size());
    row_.resize(h.n_vocab);
}

KlBaseWriter::~KlBaseWriter() = default;

void KlBaseWriter::add_row(std::span<const float> logits, int32_t target) {
    float max = logits[0], min = logits[0];
    for (float l : logits) max = std::max(max, l), min = std::min(min, l);
    min = std::max(min, max - k_range_nats);
    double sum = 0.0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
    const float log_sum = static_cast<float>(std::log(sum));
    const float scale   = max > min ? (max - min) / 65535.0f : 1.0f;
    const float min_lp  = min - max - log_sum;
    for (size_t i = 0; i < logits.size(); ++i) {
        const float q = std::round(std::max(logits[i] - min, 0.0f) / scale);
        row_[i]       = static_cast<uint16_t>(std::min(q, 65535.0f));
    }
    const float nll = static_cast<float>(token_nll(logits, target));
    out_->write(&scale, 4);
    out_->write(&min_lp, 4);
    out_->write(&nll, 4);
    out_->write(row_.data(), row_.size() * 2);
}

void KlBaseWriter::commit() { out_->commit(); }

KlBaseReader::KlBaseReader(const std::string & path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) fail(ErrorKind::io, format("cannot open the KL-divergence base '%s': %s", path.c_str(), std::strerror(errno)));
    auto bad = [&](const char * what) {
        fail(ErrorKind::invalid_argument, format("'%s' is not a KL-divergence base file: %s", path.c_str(), what),
             "make one with `tern perplexity -f TEXT --kl-divergence-base FILE` (without --kl-divergence)");
    };
    char     magic[8] = {};
    uint32_t v[5]     = {};
    if (std::fread(magic, 1, 8, file_) != 8 || std::memcmp(magic, k_magic, 8) != 0) bad("it does not start with TERNKLD1");
    if (std::fread(v, 4, 5, file_) != 5) bad("the header is cut short");
    header_.n_vocab = v[0];
    header_.n_ctx   = v[1];
    header_.n_chunk = v[2];
    header_.first   = v[3];
    if (v[0] == 0 || v[0] > k_max_vocab || v[1] < 2 || v[3] + 1 >= v[1] || v[2] == 0 ||
        static_cast<uint64_t>(v[1]) * v[2] > v[4]) {
        bad("its header is inconsistent");
    }
    // The size must be exactly what the header says: a wrong or cut file is caught before reading.
    struct stat st {};
    const uint64_t rows = static_cast<uint64_t>(v[2]) * (v[1] - 1 - v[3]);
    const uint64_t want = 8 + 20 + 4ull * v[4] + rows * (12 + 2ull * v[0]);
    if (::fstat(::fileno(file_), &st) != 0 || static_cast<uint64_t>(st.st_size) != want) {
        fail(ErrorKind::invalid_argument,
             format("the KL-divergence base '%s' is %lld bytes, but its header describes %llu", path.c_str(),
                    static_cast<long long>(st.st_size), static_cast<unsigned long long>(want)),
             "make it again: it was written by a run that did not finish, or changed since");
    }
    header_.tokens.resize(v[4]);
    if (std::fread(header_.tokens.data(), 4, v[4], file_) != v[4]) bad("the token list is cut short");
    q_.resize(header_.n_vocab);
}

KlBaseReader::~KlBaseReader() {
    if (file_) std::fclose(file_);
}

double KlBaseReader::next_row(std::vector<float> & log_probs) {
    float sm[3];
    if (std::fread(sm, 4, 3, file_) != 3 || std::fread(q_.data(), 2, q_.size(), file_) != q_.size()) {
        fail(ErrorKind::invalid_argument, format("the KL-divergence base '%s' is cut short", path_.c_str()),
             "make it again: it was written by a run that did not finish");
    }
    log_probs.resize(q_.size());
    for (size_t i = 0; i < q_.size(); ++i) log_probs[i] = sm[1] + static_cast<float>(q_[i]) * sm[0];
    return sm[2];
}

KlRow compare_with_base(std::span<const float> logits, std::span<const float> base, double base_nll, int32_t target) {
    double max = logits[0];
    size_t top = 0, top_base = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
        if (logits[i] > logits[top]) top = i;
        if (base[i] > base[top_base]) top_base = i;
        max = std::max(max, static_cast<double>(logits[i]));
    }
    double sum = 0.0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
    const double log_sum = std::log(sum) + max;
    KlRow        r;
    for (size_t i = 0; i < logits.size(); ++i) {
        const double lp_base = base[i];
        r.kld += std::exp(lp_base) * (lp_base - (static_cast<double>(logits[i]) - log_sum));
    }
    r.nll      = log_sum - static_cast<double>(logits[static_cast<size_t>(target)]);
    r.nll_base = base_nll;
    r.same_top = top == top_base;
    return r;
}

void KlSummary::add(const KlRow & r) {
    nll.add(r.nll);
    nll_base.add(r.nll_base);
    log_ratio.add(r.nll - r.nll_base);
    kld.add(r.kld);
    same_top.add(r.same_top ? 1.0 : 0.0);
    klds.push_back(static_cast<float>(r.kld));
}

}  // namespace tern::cli
