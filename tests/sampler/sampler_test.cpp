// Sampler tests: greedy, seeding and determinism, the empirical distribution of draws, the exact
// support left by top-k / top-p / min-p, penalty arithmetic on hand-computed examples, validation.
#include "core/error.h"
#include "sampler/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tern {
namespace {

// Chain with every truncation stage off: draws follow softmax(logits / temp) exactly.
SamplerParams plain(float temp, uint64_t seed = 1234) {
    SamplerParams p;
    p.temp  = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed  = seed;
    return p;
}

std::set<int32_t> support(Sampler & s, const std::vector<float> & logits, int n = 4000) {
    std::set<int32_t> seen;
    for (int i = 0; i < n; ++i) seen.insert(s.sample(logits));
    return seen;
}

std::vector<float> logits_of(const std::vector<double> & probs) {
    std::vector<float> l;
    for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
    return l;
}

// Expects Error(invalid_argument) whose message contains every fragment.
template <typename Fn>
void expect_invalid(Fn && fn, const std::vector<std::string> & fragments) {
    try {
        fn();
        ADD_FAILURE() << "no error thrown";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
        for (const auto & f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
}

TEST(Rng, MatchesReferenceStream) {
    // splitmix64 test vector, and xoshiro256** seeded with four splitmix64 outputs of 42 (computed
    // independently): the stream must be identical on every platform.
    uint64_t st = 0;
    EXPECT_EQ(splitmix64_next(st), 0xe220a8397b1dcdafull);
    Rng r(42);
    EXPECT_EQ(r.next_u64(), 0x15780b2e0c2ec716ull);
    EXPECT_EQ(r.next_u64(), 0x6104d9866d113a7eull);
    EXPECT_EQ(r.next_u64(), 0xae17533239e499a1ull);
    EXPECT_EQ(r.next_u64(), 0xecb8ad4703b360a1ull);
    Rng r0(0);
    EXPECT_DOUBLE_EQ(r0.next_double(), 0.6012629994179048);
    EXPECT_DOUBLE_EQ(r0.next_double(), 0.7477740925472398);
}

TEST(Rng, UniformStaysInUnitInterval) {
    Rng    r(7);
    double lo = 1, hi = 0, sum = 0;
    for (int i = 0; i < 100000; ++i) {
        const double u = r.next_double();
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        lo = std::min(lo, u);
        hi = std::max(hi, u);
        sum += u;
    }
    EXPECT_LT(lo, 1e-3);
    EXPECT_GT(hi, 1 - 1e-3);
    EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(SamplerStages, ExpMatchesLibm) {
    for (double x = -744.0; x <= 0.0; x += 0.0371) {
        const double ref = std::exp(x);
        EXPECT_NEAR(exp_nonpositive(x), ref, std::max(ref * 2e-15, 1e-320)) << x;  // subnormals: 1 ulp
    }
    EXPECT_EQ(exp_nonpositive(0.0), 1.0);
    EXPECT_EQ(exp_nonpositive(-std::numeric_limits<double>::infinity()), 0.0);
    EXPECT_EQ(exp_nonpositive(std::nan("")), 0.0);
    EXPECT_EQ(exp_nonpositive(-1000.0), 0.0);
}

TEST(SamplerStages, TopKKeepsBestAndBreaksTiesByLowerId) {
    std::vector<Candidate> c = {{0, 1.0f}, {1, 3.0f}, {2, 2.0f}, {3, 3.0f}, {4, 2.0f}, {5, 0.0f}};
    const size_t           k = top_k_stage(c, 3);
    ASSERT_EQ(k, 3u);
    EXPECT_EQ(c[0].id, 1);  // 3.0, lower id first
    EXPECT_EQ(c[1].id, 3);
    EXPECT_EQ(c[2].id, 2);  // 2.0: id 2 beats id 4 at the cut
}

TEST(SamplerStages, TopPKeepsShortestPrefixReachingP) {
    std::vector<Candidate> c;
    const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
    for (size_t i = 0; i < p.size(); ++i) c.push_back({static_cast<int32_t>(i), static_cast<float>(std::log(p[i]))});
    EXPECT_EQ(top_p_stage(c, 0.4f), 1u);
    EXPECT_EQ(top_p_stage(c, 0.75f), 2u);
    EXPECT_EQ(top_p_stage(c, 0.85f), 3u);
    EXPECT_EQ(top_p_stage(c, 0.97f), 4u);
    EXPECT_EQ(top_p_stage(c, 1.0f), 4u);
}

TEST(SamplerStages, MinPKeepsRelativeToMaxInOrder) {
    std::vector<Candidate> c;
    const std::vector<double> p = {0.15, 0.5, 0.05, 0.3};  // unsorted: order must be preserved
    for (size_t i = 0; i < p.size(); ++i) c.push_back({static_cast<int32_t>(i), static_cast<float>(std::log(p[i]))});
    const size_t n = min_p_stage(c, 0.25f);  // ratios 0.3, 1, 0.1, 0.6
    ASSERT_EQ(n, 3u);
    EXPECT_EQ(c[0].id, 0);
    EXPECT_EQ(c[1].id, 1);
    EXPECT_EQ(c[2].id, 3);
}

TEST(Sampler, GreedyIsArgmax) {
    Sampler s(plain(0.0f), 6);
    EXPECT_EQ(s.sample(std::vector<float>{0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 2.0f}), 1);  // tie: lowest index
    EXPECT_EQ(s.sample(std::vector<float>{-5.0f, -4.0f, -3.0f, -2.0f, -1.0f, -0.5f}), 5);
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(s.sample(std::vector<float>{-inf, std::nanf(""), -inf, -7.0f, -inf, -inf}), 3);
    EXPECT_EQ(s.sample(std::vector<float>{1.0f, inf, 2.0f, 3.0f, 0.0f, 0.0f}), 1);
    SamplerParams neg = plain(0.0f);
    Sampler       g(neg, 3);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(g.sample(std::vector<float>{0.0f, 0.0f, 0.0f}), 0);
}

TEST(Sampler, TopKOneIsGreedy) {
    SamplerParams p = plain(1.5f, 99);
    p.top_k         = 1;
    Sampler s(p, 50);
    Rng     r(5);
    for (int step = 0; step < 200; ++step) {
        std::vector<float> logits(50);
        for (float & l : logits) l = static_cast<float>(r.next_double() * 4.0 - 2.0);
        if (step % 10 == 0) logits[7] = logits[3] = 5.0f;  // a tie: the lower id wins
        const auto expected = static_cast<int32_t>(argmax(logits));
        ASSERT_EQ(s.sample(logits), expected) << "step " << step;
    }
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedsDiffer) {
    const std::vector<float> logits = {1.0f, 1.2f, 0.8f, 1.1f, 0.9f, 1.05f, 0.95f, 1.15f};
    auto run = [&](uint64_t seed) {
        SamplerParams p = SamplerParams{};  // defaults: top-k 40, top-p 0.95, min-p 0.05, temp 0.8
        p.seed          = seed;
        Sampler              s(p, 8);
        std::vector<int32_t> out;
        for (int i = 0; i < 64; ++i) {
            out.push_back(s.sample(logits));
            s.accept(out.back());
        }
        return out;
    };
    EXPECT_EQ(run(1), run(1));
    EXPECT_EQ(run(123456789), run(123456789));
    EXPECT_NE(run(1), run(2));
    EXPECT_NE(run(2), run(3));
}

TEST(Sampler, ResetReplaysTheStream) {
    Sampler                  s(plain(1.0f, 77), 4);
    const std::vector<float> logits = {0.0f, 0.1f, 0.2f, 0.3f};
    std::vector<int32_t>     a, b;
    for (int i = 0; i < 32; ++i) a.push_back(s.sample(logits));
    s.reset();
    for (int i = 0; i < 32; ++i) b.push_back(s.sample(logits));
    EXPECT_EQ(a, b);
    EXPECT_EQ(s.seed(), 77u);
}

TEST(Sampler, RandomSeedIsResolvedAndReported) {
    SamplerParams p = plain(1.0f, k_sampler_random_seed);
    Sampler       a(p, 4), b(p, 4);
    EXPECT_NE(a.seed(), k_sampler_random_seed);
    EXPECT_NE(a.seed(), b.seed());  // 64 random bits: a collision is not a realistic outcome
    // The reported seed reproduces the run.
    Sampler                  c(plain(1.0f, a.seed()), 4);
    const std::vector<float> logits = {0.0f, 0.5f, 1.0f, 1.5f};
    for (int i = 0; i < 32; ++i) EXPECT_EQ(a.sample(logits), c.sample(logits));
}

TEST(Sampler, DrawsFollowSoftmaxAtTemperatureOne) {
    const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
    double                   z      = 0;
    std::vector<double>      p;
    for (float l : logits) z += std::exp(l);
    for (float l : logits) p.push_back(std::exp(l) / z);
    Sampler          s(plain(1.0f, 2024), 5);
    std::vector<int> hist(5, 0);
    const int        n = 20000;
    for (int i = 0; i < n; ++i) ++hist[static_cast<size_t>(s.sample(logits))];
    for (size_t i = 0; i < 5; ++i) {
        EXPECT_NEAR(hist[i] / double(n), p[i], 0.015) << "token " << i << " p " << p[i];
    }
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
    const std::vector<float> logits = {0.0f, 1.0f};
    auto freq1 = [&](float temp) {
        Sampler s(plain(temp, 11), 2);
        int     ones = 0;
        for (int i = 0; i < 20000; ++i) ones += s.sample(logits);
        return ones / 20000.0;
    };
    auto expect = [](float temp) { return 1.0 / (1.0 + std::exp(-1.0 / temp)); };
    EXPECT_NEAR(freq1(0.5f), expect(0.5f), 0.015);
    EXPECT_NEAR(freq1(2.0f), expect(2.0f), 0.015);
}

TEST(Sampler, TopKSupportIsExactlyTheKBest) {
    SamplerParams p = plain(5.0f);  // hot: every kept token is drawn often
    p.top_k         = 3;
    Sampler s(p, 8);
    const std::vector<float> logits = {0.2f, 1.0f, -0.5f, 0.9f, 0.8f, 0.85f, 0.1f, 0.0f};
    EXPECT_EQ(support(s, logits), (std::set<int32_t>{1, 3, 5}));
}

TEST(Sampler, TopPSupportIsExactlyTheNucleus) {
    const auto logits = logits_of({0.05, 0.5, 0.15, 0.3});  // sorted: 1 (0.5), 3 (0.3), 2 (0.15), 0
    auto run = [&](float top_p) {
        SamplerParams p = plain(1.0f);
        p.top_p         = top_p;
        Sampler s(p, 4);
        return support(s, logits);
    };
    EXPECT_EQ(run(0.45f), (std::set<int32_t>{1}));
    EXPECT_EQ(run(0.7f), (std::set<int32_t>{1, 3}));
    EXPECT_EQ(run(0.9f), (std::set<int32_t>{1, 2, 3}));
    EXPECT_EQ(run(1.0f), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(Sampler, MinPSupportIsRelativeToTheBest) {
    const auto logits = logits_of({0.05, 0.5, 0.15, 0.3});  // ratios to the max: 0.1, 1, 0.3, 0.6
    auto run = [&](float min_p) {
        SamplerParams p = plain(1.0f);
        p.min_p         = min_p;
        Sampler s(p, 4);
        return support(s, logits);
    };
    EXPECT_EQ(run(0.2f), (std::set<int32_t>{1, 2, 3}));
    EXPECT_EQ(run(0.5f), (std::set<int32_t>{1, 3}));
    EXPECT_EQ(run(0.7f), (std::set<int32_t>{1}));
    EXPECT_EQ(run(0.05f), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(Sampler, StagesRunInChainOrder) {
    // top-p runs at temperature 1 before the temperature stage: with top-p 0.7 the nucleus is {1, 3}
    // even though temperature 10 would make all four nearly uniform.
    const auto    logits = logits_of({0.05, 0.5, 0.15, 0.3});
    SamplerParams p      = plain(10.0f);
    p.top_p              = 0.7f;
    Sampler s(p, 4);
    EXPECT_EQ(support(s, logits), (std::set<int32_t>{1, 3}));
    // min-p after top-k: top-k 3 removes token 0; min-p 0.25 (ratios 1, .6, .3) keeps 1, 3, 2.
    SamplerParams q = plain(1.0f);
    q.top_k         = 3;
    q.min_p         = 0.25f;
    Sampler s2(q, 4);
    EXPECT_EQ(support(s2, logits), (std::set<int32_t>{1, 2, 3}));
}

TEST(Sampler, PenaltiesMatchHandComputedValues) {
    SamplerParams p     = plain(0.0f);
    p.repeat_penalty    = 2.0f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty  = 0.25f;
    p.repeat_last_n     = 64;
    Sampler s(p, 6);
    for (int32_t t : {0, 0, 1, 3, 5}) s.accept(t);
    std::vector<float> l = {2.0f, -2.0f, 0.5f, 1.0f, 3.0f, 0.0f};
    s.apply_penalties(l);
    EXPECT_FLOAT_EQ(l[0], 2.0f / 2 - (2 * 0.5f + 0.25f));   // -0.25: positive divided, count 2
    EXPECT_FLOAT_EQ(l[1], -2.0f * 2 - (1 * 0.5f + 0.25f));  // -4.75: negative multiplied
    EXPECT_FLOAT_EQ(l[2], 0.5f);                            // not in the window
    EXPECT_FLOAT_EQ(l[3], 1.0f / 2 - 0.75f);                // -0.25
    EXPECT_FLOAT_EQ(l[4], 3.0f);
    EXPECT_FLOAT_EQ(l[5], 0.0f * 2 - 0.75f);                // zero counts as "<= 0": multiplied
    // The penalised argmax moves from token 4 (3.0) only when 4 is penalised.
    EXPECT_EQ(s.sample(std::vector<float>{2.0f, -2.0f, 0.5f, 1.0f, 3.0f, 0.0f}), 4);
    s.accept(4);
    EXPECT_EQ(s.sample(std::vector<float>{2.0f, -2.0f, 0.5f, 1.0f, 3.0f, 0.0f}), 4);  // 3/2-0.75 = 0.75 > 0.5
    s.accept(4);
    EXPECT_EQ(s.sample(std::vector<float>{2.0f, -2.0f, 0.5f, 1.0f, 3.0f, 0.0f}), 2);  // 1.5-1.25 = 0.25 < 0.5
}

TEST(Sampler, PenaltyWindowSlides) {
    SamplerParams p  = plain(0.0f);
    p.repeat_penalty = 4.0f;
    p.repeat_last_n  = 2;
    Sampler s(p, 4);
    for (int32_t t : {0, 1, 2}) s.accept(t);  // window = {1, 2}
    std::vector<float> l = {4.0f, 4.0f, -1.0f, 4.0f};
    s.apply_penalties(l);
    EXPECT_EQ(l, (std::vector<float>{4.0f, 1.0f, -4.0f, 4.0f}));
    s.accept(2);  // window = {2, 2}: count 2, but the repeat penalty does not depend on the count
    l = {4.0f, 4.0f, -1.0f, 4.0f};
    s.apply_penalties(l);
    EXPECT_EQ(l, (std::vector<float>{4.0f, 4.0f, -4.0f, 4.0f}));
    s.reset();
    l = {4.0f, 4.0f, -1.0f, 4.0f};
    s.apply_penalties(l);
    EXPECT_EQ(l, (std::vector<float>{4.0f, 4.0f, -1.0f, 4.0f}));
}

TEST(Sampler, PenaltyWindowUnlimitedAndDisabled) {
    SamplerParams p     = plain(0.0f);
    p.frequency_penalty = 1.0f;
    p.repeat_last_n     = -1;
    Sampler s(p, 3);
    for (int i = 0; i < 100; ++i) s.accept(1);
    std::vector<float> l = {0.0f, 0.0f, 0.0f};
    s.apply_penalties(l);
    EXPECT_EQ(l, (std::vector<float>{0.0f, -100.0f, 0.0f}));

    p.repeat_last_n = 0;
    Sampler off(p, 3);
    for (int i = 0; i < 10; ++i) off.accept(1);
    l = {0.0f, 0.0f, 0.0f};
    off.apply_penalties(l);
    EXPECT_EQ(l, (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

TEST(Sampler, ValidationNamesTheFlag) {
    auto with = [](auto mutate) {
        SamplerParams p;
        mutate(p);
        return p;
    };
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.temp = -1; })); }, {"--temp", ">= 0", "got -1"});
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.temp = std::nanf(""); })); }, {"--temp", "nan"});
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.top_p = 0; })); }, {"--top-p", "(0, 1]", "got 0"});
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.top_p = 1.5f; })); }, {"--top-p", "got 1.5"});
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.min_p = -0.1f; })); }, {"--min-p", "[0, 1]"});
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.min_p = 2; })); }, {"--min-p", "got 2"});
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.repeat_penalty = 0; })); },
                   {"--repeat-penalty", "> 0", "got 0"});
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.repeat_last_n = -2; })); },
                   {"--repeat-last-n", ">= -1", "got -2"});
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.frequency_penalty = INFINITY; })); },
                   {"--frequency-penalty", "finite"});
    expect_invalid([&] { validate(with([](SamplerParams & p) { p.presence_penalty = NAN; })); },
                   {"--presence-penalty", "finite"});
    // Limits that are allowed.
    EXPECT_NO_THROW(validate(with([](SamplerParams & p) {
        p.temp = 0, p.top_k = -1, p.top_p = 1, p.min_p = 0, p.repeat_last_n = -1, p.frequency_penalty = -1;
    })));
    EXPECT_NO_THROW(validate(with([](SamplerParams & p) { p.min_p = 1, p.top_k = 0; })));
    // The constructor validates too, and checks its own arguments.
    expect_invalid([&] { Sampler s(with([](SamplerParams & p) { p.temp = -1; }), 10); }, {"--temp"});
    expect_invalid([&] { Sampler s(SamplerParams{}, 0); }, {"vocabulary size"});
}

