// The paged ops of backend.h (KvBatch, issue 53): attention_paged, qkv_rope_kv_append_paged and
// gather_columns. Every sequence of a batch must get exactly the bits it gets alone over a
// contiguous cache (attention() / qkv_rope_kv_append() with pos0): checked on the CPU reference,
// and every backend against that reference on random data, with page tables in scrambled orders,
// pages of 16, 48 and 64 positions (64: whole blocks of 32 positions per page, the P·V kernels
// look a block's page up once), one or several columns per sequence, G = 3 and 4, head_dim 40 and 64,
// f16 and f32 caches, and positions on both sides of every boundary the kernels split at (blocks
// of 32 positions, the WebGPU scores' 32-position workgroups, the softmax's 256-position chunks,
// superblocks of 512, P·V rounds of 2048).
// Built into tern_backend_tests (the CPU reference and fast backends) and, with TERN_HAS_WEBGPU, into
// tern_webgpu_tests.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/fp16.h"
#include "quant/block_formats.h"

#include <gtest/gtest.h>

#ifdef TERN_HAS_WEBGPU
#include "block_order_oracle.h"
#include "webgpu_test_util.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

namespace tern {
namespace {

struct PagedCase {
    std::string name;
    std::function<std::shared_ptr<Backend>(std::string & skip)> make;
};
void PrintTo(const PagedCase & c, std::ostream * os) { *os << c.name; }

std::vector<PagedCase> paged_backends() {
#ifdef TERN_HAS_WEBGPU
    // The defaults (attention_paged_super at every length where the shape fits: f16 V, G <= 4, head_dim
    // a multiple of 8; split_attention's kernels otherwise), and with attention_paged_super off: P·V by
    // superblock tiles + combine at every length (attn_paged_tiles=1), attention_split_pv at every
    // length (=0; its V by vec4 loads with f16, by words with f32).
    auto tuned = [](const char * tune) {
        return [tune](std::string & skip) -> std::shared_ptr<Backend> {
            skip = test::shared_webgpu().reason;
            if (!test::shared_webgpu().backend) return nullptr;
            WebGpuOptions o;
            o.allow_cpu_adapter = true;
            o.tune              = tune;
            return make_webgpu_backend(o);
        };
    };
    return {{"webgpu", [](std::string & skip) -> std::shared_ptr<Backend> {
                 skip = test::shared_webgpu().reason;
                 return test::shared_webgpu().backend;
             }},
            {"webgpu_paged_tiles", tuned("attn_paged_deep=0,attn_paged_tiles=1")},
            {"webgpu_split_pv", tuned("attn_paged_deep=0,attn_paged_tiles=0")}};
#else
    // The reference on 3 threads, and the fast backend on every instruction set this machine runs
    // (the others report themselves as skipped).
    auto fast = [](CpuIsa isa) {
        return [isa](std::string & skip) -> std::shared_ptr<Backend> {
            if (cpu_isa_available(isa)) return make_cpu_fast_backend({3, isa, 0});
            skip = std::string("no ") + std::string(cpu_isa_name(isa)) + " kernels on this CPU/build";
            return nullptr;
        };
    };
    return {{"cpu_3_threads", [](std::string &) -> std::shared_ptr<Backend> { return make_cpu_reference_backend(3); }},
            {"avx512_3_threads", fast(CpuIsa::avx512)},
            {"avx2_3_threads", fast(CpuIsa::avx2)},
            {"neon_3_threads", fast(CpuIsa::neon)}};
#endif
}

class PagedOps : public ::testing::TestWithParam<PagedCase> {
protected:
    void SetUp() override {
        std::string skip;
        be_ = GetParam().make(skip);
        if (!be_) GTEST_SKIP() << skip;
    }
    std::unique_ptr<Backend> ref_ = make_cpu_reference_backend(1);
    std::shared_ptr<Backend> be_;
};

std::vector<float> read_f32(Backend & b, const Tensor & t) {
    std::vector<float> out(static_cast<size_t>(t.n_elements()));
    b.read(t, out.data(), out.size() * sizeof(float));
    return out;
}

void expect_same_bits(const std::vector<float> & got, const std::vector<float> & want, const std::string & what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
            << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
    }
}

// One sequence of a test batch: its columns sit at positions pos0 .. pos0 + n - 1.
struct SeqSpec {
    int64_t pos0 = 0, n = 1;
};

// A batch over a pool of random K/V rows: each sequence's positions [0, pos0 + n) hold random
// values, stored at the rows its (scrambled) page table names; the same values contiguous per
// sequence give the reference.
struct PagedBatch {
    AttentionShape               shape;
    DType                        cache = DType::f16;
    int64_t                      page_size = 16, n_pages = 0, n_kv = 0, n_q = 0;
    std::vector<SeqSpec>         specs;
    std::vector<KvSeq>           seqs;
    std::vector<int32_t>         pages;  // [n_seq][max_pages]
    int64_t                      max_pages = 0;
    std::vector<int32_t>         columns;  // [T][4]
    std::vector<std::vector<uint8_t>> k_seq, v_seq;  // per sequence, contiguous rows in the cache type
    std::vector<uint8_t>         k_pool, v_pool;       // the pool's rows
    std::vector<float>           q;                    // [n_q, T]
    int64_t n_tokens() const { return seqs.empty() ? 0 : seqs.back().first + seqs.back().n; }
};

PagedBatch make_batch(const AttentionShape & shape, DType cache, int64_t page_size, std::vector<SeqSpec> specs,
                      uint32_t seed) {
    PagedBatch b;
    b.shape     = shape;
    b.cache     = cache;
    b.page_size = page_size;
    b.specs     = specs;
    b.n_kv      = shape.n_head_kv * shape.head_dim;
    b.n_q       = shape.n_head * shape.head_dim;
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    int64_t total_pages = 0;
    for (const auto & s : specs) {
        const int64_t np = (s.pos0 + s.n + page_size - 1) / page_size;
        b.max_pages      = std::max(b.max_pages, np);
        total_pages += np;
    }
    b.n_pages = total_pages + 3;  // a few pages no sequence uses
    std::vector<int32_t> perm(static_cast<size_t>(b.n_pages));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen);
    const size_t row_bytes = dtype_row_bytes(cache, b.n_kv);
    b.k_pool.assign(static_cast<size_t>(b.n_pages * page_size) * row_bytes, 0);
    b.v_pool.assign(b.k_pool.size(), 0);
    b.pages.assign(specs.size() * static_cast<size_t>(b.max_pages), -1);
    size_t  next_page = 0;
    int64_t col       = 0;
    std::vector<float> row(static_cast<size_t>(b.n_kv));
    for (size_t i = 0; i < specs.size(); ++i) {
        const SeqSpec & s  = specs[i];
        const int64_t   np = (s.pos0 + s.n + page_size - 1) / page_size;
        for (int64_t g = 0; g < np; ++g) b.pages[i * static_cast<size_t>(b.max_pages) + static_cast<size_t>(g)] = perm[next_page++];
        b.seqs.push_back({col, s.n, s.pos0});
        col += s.n;
        const int64_t n_pos = s.pos0 + s.n;
        b.k_seq.emplace_back(static_cast<size_t>(n_pos) * row_bytes);
        b.v_seq.emplace_back(static_cast<size_t>(n_pos) * row_bytes);
        for (int64_t p = 0; p < n_pos; ++p) {
            const int64_t cache_row =
                static_cast<int64_t>(b.pages[i * static_cast<size_t>(b.max_pages) + static_cast<size_t>(p / page_size)]) *
                    page_size + p % page_size;
            for (auto * dst : {&b.k_seq.back(), &b.v_seq.back()}) {
                for (auto & v : row) v = nd(gen);
                quantize_row(cache, row.data(), dst->data() + static_cast<size_t>(p) * row_bytes, b.n_kv);
                auto & pool = dst == &b.k_seq.back() ? b.k_pool : b.v_pool;
                std::memcpy(pool.data() + static_cast<size_t>(cache_row) * row_bytes,
                            dst->data() + static_cast<size_t>(p) * row_bytes, row_bytes);
            }
        }
    }
    b.columns.assign(static_cast<size_t>(4 * col), 0);
    for (size_t i = 0; i < b.seqs.size(); ++i) {
        for (int64_t t = 0; t < b.seqs[i].n; ++t) {
            const int64_t pos = b.seqs[i].pos0 + t;
            int32_t *     c   = b.columns.data() + 4 * (b.seqs[i].first + t);
            c[0]              = static_cast<int32_t>(pos);
            c[1]              = static_cast<int32_t>(i);
            c[2] = b.pages[i * static_cast<size_t>(b.max_pages) + static_cast<size_t>(pos / page_size)] *
                       static_cast<int32_t>(page_size) + static_cast<int32_t>(pos % page_size);
        }
    }
    b.q.resize(static_cast<size_t>(b.n_q * col));
    for (auto & v : b.q) v = 0.5f * nd(gen);
    return b;
}

