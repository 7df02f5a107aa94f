// tern's attention order (issue #52, cpu_ops.h "Attention over a row of positions"): the reference
// functions cpu::block_partial, join_partials, superblock_partial, finish_partial, attention_row and
// attention_row_blocks, which every backend's attention test takes as its oracle.
//  - against the order written out again below in the plainest form (every block's partial in a list,
//    then the chunk list, the superblock list, the row), bit for bit, at lengths that cross every
//    block (32), chunk (64) and superblock (512) boundary, with an f16 and an f32 cache;
//  - against softmax attention in double precision (a tolerance: the order is a rounding of it);
//  - worked edge cases: a join of one part is exact; a huge score late (or early) in a long row gives
//    exactly that position's V row; rows of at most 512 positions keep the single-pass softmax's bits
//    (the CPU reference backend's); the superblock level (step 4) changes bits against one flat fold
//    of all chunks (session 15's prototype), so the written-out order below is the one that checks it.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/fp16.h"
#include "attention_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace tern {
namespace {

// One head's inputs over n positions: K and V rows of hd values (already f16 values with an f16
// cache), q unrounded.
struct Row {
    int64_t            n, hd;
    bool               f16;
    std::vector<float> q, k, v;
    float              scale;
};

Row make_row(int64_t n, int64_t hd, bool f16, uint32_t seed) {
    std::mt19937 rng(seed);
    auto         normal = [&](float sd) { return std::normal_distribution<float>(0.0f, sd)(rng); };
    Row          r{n, hd, f16, std::vector<float>(static_cast<size_t>(hd)), std::vector<float>(static_cast<size_t>(n * hd)),
          std::vector<float>(static_cast<size_t>(n * hd)), 1.0f / std::sqrt(static_cast<float>(hd))};
    for (auto & x : r.q) x = normal(2.0f);  // scores spread over a few units: peaked and flat stretches
    for (auto & x : r.k) x = f16 ? round_to_fp16(normal(1.0f)) : normal(1.0f);
    for (auto & x : r.v) x = f16 ? round_to_fp16(normal(1.0f)) : normal(1.0f);
    return r;
}

std::vector<float> oracle(const Row & r, bool blocks = false) {
    std::vector<float> out(static_cast<size_t>(r.hd));
    (blocks ? cpu::attention_row_blocks : cpu::attention_row)(r.q.data(), r.k.data(), r.hd, r.v.data(), r.hd, r.n,
                                                               r.hd, r.scale, r.f16, r.f16, out.data());
    return out;
}

// ---- the block order written out once more, as plainly as possible ----------------------------------
struct Part {
    float              m = 0, l = 0;
    std::vector<float> o;
};

Part join(const std::vector<Part> & parts) {
    Part r;
    r.m = parts[0].m;
    for (const Part & x : parts) r.m = std::max(r.m, x.m);
    r.o.assign(parts[0].o.size(), 0.0f);
    for (const Part & x : parts) {
        const float a = cpu::exp_fixed(x.m - r.m);
        r.l           = r.l + a * x.l;
        for (size_t d = 0; d < r.o.size(); ++d) r.o[d] = r.o[d] + a * x.o[d];
    }
    return r;
}

// The scores, then a list of block partials, then lists of chunks (2 blocks), superblocks (8 chunks)
// and the row; superblocks = false joins all chunks at once (the session-15 prototype's flat fold).
std::vector<float> written_out(const Row & r, bool superblocks = true) {
    std::vector<float> qh(r.q);
    if (r.f16) {
        for (auto & x : qh) x = round_to_fp16(x);
    }
    std::vector<float> s(static_cast<size_t>(r.n));
    for (int64_t i = 0; i < r.n; ++i) s[size_t(i)] = cpu::dot_blocked16(qh.data(), r.k.data() + i * r.hd, r.hd) * r.scale;
    std::vector<Part> blocks;
    for (int64_t b0 = 0; b0 < r.n; b0 += 32) {
        Part p;
        p.m = -FLT_MAX;
        for (int64_t i = b0; i < std::min(r.n, b0 + 32); ++i) p.m = std::max(p.m, s[size_t(i)]);
        p.o.assign(size_t(r.hd), 0.0f);
        for (int64_t i = b0; i < std::min(r.n, b0 + 32); ++i) {
            const float e = cpu::exp_fixed(s[size_t(i)] - p.m);
            p.l           = p.l + e;
            const float f = r.f16 ? round_to_fp16(e) : e;
            for (int64_t d = 0; d < r.hd; ++d) p.o[size_t(d)] = p.o[size_t(d)] + f * r.v[size_t(i * r.hd + d)];
        }
        blocks.push_back(p);
    }
    auto group = [](const std::vector<Part> & parts, size_t size) {
        std::vector<Part> joined;
        for (size_t i = 0; i < parts.size(); i += size) {
            joined.push_back(join({parts.begin() + long(i), parts.begin() + long(std::min(parts.size(), i + size))}));
        }
        return joined;
    };
    const std::vector<Part> chunks = group(blocks, 2);
    const Part              row    = superblocks ? join(group(chunks, 8)) : join(chunks);
    std::vector<float>      out(static_cast<size_t>(r.hd));
    const float             inv = 1.0f / row.l;
    for (int64_t d = 0; d < r.hd; ++d) out[size_t(d)] = row.o[size_t(d)] * inv;
    return out;
}

// Softmax attention in double: sum_i exp(s_i - max) v_i / sum_i exp(s_i - max), s_i in double from
// the same (f16-rounded with an f16 cache) q and K. Also sum_i p_i |v_i[d]|, the scale of the error.
void in_double(const Row & r, std::vector<double> & out, std::vector<double> & mag) {
    std::vector<double> s(static_cast<size_t>(r.n));
    double              mx = -INFINITY;
    for (int64_t i = 0; i < r.n; ++i) {
        double dot = 0;
        for (int64_t d = 0; d < r.hd; ++d) {
            const double qd = r.f16 ? round_to_fp16(r.q[size_t(d)]) : r.q[size_t(d)];
            dot += qd * r.k[size_t(i * r.hd + d)];
        }
        s[size_t(i)] = dot * r.scale;
        mx           = std::max(mx, s[size_t(i)]);
    }
    double l = 0;
    for (auto & x : s) l += (x = std::exp(x - mx));
    out.assign(size_t(r.hd), 0.0);
    mag.assign(size_t(r.hd), 0.0);
    for (int64_t i = 0; i < r.n; ++i) {
        for (int64_t d = 0; d < r.hd; ++d) {
            out[size_t(d)] += s[size_t(i)] / l * r.v[size_t(i * r.hd + d)];
            mag[size_t(d)] += s[size_t(i)] / l * std::fabs(r.v[size_t(i * r.hd + d)]);
        }
    }
}

size_t bits_differ(const std::vector<float> & a, const std::vector<float> & b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
    return n;
}

// Lengths crossing every boundary: one block, a block + 1, chunk and superblock edges, many superblocks.
const int64_t k_lengths[] = {1, 31, 33, 64, 65, 511, 512, 513, 544, 575, 576, 1023, 1024, 1025, 1537, 4096, 4097};

TEST(CpuAttentionOrder, RowIsTheBlockOrderWrittenOutBitForBit) {
    for (const bool f16 : {true, false}) {
        for (const int64_t hd : {int64_t{64}, int64_t{80}}) {
            for (const int64_t n : k_lengths) {
                SCOPED_TRACE(std::string(f16 ? "f16" : "f32") + " hd " + std::to_string(hd) + " n " + std::to_string(n));
                const Row r = make_row(n, hd, f16, static_cast<uint32_t>(n * 7 + hd));
                // attention_row_blocks is the block order at every n; attention_row from 513 on.
                EXPECT_EQ(bits_differ(oracle(r, true), written_out(r)), 0u);
                if (n > 512) {
                    EXPECT_EQ(bits_differ(oracle(r), written_out(r)), 0u);
                }
            }
        }
    }
}

TEST(CpuAttentionOrder, RowIsCloseToSoftmaxInDouble) {
    for (const bool f16 : {true, false}) {
        for (const int64_t n : k_lengths) {
            SCOPED_TRACE(std::string(f16 ? "f16" : "f32") + " n " + std::to_string(n));
            const Row                 r   = make_row(n, 64, f16, static_cast<uint32_t>(n));
            const std::vector<float>  got = oracle(r);
            std::vector<double>       want, mag;
            in_double(r, want, mag);
            // f16 probabilities: at most 2^-11 relative each (measured worst 2.4e-4 of sum p |v| at n = 64);
            // f32 operations only: measured worst 2.9e-7 (n = 512).
            const double tol = f16 ? 6e-4 : 1e-6;
            for (size_t d = 0; d < got.size(); ++d) {
                EXPECT_LE(std::fabs(got[d] - want[d]), tol * mag[d] + 1e-30) << "d " << d << " want " << want[d];
            }
        }
    }
}

// A join of one part returns its m, l and o bits (exp_fixed(0) == 1, 1 * x == x, 0 + x == x), also
// for subnormal and tiny values; two parts weigh by exp_fixed(m_i - M); a part 1000 below weighs 0.
TEST(CpuAttentionOrder, JoinsWorked) {
    float       o1[4] = {0.1f, -2.5e-8f, 3.0f, 1e-40f};
    float       got[4];
    cpu::AttnPartial one{-3.25f, 7.0f, o1}, out{0, 0, got};
    cpu::join_partials(&one, 1, 4, out);
    EXPECT_EQ(std::bit_cast<uint32_t>(out.m), std::bit_cast<uint32_t>(-3.25f));
    EXPECT_EQ(std::bit_cast<uint32_t>(out.l), std::bit_cast<uint32_t>(7.0f));
    for (int d = 0; d < 4; ++d) EXPECT_EQ(std::bit_cast<uint32_t>(got[d]), std::bit_cast<uint32_t>(o1[d]));
    // In place (out.o = a part's o).
    cpu::AttnPartial in_place{0, 0, o1};
    cpu::join_partials(&one, 1, 4, in_place);
    EXPECT_EQ(std::bit_cast<uint32_t>(o1[1]), std::bit_cast<uint32_t>(-2.5e-8f));

    float            oa[2] = {4.0f, -1.0f}, ob[2] = {8.0f, 2.0f}, oc[2] = {1e30f, 1e30f};
    cpu::AttnPartial parts[3] = {{5.0f, 1.0f, oa}, {-1000.0f, 9.0f, oc}, {4.0f, 3.0f, ob}};
    cpu::join_partials(parts, 3, 2, out);
    const float a2 = cpu::exp_fixed(-1.0f);
    EXPECT_EQ(cpu::exp_fixed(-1005.0f), 0.0f);
    EXPECT_EQ(out.m, 5.0f);
    EXPECT_EQ(out.l, ((0.0f + 1.0f * 1.0f) + 0.0f * 9.0f) + a2 * 3.0f);
    EXPECT_EQ(got[0], ((0.0f + 4.0f) + 0.0f) + a2 * 8.0f);
    EXPECT_EQ(got[1], ((0.0f - 1.0f) + 0.0f) + a2 * 2.0f);
    // In the other order the sums (not the max) change their order: (0 + a2 * 8) + 4.
    cpu::AttnPartial swapped[2] = {parts[2], parts[0]};
    cpu::join_partials(swapped, 2, 2, out);
    EXPECT_EQ(got[0], (0.0f + a2 * 8.0f) + 4.0f);
}

// A block's partial: m is the max, e = exp_fixed(s - m) summed in order, o sums f16(e) v with an f16
// cache (e unrounded in l), e v without; m starts at -FLT_MAX.
TEST(CpuAttentionOrder, BlockPartialWorked) {
    const float s[3] = {-1.0f, 2.0f, 0.5f};
    const float v[6] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};  // rows of 2, stride 2
    float       o[2];
    for (const bool f16 : {true, false}) {
        cpu::AttnPartial p{0, 0, o};
        cpu::block_partial(s, 3, v, 2, 2, f16, p);
        const float e0 = cpu::exp_fixed(-3.0f), e2 = cpu::exp_fixed(-1.5f);
        const float f0 = f16 ? round_to_fp16(e0) : e0, f2 = f16 ? round_to_fp16(e2) : e2;
        EXPECT_EQ(p.m, 2.0f);
        EXPECT_EQ(p.l, ((0.0f + e0) + 1.0f) + e2);
        EXPECT_EQ(o[0], ((0.0f + f0 * 1.0f) + 3.0f) + f2 * 5.0f);
        EXPECT_EQ(o[1], ((0.0f + f0 * 2.0f) + 4.0f) + f2 * 6.0f);
    }
    const float low[1] = {-std::numeric_limits<float>::infinity()};
    cpu::AttnPartial p{0, 0, o};
    cpu::block_partial(low, 1, v, 2, 2, false, p);
    EXPECT_EQ(p.m, -FLT_MAX);
}

