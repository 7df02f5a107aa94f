// The batched greedy LM head (WebGpuBackend::head_batch: output_head with ids over several
// columns, a batched decoding step's head, issue 53) against the CPU reference's exact head and
// argmax per column, and against the WebGPU backend's own single-column greedy head for each column
// (batched = alone); and the batched top-k head (output_head with top_k over several columns): each
// logit the reference's bits or -inf, never -inf for a row that can be among the column's top k. The head cases of backend_ops_test.cpp (near ties, an exact tie, identical
// rows, winners hidden by f32 sums and by the int8 copy) with column counts that leave partial
// workgroups (3, 21, 70: more than the 64 columns a call takes, so two calls); the columns are the case's x,
// copies of it, its negation and random vectors, so a workgroup's columns want different rows.
// K = 256 takes the batched kernel (K a multiple of 16), K = 264 the multi-column exact head.
// Skipped without a WebGPU adapter.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/webgpu/webgpu_backend_impl.h"
#include "head_cases.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>
#include <string>

namespace tern {
namespace {

using test::HeadCase;
using test::Rand;

// Column j of the input: the case's x (j % 5 == 0), -x (j % 5 == 1), a random vector otherwise.
std::vector<float> head_columns(const HeadCase & hc, int64_t n_cols, Rand & r) {
    std::vector<float> x(static_cast<size_t>(hc.k * n_cols));
    for (int64_t j = 0; j < n_cols; ++j) {
        for (int64_t i = 0; i < hc.k; ++i) {
            const float v = hc.x[static_cast<size_t>(i)];
            x[static_cast<size_t>(j * hc.k + i)] = j % 5 == 0 ? v : j % 5 == 1 ? -v : r.normal(1.5f);
        }
    }
    return x;
}

// output_head over columns [c0, c0 + n) of x with ids (greedy) or top_k (> 0: the logits, read back).
std::vector<float> head_logits_top_k(Backend & b, const HeadCase & hc, const std::vector<float> & x, int64_t n,
                                     int64_t top_k) {
    auto table = b.load_embedding(hc.table());
    auto norm  = b.load_norm(hc.norm());
    auto xt    = alloc_tensor(b, DType::f32, {hc.k, n, 1, 1}, "x");
    auto h     = alloc_tensor(b, DType::f32, {hc.k, n, 1, 1}, "h");
    auto lg    = alloc_tensor(b, DType::f32, {hc.nv, n, 1, 1}, "logits");
    b.write(xt.tensor, x.data(), static_cast<size_t>(n * hc.k) * 4);
    b.begin_step();
    b.output_head({lg.tensor, {}, top_k}, *table, {xt.tensor, norm.get(), 1e-5f, {}, h.tensor}, true);
    b.end_step();
    std::vector<float> out(static_cast<size_t>(n * hc.nv));
    b.read(lg.tensor, out.data(), out.size() * 4);
    return out;
}

std::vector<int32_t> greedy_ids(Backend & b, const HeadCase & hc, const std::vector<float> & x, int64_t c0, int64_t n) {
    auto table = b.load_embedding(hc.table());
    auto norm  = b.load_norm(hc.norm());
    auto xt    = alloc_tensor(b, DType::f32, {hc.k, n, 1, 1}, "x");
    auto h     = alloc_tensor(b, DType::f32, {hc.k, n, 1, 1}, "h");
    auto lg    = alloc_tensor(b, DType::f32, {hc.nv, n, 1, 1}, "logits");
    auto ids   = alloc_tensor(b, DType::i32, {n, 1, 1, 1}, "ids");
    b.write(xt.tensor, x.data() + c0 * hc.k, static_cast<size_t>(n * hc.k) * 4);
    b.begin_step();
    b.output_head({lg.tensor, ids.tensor, 0}, *table, {xt.tensor, norm.get(), 1e-5f, {}, h.tensor}, true);
    b.end_step();
    std::vector<int32_t> out(static_cast<size_t>(n));
    b.read(ids.tensor, out.data(), out.size() * 4);
    return out;
}

TEST(WebGpuHeadBatch, EveryColumnGetsTheExactHeadsArgmaxAndItsAloneId) {
    TERN_REQUIRE_WEBGPU();
    Backend & gpu = *test::shared_webgpu().backend;
    auto      ref = make_cpu_reference_backend(1);
    Rand      r(41);
    struct Case {
        const char * name;
        int64_t      n_vocab;
        int          kind;  // make_head_case's kinds
        int64_t      n_cols;
    };
    for (const int64_t k : {256, 264}) {
        for (const Case cs : {Case{"random", 1000, 0, 70}, Case{"near ties", 1000, 1, 21}, Case{"exact tie", 700, 2, 3},
                              Case{"all equal", 300, 3, 3}, Case{"hidden by f32", 300, 4, 21},
                              Case{"hidden by int8", 500, 5, 21}}) {
            SCOPED_TRACE(std::string(cs.name) + ", K " + std::to_string(k) + ", " + std::to_string(cs.n_cols) +
                         " columns");
            const HeadCase             hc   = test::make_head_case(cs.kind, k, cs.n_vocab, r);
            const std::vector<float>   x    = head_columns(hc, cs.n_cols, r);
            const std::vector<int32_t> want = greedy_ids(*ref, hc, x, 0, cs.n_cols);
            const int64_t              before = dynamic_cast<WebGpuBackend &>(gpu).batch_heads_recorded();
            const std::vector<int32_t> got  = greedy_ids(gpu, hc, x, 0, cs.n_cols);
            EXPECT_EQ(dynamic_cast<WebGpuBackend &>(gpu).batch_heads_recorded() - before,
                      k % 16 == 0 ? (cs.n_cols + 63) / 64 : 0)
                << "the batched head runs where K is a multiple of 16, in groups of at most 64 columns";
            ASSERT_EQ(got.size(), want.size());
            for (int64_t j = 0; j < cs.n_cols; ++j) {
                EXPECT_EQ(got[static_cast<size_t>(j)], want[static_cast<size_t>(j)]) << "column " << j;
            }
            // Batched = alone: the single-column greedy head on a few columns.
            for (int64_t j : {int64_t{0}, int64_t{1}, cs.n_cols - 1}) {
                EXPECT_EQ(greedy_ids(gpu, hc, x, j, 1)[0], got[static_cast<size_t>(j)]) << "column " << j << " alone";
            }
            if (cs.kind == 3) EXPECT_EQ(got[0], 0) << "all rows equal: the lowest index";
            if (cs.kind == 4) EXPECT_EQ(got[0], 7) << "the exact winner hidden by f32 sums";
            if (cs.kind == 5) EXPECT_EQ(got[0], 12) << "the exact winner hidden by the int8 copy";
        }
    }
}

TEST(WebGpuHeadBatch, TopKKeepsEveryRowThatCanBeInEachColumnsTopK) {
    TERN_REQUIRE_WEBGPU();
    Backend & gpu = *test::shared_webgpu().backend;
    auto      ref = make_cpu_reference_backend(1);
    Rand      r(43);
    for (const int kind : {0, 1, 3, 5}) {
        const int64_t top_k = kind == 3 ? 40 : 5, n_cols = 19;
        SCOPED_TRACE("kind " + std::to_string(kind) + ", top " + std::to_string(top_k));
        const HeadCase           hc    = test::make_head_case(kind, 256, 1000, r);
        const std::vector<float> x     = head_columns(hc, n_cols, r);
        const std::vector<float> exact = head_logits_top_k(*ref, hc, x, n_cols, 0);
        const int64_t            before = dynamic_cast<WebGpuBackend &>(gpu).batch_heads_recorded();
        const std::vector<float> got   = head_logits_top_k(gpu, hc, x, n_cols, top_k);
        EXPECT_EQ(dynamic_cast<WebGpuBackend &>(gpu).batch_heads_recorded() - before, 1);
        int64_t n_inf = 0;
        for (int64_t j = 0; j < n_cols; ++j) {
            const float *      e = exact.data() + j * hc.nv;
            const float *      g = got.data() + j * hc.nv;
            std::vector<float> sorted(e, e + hc.nv);
            std::sort(sorted.begin(), sorted.end(), std::greater<>());
            const float kth = sorted[static_cast<size_t>(top_k - 1)];
            for (int64_t i = 0; i < hc.nv; ++i) {
                if (g[i] == -std::numeric_limits<float>::infinity()) {
                    ++n_inf;
                    ASSERT_LT(e[i], kth) << "column " << j << ", row " << i << " can be in the top " << top_k;
                } else {
                    ASSERT_EQ(std::bit_cast<uint32_t>(g[i]), std::bit_cast<uint32_t>(e[i]))
                        << "column " << j << ", row " << i << ": " << g[i] << " vs " << e[i];
                }
            }
        }
        if (kind == 0) EXPECT_GT(n_inf, n_cols * hc.nv / 2) << "most rows -inf: did the fast path run?";
    }
}

}  // namespace
}  // namespace tern