// The device side of a batch on one backend: the pool, the tables, and the KvBatch over them.
struct DeviceBatch {
    OwnedTensor k, v, page_table, columns;
    KvBatch     batch;
};

DeviceBatch upload(Backend & be, const PagedBatch & b) {
    DeviceBatch d;
    const int64_t rows = b.n_pages * b.page_size;
    d.k          = alloc_tensor(be, b.cache, {b.n_kv, rows, 1, 1}, "k pool");
    d.v          = alloc_tensor(be, b.cache, {b.n_kv, rows, 1, 1}, "v pool");
    d.page_table = alloc_tensor(be, DType::i32, {b.max_pages, static_cast<int64_t>(b.seqs.size()), 1, 1}, "pages");
    d.columns    = alloc_tensor(be, DType::i32, {4, b.n_tokens(), 1, 1}, "columns");
    be.write(d.k.tensor, b.k_pool.data(), b.k_pool.size());
    be.write(d.v.tensor, b.v_pool.data(), b.v_pool.size());
    be.write(d.page_table.tensor, b.pages.data(), b.pages.size() * 4);
    be.write(d.columns.tensor, b.columns.data(), b.columns.size() * 4);
    d.batch.page_size  = b.page_size;
    d.batch.max_pages  = b.max_pages;
    d.batch.seqs       = b.seqs;
    d.batch.pages      = b.pages;
    d.batch.page_table = d.page_table.tensor;
    d.batch.columns    = d.columns.tensor;
    return d;
}