// sample_top_k with rows that hold the top k (ties at the k-th included) and some others, shuffled,
// gives sample()'s tokens for the full logits where the rest are -inf, draw for draw.
TEST(Sampler, TopKRowsGiveWhatTheFullLogitsGive) {
    const int32_t n_vocab = 3000;
    Rng           r(11);
    std::vector<float> logits(n_vocab);
    for (float & l : logits) l = static_cast<float>(std::floor(r.next_double() * 400.0) / 40.0);  // many ties
    std::vector<float> sorted = logits;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    for (const int32_t k : {1, 5, 40, 300}) {
        for (const float top_p : {1.0f, 0.9f}) {
            for (const float min_p : {0.0f, 0.05f}) {
                SamplerParams p;
                p.temp  = k == 5 ? 1.7f : 0.8f;
                p.top_k = k;
                p.top_p = top_p;
                p.min_p = min_p;
                p.seed  = 77;
                SCOPED_TRACE("top-k " + std::to_string(k) + ", top-p " + std::to_string(top_p) + ", min-p " +
                             std::to_string(min_p));
                // Every row at least the k-th largest, and every 7th row besides; the others -inf.
                const float            kth = sorted[static_cast<size_t>(k - 1)];
                std::vector<Candidate> rows;
                std::vector<float>     full(n_vocab, -std::numeric_limits<float>::infinity());
                for (int32_t i = 0; i < n_vocab; ++i) {
                    if (logits[static_cast<size_t>(i)] >= kth || i % 7 == 0) {
                        rows.push_back({i, logits[static_cast<size_t>(i)]});
                        full[static_cast<size_t>(i)] = logits[static_cast<size_t>(i)];
                    }
                }
                for (size_t i = rows.size() - 1; i > 0; --i) {  // any order
                    std::swap(rows[i], rows[static_cast<size_t>(r.next_double() * static_cast<double>(i + 1))]);
                }
                Sampler a(p, n_vocab), b(p, n_vocab), c(p, n_vocab);
                ASSERT_TRUE(b.starts_with_top_k());
                for (int draw = 0; draw < 200; ++draw) {
                    const int32_t want = a.sample(logits);
                    ASSERT_EQ(b.sample_top_k(rows), want) << "draw " << draw;
                    ASSERT_EQ(c.sample(full), want) << "draw " << draw;
                }
            }
        }
    }
}