// A score ~400 above the rest at one position: every other e_i and every other part's weight is
// exp_fixed(<= -86.99) = 0, so the row is that position's V row exactly (its block: l = 1, o = v;
// the joins: 1 * x, 0 + x, + 0; out = v * (1 / 1)). Late in the row (the last position, in the last
// short superblock, chunk and block) the max arrives last; early, every later part is rescaled to 0.
TEST(CpuAttentionOrder, HugeScoreGivesItsRowExactly) {
    for (const int64_t n : {int64_t{513}, int64_t{575}, int64_t{1025}, int64_t{4096}, int64_t{4097}}) {
        for (const int64_t at : {n - 1, n - 33, int64_t{3}, int64_t{512}}) {
            SCOPED_TRACE("n " + std::to_string(n) + " huge at " + std::to_string(at));
            Row r = make_row(n, 64, true, static_cast<uint32_t>(n + at));
            // k_at = c f16(q) with scale c |f16(q)|^2 ~ 400, the other scores within ~10 of 0.
            float qq = 0;
            for (auto x : r.q) qq += round_to_fp16(x) * round_to_fp16(x);
            const float c = 400.0f / (qq * r.scale);
            for (int64_t d = 0; d < r.hd; ++d) r.k[size_t(at * r.hd + d)] = round_to_fp16(round_to_fp16(r.q[size_t(d)]) * c);
            const std::vector<float> got = oracle(r);
            for (int64_t d = 0; d < r.hd; ++d) {
                EXPECT_EQ(std::bit_cast<uint32_t>(got[size_t(d)]), std::bit_cast<uint32_t>(r.v[size_t(at * r.hd + d)])) << d;
            }
            EXPECT_EQ(bits_differ(got, written_out(r)), 0u);
        }
    }
}