std::vector<float> run_paged_attention(Backend & be, const PagedBatch & b) {
    DeviceBatch d   = upload(be, b);
    auto        q   = alloc_tensor(be, DType::f32, {b.n_q, b.n_tokens(), 1, 1}, "q");
    auto        out = alloc_tensor(be, DType::f32, {b.n_q, b.n_tokens(), 1, 1}, "out");
    be.write(q.tensor, b.q.data(), b.q.size() * 4);
    be.begin_step();
    be.attention_paged(out.tensor, q.tensor, {d.k.tensor, d.v.tensor}, b.shape, d.batch);
    be.end_step();
    return read_f32(be, out.tensor);
}

// Each sequence alone over its contiguous cache (attention with pos0), columns concatenated.
std::vector<float> run_alone(Backend & be, const PagedBatch & b) {
    std::vector<float> all;
    for (size_t i = 0; i < b.seqs.size(); ++i) {
        const KvSeq & s     = b.seqs[i];
        const int64_t n_pos = s.pos0 + s.n;
        auto k   = alloc_tensor(be, b.cache, {b.n_kv, n_pos, 1, 1}, "k");
        auto v   = alloc_tensor(be, b.cache, {b.n_kv, n_pos, 1, 1}, "v");
        auto q   = alloc_tensor(be, DType::f32, {b.n_q, s.n, 1, 1}, "q");
        auto out = alloc_tensor(be, DType::f32, {b.n_q, s.n, 1, 1}, "out");
        be.write(k.tensor, b.k_seq[i].data(), b.k_seq[i].size());
        be.write(v.tensor, b.v_seq[i].data(), b.v_seq[i].size());
        be.write(q.tensor, b.q.data() + s.first * b.n_q, static_cast<size_t>(s.n * b.n_q) * 4);
        be.attention(out.tensor, q.tensor, {k.tensor, v.tensor}, b.shape, s.pos0);
        const auto o = read_f32(be, out.tensor);
        all.insert(all.end(), o.begin(), o.end());
    }
    return all;
}