TEST(Sampler, TopKRowsNeedATopKChain) {
    auto with = [](auto mutate) {
        SamplerParams q;
        mutate(q);
        return q;
    };
    SamplerParams p;
    p.top_k = 2;
    const std::vector<Candidate> rows = {{3, 1.0f}, {4, 2.0f}};
    expect_invalid([&] { Sampler(with([](SamplerParams & q) { q.top_k = 0; }), 10).sample_top_k(rows); },
                   {"sample_top_k", "top_k"});
    expect_invalid([&] { Sampler(with([](SamplerParams & q) { q.repeat_penalty = 1.1f; }), 10).sample_top_k(rows); },
                   {"penalties"});
    expect_invalid([&] { Sampler(with([](SamplerParams & q) { q.top_k = 10; }), 10).sample_top_k(rows); },
                   {"n_vocab"});
    expect_invalid([&] { Sampler(with([](SamplerParams & q) { q.top_k = 3; }), 10).sample_top_k(rows); },
                   {"2 candidate rows", "top-k 3"});
    const std::vector<Candidate> bad = {{3, 1.0f}, {10, 2.0f}};
    expect_invalid([&] { Sampler(p, 10).sample_top_k(bad); }, {"candidate id 10"});
    EXPECT_EQ(Sampler(with([](SamplerParams & q) { q.top_k = 1; }), 10).sample_top_k(rows), 4);
}

TEST(Sampler, RejectsBadTokensAndLogitSizes) {
    Sampler s(plain(1.0f), 10);
    expect_invalid([&] { s.accept(10); }, {"token id 10", "[0, 10)"});
    expect_invalid([&] { s.accept(-1); }, {"token id -1"});
    expect_invalid([&] { s.sample(std::vector<float>(9, 0.0f)); }, {"9 entries", "n_vocab = 10"});
}

}  // namespace
}  // namespace tern