// Rows of at most 512 positions keep the single-pass softmax: attention_row equals the CPU reference
// backend bit for bit there (several heads over 2 KV heads, f16 and f32 caches, every query of a prompt
// from position 0 to 511 checked through one head each).
TEST(CpuAttentionOrder, ShortRowsAreTheSinglePassSoftmax) {
    const int64_t n_head = 4, n_head_kv = 2, hd = 64, T = 512, n_q = n_head * hd, n_kv = n_head_kv * hd;
    for (const DType cache : {DType::f16, DType::f32}) {
        SCOPED_TRACE(cache == DType::f16 ? "f16" : "f32");
        const test::AttentionInputs in = test::random_attention_inputs(n_head, n_head_kv, hd, T, T, cache, 11);
        const std::vector<float> &  k = in.k_values, &v = in.v_values, &q = in.q;
        const std::vector<uint8_t> &kb = in.k, &vb = in.v;
        auto                     be  = make_cpu_reference_backend(2);
        const std::vector<float> got = test::run_attention(*be, {n_head, n_head_kv, hd, 0, T, cache}, kb, vb, q, T);
        const bool               f16 = cache == DType::f16;
        const float              scale = 1.0f / std::sqrt(static_cast<float>(hd));
        size_t                   differ = 0;
        std::vector<float>       want(static_cast<size_t>(hd));
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t h = 0; h < n_head; ++h) {
                const int64_t kvh = h / (n_head / n_head_kv);
                cpu::attention_row(q.data() + (t + 1) * n_q + h * hd, k.data() + kvh * hd, n_kv, v.data() + kvh * hd,
                                   n_kv, t + 1, hd, scale, f16, f16, want.data());
                for (int64_t d = 0; d < hd; ++d) {
                    differ += std::bit_cast<uint32_t>(want[size_t(d)]) !=
                              std::bit_cast<uint32_t>(got[size_t(t * n_q + h * hd + d)]);
                }
            }
        }
        EXPECT_EQ(differ, 0u);
    }
}