TEST_P(PagedOps, AttentionGivesEverySequenceItsAloneBits) {
    struct Shape {
        AttentionShape s;
        const char *   what;
    };
    const Shape shapes[] = {{{8, 2, 64, 64, 10000.0f, 0.125f}, "G 4, head_dim 64"},
                            {{6, 2, 40, 40, 10000.0f, 1.0f / std::sqrt(40.0f)}, "G 3, head_dim 40"}};
    // Positions next to the kernels' boundaries: one position; blocks of 32; the softmax's chunks of
    // 256 (G 4) / 320 (G 3); superblocks of 512; several columns per sequence (a prompt chunk).
    const std::vector<SeqSpec> specs = {{0, 1},  {30, 3},  {63, 2},  {255, 1}, {318, 4},
                                        {511, 2}, {700, 1}, {1023, 2}, {5, 7}};
    // and a batch whose columns see fewer than 512 positions (the last 511), which the WebGPU
    // defaults give attention_split_pv.
    const std::vector<SeqSpec> short_specs = {{0, 1}, {30, 3}, {63, 2}, {255, 1}, {318, 4}, {509, 2}, {5, 7}};
    for (const Shape & sh : shapes) {
        for (DType cache : {DType::f16, DType::f32}) {
            for (int64_t page : {16, 48, 64}) {
                SCOPED_TRACE(std::string(sh.what) + (cache == DType::f16 ? ", f16" : ", f32") + ", pages of " +
                             std::to_string(page));
                for (const auto * sp : {&specs, &short_specs}) {
                    const PagedBatch b    = make_batch(sh.s, cache, page, *sp, 7);
                    const auto       want = run_alone(*ref_, b);
                    expect_same_bits(run_paged_attention(*ref_, b), want, "CPU paged vs alone");
                    expect_same_bits(run_paged_attention(*be_, b), want, "paged vs the CPU alone");
                }
            }
        }
    }
}

// One query over a long context, as decoding deep into a 2B4T-shaped cache does (G 4, head_dim
// 128): past one P·V round of 2048 positions and a softmax chunk's end, next to the context of
// 4096 positions a 2B4T model was trained for.
TEST_P(PagedOps, LongContextAttentionCrossesEverySplitBoundary) {
    const AttentionShape s{8, 2, 128, 128, 10000.0f, 1.0f / std::sqrt(128.0f)};
    const std::vector<SeqSpec> specs = {{2047, 1}, {2048, 1}, {2560, 1}, {4095, 1}};
    for (DType cache : {DType::f16, DType::f32}) {
        SCOPED_TRACE(cache == DType::f16 ? "f16" : "f32");
        const PagedBatch b    = make_batch(s, cache, 256, specs, 11);
        const auto       want = run_alone(*ref_, b);
        expect_same_bits(run_paged_attention(*ref_, b), want, "CPU paged vs alone");
        expect_same_bits(run_paged_attention(*be_, b), want, "paged vs the CPU alone");
    }
}

