// The fast CPU backend's bounded heads against the reference's exact head: a Q6_K table read by
// its own codes (and an F16 table through its int8 copy) for greedy decoding and the top-k head,
// on random tables, near ties, exact ties and identical rows. Where the bounded path exists it must
// have run: the top-k head of a random table leaves most rows at -inf.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops.h"
#include "core/fp16.h"
#include "quant/block_formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

namespace tern {
namespace {

struct Table {
    DType                type;
    int64_t              k, n;
    std::vector<uint8_t> bytes;
};

// Rows of normal(0, 0.05) values; kind 1: row 7 copies row 3 with one code nudged (a near tie),
// kind 2: row 9 copies row 4 exactly (a tie: the lower index wins), kind 3: every row the same.
Table make_table(DType type, int64_t k, int64_t n, int kind, std::mt19937 & rng) {
    std::normal_distribution<float> nd(0.0f, 0.05f);
    std::vector<float>              x(static_cast<size_t>(k * n));
    for (auto & v : x) v = nd(rng);
    if (kind == 3) {
        for (int64_t r = 1; r < n; ++r) std::copy(x.begin(), x.begin() + k, x.begin() + r * k);
    }
    Table t{type, k, n, std::vector<uint8_t>(dtype_row_bytes(type, k) * static_cast<size_t>(n))};
    const size_t rb = dtype_row_bytes(type, k);
    for (int64_t r = 0; r < n; ++r) quantize_row(type, x.data() + r * k, t.bytes.data() + r * rb, k);
    if (kind == 1) {
        std::memcpy(t.bytes.data() + 7 * rb, t.bytes.data() + 3 * rb, rb);
        t.bytes[7 * rb + 5] ^= 1;  // one low bit of one code (Q6_K ql) / one f16 mantissa bit
    }
    if (kind == 2) std::memcpy(t.bytes.data() + 9 * rb, t.bytes.data() + 4 * rb, rb);
    return t;
}

// Code of column e of a Q6_K block (0..63): low 4 bits in ql[64 h + 32 (k & 1) + l] (high nibble
// for k >= 2), high 2 bits in qh[32 h + l] bits 2k, e = 128 h + 32 k + l.
void set_q6k_code(uint8_t * block, int e, int q) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    uint8_t & lo = block[64 * h + 32 * (k & 1) + l];
    lo           = k >= 2 ? static_cast<uint8_t>((lo & 0x0f) | ((q & 15) << 4)) : static_cast<uint8_t>((lo & 0xf0) | (q & 15));
    uint8_t & hi = block[128 + 32 * h + l];
    hi           = static_cast<uint8_t>((hi & ~(3 << (2 * k))) | ((q >> 4) << (2 * k)));
}

// Kind 4 (Q6_K): rows 3 and 7 lead by far (column 0), and differ where the 8-bit grid of h misranks
// them: h = x (norm weights 1) is 127 at column 0, 0.49 at columns 10 and 11, 0.6 at 12, 0 elsewhere,
// so the grid step is 1; row 3 has one more code step at columns 10 and 11, row 7 at column 12.
// Exactly row 3 is larger (0.98 > 0.6 steps); on the grid row 7 is (1 > 0): only the bound keeps
// row 3 a candidate.
Table grid_misrank_table(int64_t k, int64_t n, std::mt19937 & rng, std::vector<float> & x) {
    Table t = make_table(DType::q6_k, k, n, 0, rng);
    const size_t rb = dtype_row_bytes(DType::q6_k, k);
    for (int64_t r : {3, 7}) {
        uint8_t * b = t.bytes.data() + r * rb;
        for (int e = 0; e < 16; ++e) set_q6k_code(b, e, 32);
        set_q6k_code(b, 0, 63);
        b[192] = 64;  // sub-block 0's scale, and d = 2^-7 (f16 0x2000): column 0 is worth 64 * 31 / 128
        b[208] = 0x00;
        b[209] = 0x20;
    }
    set_q6k_code(t.bytes.data() + 3 * rb, 10, 33);
    set_q6k_code(t.bytes.data() + 3 * rb, 11, 33);
    set_q6k_code(t.bytes.data() + 7 * rb, 12, 33);
    std::fill(x.begin(), x.end(), 0.0f);
    x[0] = 127.0f, x[10] = x[11] = 0.49f, x[12] = 0.6f;
    return t;
}

struct Loaded {
    std::unique_ptr<Weight> table, norm;
    OwnedTensor             x, h, logits, ids;
};

Loaded load(Backend & b, const Table & t, const std::vector<float> & x, const std::vector<uint8_t> & nw) {
    Loaded l;
    l.table = b.load_embedding({"head", t.type, {t.k, t.n, 1, 1}, t.bytes});
    l.norm  = b.load_norm({"norm", DType::f32, {t.k, 1, 1, 1}, nw});
    l.x      = alloc_tensor(b, DType::f32, {t.k, 1, 1, 1}, "x");
    l.h      = alloc_tensor(b, DType::f32, {t.k, 1, 1, 1}, "h");
    l.logits = alloc_tensor(b, DType::f32, {t.n, 1, 1, 1}, "logits");
    l.ids    = alloc_tensor(b, DType::i32, {1, 1, 1, 1}, "ids");
    b.write(l.x.tensor, x.data(), x.size() * 4);
    return l;
}

class CpuHead : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(CpuHead, BoundedHeadsGiveTheExactHeadsAnswers) {
    const CpuIsa isa = GetParam();
    if (!cpu_isa_available(isa)) GTEST_SKIP() << "no " << cpu_isa_name(isa) << " kernels here (" << cpu_feature_list() << ")";
    std::mt19937 rng(99);
    auto         ref  = make_cpu_reference_backend(1);
    auto         fast = make_cpu_fast_backend({2, isa, 0});
    auto         fast5 = make_cpu_fast_backend({5, isa, 0});
    for (DType type : {DType::q6_k, DType::f16}) {
        for (const int64_t k : {256, 768}) {
            for (int kind = 0; kind < 5; ++kind) {
                if (kind == 4 && type != DType::q6_k) continue;
                const int64_t n = kind == 3 ? 300 : std::getenv("TERN_TEST_EMULATED") ? 1000 : 3000;  // fewer under qemu
                SCOPED_TRACE(std::string(dtype_name(type)) + " k " + std::to_string(k) + " kind " + std::to_string(kind));
                std::vector<float>   x(static_cast<size_t>(k)), w(static_cast<size_t>(k));
                std::normal_distribution<float> nd(0.0f, 1.0f);
                for (auto & v : x) v = nd(rng);
                for (auto & v : w) v = kind == 4 ? 1.0f : 1.0f + 0.1f * nd(rng);
                const Table t = kind == 4 ? grid_misrank_table(k, n, rng, x) : make_table(type, k, n, kind, rng);
                std::vector<uint8_t> nw(w.size() * 4);
                std::memcpy(nw.data(), w.data(), nw.size());
                const bool round = type == DType::f16;
                // The exact logits and argmax.
                Loaded lr = load(*ref, t, x, nw);
                ref->output_head({lr.logits.tensor, lr.ids.tensor, 0}, *lr.table, {lr.x.tensor, lr.norm.get(), 1e-5f, {}, lr.h.tensor},
                                 round);
                std::vector<float> exact(static_cast<size_t>(n));
                int32_t            want = -1;
                ref->read(lr.logits.tensor, exact.data(), exact.size() * 4);
                ref->read(lr.ids.tensor, &want, 4);
                if (kind == 2) {
                    EXPECT_NE(want, 9) << "the tie goes to the lower index";
                }
                if (kind == 3) {
                    EXPECT_EQ(want, 0);
                }
                if (kind == 4) {
                    EXPECT_EQ(want, 3) << "the exact head's winner";
                }
                Loaded lf = load(*fast, t, x, nw);
                EXPECT_GT(lf.table->n_bytes_ids, 0u);
                const LinearInput in{lf.x.tensor, lf.norm.get(), 1e-5f, {}, lf.h.tensor};
                {  // every logit (the checked any-order sums, or the ordered ones), bit for bit
                    fast->output_head({lf.logits.tensor, {}, 0}, *lf.table, in, round);
                    std::vector<float> all(static_cast<size_t>(n));
                    fast->read(lf.logits.tensor, all.data(), all.size() * 4);
                    for (int64_t i = 0; i < n; ++i) {
                        ASSERT_EQ(std::memcmp(&all[static_cast<size_t>(i)], &exact[static_cast<size_t>(i)], 4), 0) << "logit " << i;
                    }
                }
                int32_t           got = -1;
                fast->output_head({lf.logits.tensor, lf.ids.tensor, 0}, *lf.table, in, round);
                fast->read(lf.ids.tensor, &got, 4);
                ASSERT_EQ(got, want);
                std::vector<float> sorted = exact;
                std::sort(sorted.begin(), sorted.end(), std::greater<float>());
                // Top-k: rows left out (-inf) are below the exact k-th logit, the others exact. Each thread
                // selects its own k largest lower bounds; with 5 threads on 300 rows (64-row ranges) k = 100
                // is more than a thread's rows.
                auto check_top_k = [&](Backend & be, const Loaded & l, int64_t top_k) {
                    const LinearInput lin{l.x.tensor, l.norm.get(), 1e-5f, {}, l.h.tensor};
                    be.output_head({l.logits.tensor, {}, top_k}, *l.table, lin, round);
                    std::vector<float> v(static_cast<size_t>(n));
                    be.read(l.logits.tensor, v.data(), v.size() * 4);
                    const float kth   = sorted[static_cast<size_t>(top_k - 1)];
                    int64_t     n_inf = 0;
                    for (int64_t i = 0; i < n; ++i) {
                        const float g = v[static_cast<size_t>(i)], e = exact[static_cast<size_t>(i)];
                        if (g == -std::numeric_limits<float>::infinity()) {
                            ++n_inf;
                            ASSERT_LT(e, kth) << "row " << i << " can be in the top " << top_k;
                        } else {
                            ASSERT_EQ(std::memcmp(&g, &e, 4), 0) << "row " << i;
                        }
                    }
                    if (kind == 0) {
                        EXPECT_GT(n_inf, n / 2) << "top " << top_k << ": most rows should be bounded away";
                    }
                };
                for (const int64_t top_k : {1, 5, 40, 100}) check_top_k(*fast, lf, top_k);
                if (kind == 3) {
                    Loaded l5 = load(*fast5, t, x, nw);
                    for (const int64_t top_k : {1, 40, 100}) check_top_k(*fast5, l5, top_k);
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuHead, ::testing::Values(CpuIsa::avx512, CpuIsa::avx2, CpuIsa::neon),
                         [](const auto & param_info) { return std::string(cpu_isa_name(param_info.param)); });

}  // namespace
}  // namespace tern