// The superblock level (step 4) is part of the order: one flat fold of all of a long row's chunks
// (session 15's prototype) gives other bits somewhere, so the written-out order above checks it.
TEST(CpuAttentionOrder, SuperblockLevelChangesBits) {
    size_t differ = 0;
    for (uint32_t seed = 0; seed < 4; ++seed) {
        const Row r = make_row(4096, 64, true, seed);
        differ += bits_differ(oracle(r), written_out(r, false));
    }
    EXPECT_GT(differ, 0u);
}

// The kernel interface in scalar code (cpu::attention_cache_scalar): a blocks job over a strided
// view of f16 or f32 K and V (the KV head at an offset in a row of three) is cpu::superblock_partial
// per head (O, M, L), and a job without blocks is cpu::attention_row; 3 heads, short and full
// superblocks.
TEST(CpuAttentionOrder, ScalarKernelIsTheReferenceFunctions) {
    const int64_t hd = 48, stride = 3 * hd, first = hd, G = 3;
    for (const int64_t n : {int64_t{1}, int64_t{40}, int64_t{97}, int64_t{512}}) {
        for (const bool f16 : {true, false}) {
            SCOPED_TRACE(std::string(f16 ? "f16" : "f32") + " n " + std::to_string(n));
            std::mt19937          rng(static_cast<uint32_t>(n));
            auto                  normal = [&](float sd) { return std::normal_distribution<float>(0.0f, sd)(rng); };
            std::vector<float>    kf(static_cast<size_t>(stride * n)), vf(kf.size()), q(static_cast<size_t>(G * hd));
            std::vector<uint16_t> kh(kf.size()), vh(kf.size());
            for (auto & x : q) x = normal(2.0f);
            for (size_t i = 0; i < kf.size(); ++i) {
                kh[i] = fp32_to_fp16(normal(1.0f)), vh[i] = fp32_to_fp16(normal(1.0f));
                kf[i] = f16 ? fp16_to_fp32(kh[i]) : normal(1.0f), vf[i] = f16 ? fp16_to_fp32(vh[i]) : normal(1.0f);
            }
            const cpu::CacheView c{f16 ? static_cast<const void *>(kh.data()) : kf.data(),
                                   f16 ? static_cast<const void *>(vh.data()) : vf.data(), f16, f16, stride, first, hd};
            std::vector<float> out(q.size()), m(static_cast<size_t>(G)), l(m.size()), scratch(static_cast<size_t>(
                                                                                          cpu::attention_scratch(G, n, hd)));
            for (const bool blocks : {true, false}) {
                cpu::AttentionJob job{q.data(), G, n, 0.125f, out.data(), m.data(), l.data(), blocks};
                cpu::attention_cache_scalar(c, job, scratch.data());
                for (int64_t g = 0; g < G; ++g) {
                    std::vector<float> s(static_cast<size_t>(n)), want(static_cast<size_t>(hd));
                    if (blocks) {
                        cpu::attention_scores(q.data() + g * hd, kf.data() + first, stride, n, hd, 0.125f, f16, s.data());
                        cpu::AttnPartial p{0, 0, want.data()};
                        cpu::superblock_partial(s.data(), n, vf.data() + first, stride, hd, f16, p);
                        EXPECT_EQ(std::bit_cast<uint32_t>(m[size_t(g)]), std::bit_cast<uint32_t>(p.m));
                        EXPECT_EQ(std::bit_cast<uint32_t>(l[size_t(g)]), std::bit_cast<uint32_t>(p.l));
                    } else {
                        cpu::attention_row(q.data() + g * hd, kf.data() + first, stride, vf.data() + first, stride, n, hd,
                                           0.125f, f16, f16, want.data());
                    }
                    EXPECT_EQ(bits_differ({out.begin() + g * hd, out.begin() + (g + 1) * hd}, want), 0u) << blocks;
                }
            }
        }
    }
}