// A score far above the others in a late superblock (and, for the other query heads of the group,
// far below): the superblocks' maxima differ by tens, so the row join's weights exp_fixed(m - M)
// underflow for the early superblocks of some heads and not others. head_dim 128 and 64 (G 4), and 256 (G 2:
// attention_paged_super by two slices of 128 dimensions), 1,024-position boundaries, several
// columns per sequence.
TEST_P(PagedOps, AttentionWithAHugeScoreInALateSuperblock) {
    const AttentionShape shapes[] = {{8, 2, 128, 128, 10000.0f, 1.0f / std::sqrt(128.0f)},
                                     {8, 2, 64, 64, 10000.0f, 0.125f},
                                     {4, 2, 256, 256, 10000.0f, 0.0625f}};
    const std::vector<SeqSpec> specs = {{1100, 1}, {1535, 2}, {1023, 1}, {600, 1}, {40, 3}};
    for (const AttentionShape & s : shapes) {
        for (int64_t page : {48, 64}) {
            SCOPED_TRACE("head_dim " + std::to_string(s.head_dim) + ", pages of " + std::to_string(page));
            PagedBatch b = make_batch(s, DType::f16, page, specs, 13);
            // K row of position p of sequence i times 40, in the sequence's rows and the pool's.
            auto scale_row = [&](size_t i, int64_t p) {
                const size_t row_bytes = dtype_row_bytes(b.cache, b.n_kv);
                auto *       src = reinterpret_cast<uint16_t *>(b.k_seq[i].data() + static_cast<size_t>(p) * row_bytes);
                for (int64_t d = 0; d < b.n_kv; ++d) src[d] = fp32_to_fp16(40.0f * fp16_to_fp32(src[d]));
                const int64_t row = static_cast<int64_t>(b.pages[i * static_cast<size_t>(b.max_pages) +
                                                                 static_cast<size_t>(p / page)]) * page + p % page;
                std::memcpy(b.k_pool.data() + static_cast<size_t>(row) * row_bytes, src, row_bytes);
            };
            scale_row(0, 1030);  // the last superblock of 1,101 positions
            scale_row(1, 1100);
            scale_row(2, 700);
            scale_row(3, 599);
            const auto want = run_alone(*ref_, b);
            expect_same_bits(run_paged_attention(*ref_, b), want, "CPU paged vs alone");
            expect_same_bits(run_paged_attention(*be_, b), want, "paged vs the CPU alone");
        }
    }
}

TEST_P(PagedOps, QkvAppendWritesEachColumnAtItsPositionAndRow) {
    // A small qkv weight (TQ2_0 rows of 256), random int8 activations; three sequences of 2, 1 and 5
    // columns at different positions. q must equal each sequence's alone; the pool rows the batch
    // names must hold what the alone caches hold at those positions.
    const AttentionShape shape{4, 2, 32, 32, 10000.0f, 1.0f / std::sqrt(32.0f)};
    const int64_t        k = 256, n_q = 4 * 32, n_kv = 2 * 32, rows = n_q + 2 * n_kv;
    std::mt19937         gen(3);
    std::vector<float>   wf(static_cast<size_t>(k));
    std::vector<uint8_t> wb(static_cast<size_t>(rows) * dtype_row_bytes(DType::tq2_0, k));
    for (int64_t r = 0; r < rows; ++r) {
        for (auto & v : wf) v = static_cast<float>(static_cast<int>(gen() % 3) - 1) * 0.5f;
        wf[0] = 0.5f;
        quantize_row(DType::tq2_0, wf.data(), wb.data() + static_cast<size_t>(r) * dtype_row_bytes(DType::tq2_0, k), k);
    }
    const size_t       qrow = static_cast<size_t>(n_q) * dtype_row_bytes(DType::tq2_0, k);
    const size_t       krow = static_cast<size_t>(n_kv) * dtype_row_bytes(DType::tq2_0, k);
    const WeightSource parts[3] = {{"q", DType::tq2_0, {k, n_q, 1, 1}, {wb.data(), qrow}},
                                   {"k", DType::tq2_0, {k, n_kv, 1, 1}, {wb.data() + qrow, krow}},
                                   {"v", DType::tq2_0, {k, n_kv, 1, 1}, {wb.data() + qrow + krow, krow}}};
    for (DType cache : {DType::f16, DType::f32}) {
        SCOPED_TRACE(cache == DType::f16 ? "f16" : "f32");
        const PagedBatch b = make_batch(shape, cache, 16, {{3, 2}, {40, 1}, {14, 5}}, 5);
        const int64_t    T = b.n_tokens();
        std::vector<int8_t> acts(static_cast<size_t>(k * T));
        std::vector<float>  scales(static_cast<size_t>(T));
        for (auto & a : acts) a = static_cast<int8_t>(static_cast<int>(gen() % 255) - 127);
        for (auto & sc : scales) sc = 10.0f + static_cast<float>(gen() % 50);
        std::vector<float> q_alone, q_paged[2];
        std::vector<std::vector<uint8_t>> kv_alone;  // per sequence: K rows then V rows of its columns
        Backend * bs[2] = {ref_.get(), be_.get()};
        for (int i = 0; i < 2; ++i) {
            Backend & be = *bs[i];
            auto      w  = be.load_linear(parts);
            auto      xq = alloc_tensor(be, DType::i8, {k, T, 1, 1}, "acts");
            auto      xs = alloc_tensor(be, DType::f32, {T, 1, 1, 1}, "scales");
            auto      qo = alloc_tensor(be, DType::f32, {n_q, T, 1, 1}, "q");
            be.write(xq.tensor, acts.data(), acts.size());
            be.write(xs.tensor, scales.data(), scales.size() * 4);
            DeviceBatch d = upload(be, b);
            be.begin_step();
            be.qkv_rope_kv_append_paged(qo.tensor, {d.k.tensor, d.v.tensor}, *w, {xq.tensor, xs.tensor}, shape, d.batch);
            be.end_step();
            q_paged[i]                = read_f32(be, qo.tensor);
            const size_t         rb   = dtype_row_bytes(cache, n_kv);
            std::vector<uint8_t> kp(d.k.tensor.n_bytes()), vp(kp.size());
            be.read(d.k.tensor, kp.data(), kp.size());
            be.read(d.v.tensor, vp.data(), vp.size());
            if (i == 0) {
                // Alone: each sequence's columns through qkv_rope_kv_append at its pos0 (CPU).
                for (size_t si = 0; si < b.seqs.size(); ++si) {
                    const KvSeq & s  = b.seqs[si];
                    auto          kc = alloc_tensor(be, cache, {n_kv, s.pos0 + s.n, 1, 1}, "k");
                    auto          vc = alloc_tensor(be, cache, {n_kv, s.pos0 + s.n, 1, 1}, "v");
                    auto          q1 = alloc_tensor(be, DType::f32, {n_q, s.n, 1, 1}, "q1");
                    const QuantizedActs a1{xq.tensor.columns(s.first, s.n), {}};
                    Tensor              sc = xs.tensor;
                    sc.offset += static_cast<size_t>(s.first) * 4;
                    sc.ne[0] = s.n;
                    be.qkv_rope_kv_append(q1.tensor, {kc.tensor, vc.tensor}, *w, {a1.q, sc}, shape, s.pos0);
                    const auto qa = read_f32(be, q1.tensor);
                    q_alone.insert(q_alone.end(), qa.begin(), qa.end());
                    std::vector<uint8_t> ka(kc.tensor.n_bytes()), va(ka.size());
                    be.read(kc.tensor, ka.data(), ka.size());
                    be.read(vc.tensor, va.data(), va.size());
                    for (int64_t t = 0; t < s.n; ++t) {
                        const int64_t row = b.columns[static_cast<size_t>(4 * (s.first + t) + 2)];
                        EXPECT_EQ(std::memcmp(kp.data() + row * rb, ka.data() + (s.pos0 + t) * rb, rb), 0)
                            << "K row of sequence " << si << ", column " << t;
                        EXPECT_EQ(std::memcmp(vp.data() + row * rb, va.data() + (s.pos0 + t) * rb, rb), 0)
                            << "V row of sequence " << si << ", column " << t;
                    }
                }
                kv_alone = {kp, vp};
            } else {
                EXPECT_EQ(kp, kv_alone[0]) << "K pool differs from the CPU's";
                EXPECT_EQ(vp, kv_alone[1]) << "V pool differs from the CPU's";
            }
        }
        expect_same_bits(q_paged[0], q_alone, "CPU paged q vs alone");
        expect_same_bits(q_paged[1], q_alone, "paged q vs the CPU alone");
    }
}