// ---- the CPU backends against the oracle -----------------------------------------------------------
// Every query (token, head) of a prompt through the reference backend and the fast backend of every
// instruction set this machine runs, given as one prompt call (the prompt path), one token per call
// (decode) and 7 per call: each equals cpu::attention_row over its positions bit for bit. Positions
// 500 .. 579 cross the superblock's end (512) and the chunk and block edges after it (544, 576);
// 1000 .. 1029 the second superblock's (1024); 4094 .. 4096 at 2B4T's shape (20 heads on 5 KV heads,
// head_dim 128) the eighth's (4096). G = 3, 2 and 4 (the kernels take up to 4 heads at a time).
struct CpuCase {
    std::string                                                 name;
    std::function<std::shared_ptr<Backend>(std::string & skip)> make;
};
void PrintTo(const CpuCase & c, std::ostream * os) { *os << c.name; }

std::vector<CpuCase> cpu_backends() {
    auto fast = [](CpuIsa isa, int threads) {
        return [isa, threads](std::string & skip) -> std::shared_ptr<Backend> {
            if (cpu_isa_available(isa)) return make_cpu_fast_backend({threads, isa});
            skip = std::string("no ") + std::string(cpu_isa_name(isa)) + " kernels on this CPU/build";
            return nullptr;
        };
    };
    return {{"ref_2_threads", [](std::string &) -> std::shared_ptr<Backend> { return make_cpu_reference_backend(2); }},
            {"avx512_1_thread", fast(CpuIsa::avx512, 1)},
            {"avx512_3_threads", fast(CpuIsa::avx512, 3)},
            {"avx2_1_thread", fast(CpuIsa::avx2, 1)},
            {"avx2_3_threads", fast(CpuIsa::avx2, 3)},
            {"neon_1_thread", fast(CpuIsa::neon, 1)},
            {"neon_3_threads", fast(CpuIsa::neon, 3)}};
}

class CpuAttentionRows : public ::testing::TestWithParam<CpuCase> {
protected:
    void SetUp() override {
        std::string skip;
        be_ = GetParam().make(skip);
        if (!be_) GTEST_SKIP() << skip;
    }
    std::shared_ptr<Backend> be_;
};

TEST_P(CpuAttentionRows, PromptDecodeAndChunksAreTheOracleAcrossEveryEdge) {
    const test::AttentionRun runs[] = {{6, 2, 64, 500, 80, DType::f16}, {4, 2, 64, 1000, 30, DType::f16},
                                       {20, 5, 128, 4094, 3, DType::f16}};
    for (test::AttentionRun run : runs) {
        for (const DType cache : {DType::f16, DType::f32}) {
            run.cache = cache;
            SCOPED_TRACE(std::string(cache == DType::f16 ? "f16" : "f32") + " heads " + std::to_string(run.n_head) +
                         " positions " + std::to_string(run.pos0) + " + " + std::to_string(run.T));
            const int64_t n_q = run.n_head * run.head_dim, n_kv = run.n_head_kv * run.head_dim, n_ctx = run.pos0 + run.T;
            const test::AttentionInputs in = test::random_attention_inputs(run.n_head, run.n_head_kv, run.head_dim, n_ctx,
                                                                           run.T, cache, static_cast<uint32_t>(run.pos0));
            const std::vector<float> &  k = in.k_values, &v = in.v_values, &q = in.q;
            const std::vector<uint8_t> &kb = in.k, &vb = in.v;
            const bool         f16   = cache == DType::f16;
            const float        scale = 1.0f / std::sqrt(static_cast<float>(run.head_dim));
            // (the oracle once per case for all the backends)
            static std::map<std::pair<int64_t, bool>, std::vector<float>> oracles;
            std::vector<float> & want  = oracles[{run.pos0, f16}];
            const bool           fresh = want.empty();
            if (fresh) want.resize(static_cast<size_t>(n_q * run.T));
            for (int64_t t = 0; fresh && t < run.T; ++t) {
                for (int64_t h = 0; h < run.n_head; ++h) {
                    const int64_t kvh = h / (run.n_head / run.n_head_kv), o = h * run.head_dim;
                    cpu::attention_row(q.data() + (t + 1) * n_q + o, k.data() + kvh * run.head_dim, n_kv,
                                       v.data() + kvh * run.head_dim, n_kv, run.pos0 + t + 1, run.head_dim, scale, f16,
                                       f16, want.data() + t * n_q + o);
                }
            }
            for (const int64_t per_call : {run.T, int64_t{1}, int64_t{7}}) {
                const std::vector<float> got = test::run_attention(*be_, run, kb, vb, q, per_call);
                size_t                   first = got.size(), differ = 0;
                for (size_t i = 0; i < got.size(); ++i) {
                    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && differ++ == 0) first = i;
                }
                EXPECT_EQ(differ, 0u) << per_call << " per call; first at token " << first / static_cast<size_t>(n_q)
                                      << ", element " << first % static_cast<size_t>(n_q);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuAttentionRows, ::testing::ValuesIn(cpu_backends()),
                         [](const ::testing::TestParamInfo<CpuCase> & i) { return i.param.name; });

}  // namespace
}  // namespace tern