TEST_P(PagedOps, GatherColumnsCopiesTheListedColumns) {
    const int64_t      k = 300, T = 7;
    std::vector<float> src(static_cast<size_t>(k * T));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.25f - 3.0f;
    const std::vector<int32_t> cols = {6, 0, 3, 3};
    auto s = alloc_tensor(*be_, DType::f32, {k, T, 1, 1}, "src");
    auto c = alloc_tensor(*be_, DType::i32, {4, 1, 1, 1}, "cols");
    auto d = alloc_tensor(*be_, DType::f32, {k, 4, 1, 1}, "dst");
    be_->write(s.tensor, src.data(), src.size() * 4);
    be_->write(c.tensor, cols.data(), cols.size() * 4);
    be_->begin_step();
    be_->gather_columns(d.tensor, s.tensor, c.tensor);
    be_->end_step();
    const auto got = read_f32(*be_, d.tensor);
    for (size_t i = 0; i < cols.size(); ++i) {
        for (int64_t e = 0; e < k; ++e) {
            ASSERT_EQ(got[i * k + static_cast<size_t>(e)], src[static_cast<size_t>(cols[i] * k + e)]) << i << " " << e;
        }
    }
}

#ifdef TERN_HAS_WEBGPU
// Issue 52: a paged batch mixing short and long columns, each
// column of more than 512 positions in the block order (attention_paged_super's superblock partials,
// attention_split_combine's row join), the others the single pass (cpu::attention_row: block_order_oracle.h);
// several columns per sequence (a prompt chunk past position 511), the family shapes (head_dim 128
// G 4 and G 2, 64 G 4, 96 G 1), 40 G 3 and 32 G 8, pages of 48 and 64 positions, f16 and f32 caches (one
// case each: CI's time).
TEST(PagedBlockOrder, MixedColumnsGiveTheBlockOrdersBits) {
    TERN_REQUIRE_WEBGPU();
    struct Case {
        AttentionShape sh;
        DType          cache;
        int64_t        page;
    };
    const float r128    = 1.0f / std::sqrt(128.0f);
    const Case  cases[] = {{{8, 2, 128, 128, 10000.0f, r128}, DType::f16, 64},
                            {{4, 2, 128, 128, 10000.0f, r128}, DType::f16, 48},
                            {{8, 2, 64, 64, 10000.0f, 0.125f}, DType::f32, 48},
                            {{3, 3, 96, 96, 10000.0f, 1.0f / std::sqrt(96.0f)}, DType::f16, 64},
                            {{6, 2, 40, 40, 10000.0f, 1.0f / std::sqrt(40.0f)}, DType::f32, 64},
                            {{16, 2, 32, 32, 10000.0f, 1.0f / std::sqrt(32.0f)}, DType::f16, 64}};  // (G 8: 2 x 4)
    const std::vector<SeqSpec> specs = {{0, 1}, {511, 2}, {574, 3}, {30, 3}, {1022, 4}, {2046, 3}, {5, 7}, {4095, 2}};
    Backend & gpu = *test::shared_webgpu().backend;
    for (const Case & c : cases) {
        const AttentionShape & sh = c.sh;
        SCOPED_TRACE("head_dim " + std::to_string(sh.head_dim) + ", G " + std::to_string(sh.n_head / sh.n_head_kv) +
                     (c.cache == DType::f16 ? ", f16" : ", f32") + ", pages of " + std::to_string(c.page));
        const PagedBatch   b = make_batch(sh, c.cache, c.page, specs, 17);
        std::vector<float> want;
        for (size_t i = 0; i < b.seqs.size(); ++i) {
            const KvSeq & sq = b.seqs[i];
            const auto w = test::attention_columns(b.k_seq[i], b.v_seq[i], c.cache, b.q.data() + sq.first * b.n_q,
                                                   sh.n_head, sh.n_head_kv, sh.head_dim, sh.scale, sq.pos0, sq.n);
            want.insert(want.end(), w.begin(), w.end());
        }
        expect_same_bits(run_paged_attention(gpu, b), want, "paged (block order) vs cpu::attention_row");
    }
}
#endif

INSTANTIATE_TEST_SUITE_P(Paged, PagedOps, ::testing::ValuesIn(paged_backends()),
                         [](const auto & param_info) { return param_info.param.name; });

}  // namespace
}  // namespace tern
