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
#include "backend/webgpu/pipeline_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
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

// output_head over columns [c0, c0 + n) of x with ids (greedy) or top_k (> 0: the logits, read back;
// with `lists`, the lists of HeadOutput::top_rows too, `list_stride` u32 per column).
std::vector<float> head_logits_top_k(Backend & b, const HeadCase & hc, const std::vector<float> & x, int64_t n,
                                     int64_t top_k, std::vector<uint32_t> * lists = nullptr,
                                     int64_t list_stride = 0) {
    auto table = b.load_embedding(hc.table());
    auto norm  = b.load_norm(hc.norm());
    auto xt    = alloc_tensor(b, DType::f32, {hc.k, n, 1, 1}, "x");
    auto h     = alloc_tensor(b, DType::f32, {hc.k, n, 1, 1}, "h");
    auto lg    = alloc_tensor(b, DType::f32, {hc.nv, n, 1, 1}, "logits");
    auto rows  = alloc_tensor(b, DType::i32, {std::max<int64_t>(list_stride, 1), n, 1, 1}, "rows");
    b.write(xt.tensor, x.data(), static_cast<size_t>(n * hc.k) * 4);
    HeadOutput out{lg.tensor, {}, top_k};
    bool       listed = false;
    if (lists != nullptr) {
        // (counts the head must overwrite)
        std::vector<uint32_t> junk(static_cast<size_t>(list_stride * n), 0xdeadbeefu);
        b.write(rows.tensor, junk.data(), junk.size() * 4);
        out.top_rows        = rows.tensor;
        out.top_rows_stride = list_stride;
        out.rows_listed     = &listed;
    }
    b.begin_step();
    b.output_head(out, *table, {xt.tensor, norm.get(), 1e-5f, {}, h.tensor}, true);
    b.end_step();
    std::vector<float> logits(static_cast<size_t>(n * hc.nv));
    b.read(lg.tensor, logits.data(), logits.size() * 4);
    if (lists != nullptr) {
        EXPECT_TRUE(listed) << "the batched top-k head listed no rows";
        lists->resize(static_cast<size_t>(list_stride * n));
        b.read(rows.tensor, lists->data(), lists->size() * 4);
    }
    return logits;
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

// The top-k head's lists (HeadOutput::top_rows): each column's list holds exactly the rows its
// logits hold finite, each once, with the same bits; a list without room for them counts them
// and writes no further. 70 columns: two head_batch calls (64 + 6), the second's lists offset.
TEST(WebGpuHeadBatch, TopKListsHoldTheRowsTheLogitsKeep) {
    TERN_REQUIRE_WEBGPU();
    Backend & gpu = *test::shared_webgpu().backend;
    Rand      r(47);
    for (const int kind : {0, 1}) {
        const int64_t top_k = 3, n_cols = 70;
        const HeadCase           hc = test::make_head_case(kind, 256, 1000, r);
        const std::vector<float> x  = head_columns(hc, n_cols, r);
        for (const int64_t room : {int64_t{1000}, int64_t{4}}) {
            SCOPED_TRACE("kind " + std::to_string(kind) + ", room for " + std::to_string(room) + " rows");
            const int64_t            stride = 2 + 2 * room;
            std::vector<uint32_t>    lists;
            const std::vector<float> got = head_logits_top_k(gpu, hc, x, n_cols, top_k, &lists, stride);
            int64_t                  n_full = 0;
            for (int64_t j = 0; j < n_cols; ++j) {
                const float *    g = got.data() + j * hc.nv;
                const uint32_t * l = lists.data() + j * stride;
                int64_t          finite = 0;
                for (int64_t i = 0; i < hc.nv; ++i) finite += g[i] != -std::numeric_limits<float>::infinity();
                ASSERT_EQ(l[0], static_cast<uint32_t>(finite)) << "column " << j << ": the count";
                if (finite > room) {
                    ++n_full;
                    continue;
                }
                std::vector<bool> seen(static_cast<size_t>(hc.nv));
                for (int64_t i = 0; i < finite; ++i) {
                    const uint32_t row = l[2 + 2 * i];
                    ASSERT_LT(row, static_cast<uint32_t>(hc.nv)) << "column " << j;
                    ASSERT_FALSE(seen[row]) << "column " << j << ": row " << row << " listed twice";
                    seen[row] = true;
                    ASSERT_EQ(l[3 + 2 * i], std::bit_cast<uint32_t>(g[row])) << "column " << j << ", row " << row;
                }
            }
            if (room == 4) EXPECT_GT(n_full, 0) << "no list ran out of room";
            if (room == 1000) EXPECT_EQ(n_full, 0);
        }
    }
}

// head_exact_batch.wgsl's TEAMS form in greedy heads too (head_batch_teams 2: 8 teams of 32 lanes, a listed
// row each, instead of the whole workgroup per row): the reference's ids, and its top-k logits'
// bits with every row that can be in a column's top k kept, at K 256 (a word per lane) and 2560
// (10 words per lane, 2B4T's rows), on the near-tie and hidden-winner cases.
TEST(WebGpuHeadBatch, TheTeamsFormGivesTheReferencesIdsAndTopK) {
    TERN_REQUIRE_WEBGPU();
    WebGpuOptions o;
    o.allow_cpu_adapter = true;
    o.tune              = "head_i8_min_bytes=0,head_batch_teams=2";  // (1, the default: top-k heads only)
    auto gpu_ptr = make_webgpu_backend(o);
    auto & gpu   = dynamic_cast<WebGpuBackend &>(*gpu_ptr);
    auto   ref   = make_cpu_reference_backend(1);
    Rand   r(53);
    for (const int64_t k : {256, 2560}) {
        for (const int kind : {0, 1, 2, 4, 5}) {
            SCOPED_TRACE("kind " + std::to_string(kind) + ", K " + std::to_string(k));
            const HeadCase             hc     = test::make_head_case(kind, k, 700, r);
            const int64_t              n_cols = 21;
            const std::vector<float>   x      = head_columns(hc, n_cols, r);
            const std::vector<int32_t> want   = greedy_ids(*ref, hc, x, 0, n_cols);
            const int64_t              before = gpu.batch_heads_recorded();
            const std::vector<int32_t> got    = greedy_ids(gpu, hc, x, 0, n_cols);
            EXPECT_EQ(gpu.batch_heads_recorded() - before, 1);
            for (int64_t j = 0; j < n_cols; ++j) {
                EXPECT_EQ(got[static_cast<size_t>(j)], want[static_cast<size_t>(j)]) << "column " << j;
            }
            const int64_t            top_k = 5;
            const std::vector<float> exact = head_logits_top_k(*ref, hc, x, n_cols, 0);
            const std::vector<float> topk  = head_logits_top_k(gpu, hc, x, n_cols, top_k);
            int64_t                  n_fin = 0;
            for (int64_t j = 0; j < n_cols; ++j) {
                const float *      e = exact.data() + j * hc.nv;
                const float *      g = topk.data() + j * hc.nv;
                std::vector<float> sorted(e, e + hc.nv);
                std::sort(sorted.begin(), sorted.end(), std::greater<>());
                const float kth = sorted[static_cast<size_t>(top_k - 1)];
                for (int64_t i = 0; i < hc.nv; ++i) {
                    if (g[i] == -std::numeric_limits<float>::infinity()) {
                        ASSERT_LT(e[i], kth) << "column " << j << ", row " << i << " can be in the top " << top_k;
                    } else {
                        ++n_fin;
                        ASSERT_EQ(std::bit_cast<uint32_t>(g[i]), std::bit_cast<uint32_t>(e[i]))
                            << "column " << j << ", row " << i << ": " << g[i] << " vs " << e[i];
                    }
                }
            }
            EXPECT_GE(n_fin, n_cols * top_k) << "every column keeps at least its top k";
        }
    }
}

// lm_head_i8_mma.wgsl with the subgroup matrices emulated (for adapters without them, SwiftShader):
// a subgroup is invocations 32 s .. 32 s + 31 of the workgroup; an operand is its place in
// workgroup memory (offset and stride in bytes: the builtins' units times MU), read when it is
// multiplied (the kernel changes no tile between a load and its products); a result is 8 i32 per
// invocation (element lane + 32 q, row-major in the 16 x 16); shuffles go through workgroup memory.
// Every replaced spelling must occur in the kernel, so a change of the kernel fails here, loudly.
const char * emulated_head_mma() {
    static const std::string source = [] {
        const WgslShader * real = find_wgsl_shader("lm_head_i8_mma");
        TERN_ASSERT(real != nullptr, "lm_head_i8_mma is embedded");
        std::string s(real->source);
        const std::pair<const char *, const char *> edits[] = {
            {"enable subgroups;\n", ""},
            {"enable chromium_experimental_subgroup_matrix;\n", ""},
            {"alias Left  = subgroup_matrix_left<i8, 32, 16>;", "alias Left = EmuOperand;"},
            {"alias Right = subgroup_matrix_right<i8, 16, 32>;", "alias Right = EmuOperand;"},
            {"alias Acc   = subgroup_matrix_result<i32, 16, 16>;", "alias Acc = EmuAcc;"},
            {"subgroupMatrixLoad<Left, row_major>(&smem, ", "emu_load("},
            {"subgroupMatrixLoad<Right, col_major>(&smem, ", "emu_load("},
            {"subgroupMatrixMultiplyAccumulate(", "emu_mma("},
            {"subgroupMatrixStore<col_major>(&smem, ", "emu_store("},
            {"subgroupShuffleXor(", "emu_shuffle_xor("},
            {"@builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32", "@builtin(num_workgroups) emu_n: vec3<u32>"},
            {"    let row0  = wid.x * BM;", "    let sg = lid / 32u;\n    let lane = lid % 32u;\n    emu_lane = lane;\n    emu_lid = lid;\n    let row0  = wid.x * BM;"},
        };
        for (const auto & [from, to] : edits) {
            size_t at = s.find(from), n = 0;
            for (; at != std::string::npos; at = s.find(from, at + std::strlen(to)), ++n) s.replace(at, std::strlen(from), to);
            TERN_ASSERT(n > 0, "lm_head_i8_mma.wgsl no longer has '%s'", from);
        }
        s += R"(
struct EmuOperand { off: u32, stride: u32 }
struct EmuAcc { v: array<i32, 8> }
var<private> emu_lane: u32;
var<private> emu_lid: u32;
var<workgroup> emu_x: array<u32, 1024>;
fn emu_byte(a: u32) -> i32 { return (smem[a / 4u] << (24u - 8u * (a % 4u))) >> 24u; }
fn emu_load(off: u32, stride: u32) -> EmuOperand { return EmuOperand(off * MU, stride * MU); }
// l: 16 rows of 32 bytes (row r at off + r stride), r: 16 columns of 32 bytes (the same).
fn emu_mma(l: EmuOperand, r: EmuOperand, acc: EmuAcc) -> EmuAcc {
    var o = acc;
    for (var q = 0u; q < 8u; q++) {
        let e = emu_lane + 32u * q;
        var s = 0;
        for (var k = 0u; k < 32u; k++) { s += emu_byte(l.off + (e / 16u) * l.stride + k) * emu_byte(r.off + (e % 16u) * r.stride + k); }
        o.v[q] += s;
    }
    return o;
}
fn emu_store(off: u32, acc: EmuAcc, stride: u32) {  // column-major: (row, col) at off + col stride + row
    for (var q = 0u; q < 8u; q++) {
        let e = emu_lane + 32u * q;
        smem[off + (e % 16u) * stride + e / 16u] = acc.v[q];
    }
}
fn emu_shuffle_xor(v: u32, mask: u32) -> u32 {
    workgroupBarrier();
    emu_x[emu_lid] = v;
    workgroupBarrier();
    return emu_x[emu_lid ^ mask];
}
)";
        return s;
    }();
    static const WgslInclude none[] = {{nullptr, 0}};
    static const WgslShader  table[] = {{"lm_head_i8_mma_emulated", "lm_head_i8_mma.wgsl", source, none}};
    static const bool        added   = (add_wgsl_shaders(table), true);
    (void)added;
    return "lm_head_i8_mma_emulated";
}

// The tensor-core stage (lm_head_i8_mma.wgsl, its subgroup matrices emulated where the adapter has
// none) in place of lm_head_i8_batch: the same ids and top-k logits as the CPU reference, with 1, 2
// and 4 subgroups along the rows (partial row blocks: vocabularies of 300..1000), 1 to 4 along the
// columns (3, 21 and 70 columns: 64 + 6), builtin offsets in units of 4 and 1 bytes.
TEST(WebGpuHeadBatch, TheTensorCoreStageGivesTheSameIds) {
    TERN_REQUIRE_WEBGPU();
    auto & gpu = dynamic_cast<WebGpuBackend &>(*test::shared_webgpu().backend);
    auto   ref = make_cpu_reference_backend(1);
    const bool real = gpu.mma_unit() != 0;
    const char * shader = real ? "lm_head_i8_mma" : emulated_head_mma();
    Rand r(47);
    struct Case {
        int64_t  n_vocab;
        int      kind;
        int64_t  n_cols;
        uint32_t sgm, unit;
    };
    for (const Case cs : {Case{1000, 0, 70, 2, 4}, Case{500, 5, 21, 1, 4}, Case{700, 2, 3, 4, 1}, Case{300, 4, 21, 2, 1}}) {
        const uint32_t unit = real ? gpu.mma_unit() : cs.unit;
        SCOPED_TRACE("kind " + std::to_string(cs.kind) + ", " + std::to_string(cs.n_cols) + " columns, SGM " +
                     std::to_string(cs.sgm) + ", unit " + std::to_string(unit) + (real ? "" : " (emulated)"));
        gpu.set_head_mma({shader, unit, cs.sgm});
        ASSERT_TRUE(gpu.head_mma_tiling(cs.n_cols, 256).has_value()) << "the stage fits this adapter";
        const HeadCase             hc   = test::make_head_case(cs.kind, 256, cs.n_vocab, r);
        const std::vector<float>   x    = head_columns(hc, cs.n_cols, r);
        const std::vector<int32_t> want = greedy_ids(*ref, hc, x, 0, cs.n_cols);
        const std::vector<int32_t> got  = greedy_ids(gpu, hc, x, 0, cs.n_cols);
        for (int64_t j = 0; j < cs.n_cols; ++j) {
            EXPECT_EQ(got[static_cast<size_t>(j)], want[static_cast<size_t>(j)]) << "column " << j;
        }
        if (cs.kind == 4) EXPECT_EQ(got[0], 7) << "the exact winner hidden by f32 sums";
        if (cs.kind == 5) EXPECT_EQ(got[0], 12) << "the exact winner hidden by the int8 copy";
        // Top-k: the reference's bits or -inf where the row cannot be among the column's k largest;
        // most rows -inf (the thresholds came out of the stage).
        const int64_t            top_k = 5, n = std::min<int64_t>(cs.n_cols, 19);
        const std::vector<float> exact = head_logits_top_k(*ref, hc, x, n, 0);
        const std::vector<float> topk  = head_logits_top_k(gpu, hc, x, n, top_k);
        int64_t                  n_inf = 0;
        for (int64_t j = 0; j < n; ++j) {
            const float *      e = exact.data() + j * hc.nv;
            const float *      g = topk.data() + j * hc.nv;
            std::vector<float> sorted(e, e + hc.nv);
            std::sort(sorted.begin(), sorted.end(), std::greater<>());
            for (int64_t i = 0; i < hc.nv; ++i) {
                if (g[i] == -std::numeric_limits<float>::infinity()) {
                    ++n_inf;
                    ASSERT_LT(e[i], sorted[top_k - 1]) << "column " << j << ", row " << i;
                } else {
                    ASSERT_EQ(std::bit_cast<uint32_t>(g[i]), std::bit_cast<uint32_t>(e[i])) << "column " << j << ", row " << i;
                }
            }
        }
        if (cs.kind == 0) EXPECT_GT(n_inf, n * hc.nv / 2) << "most rows -inf: did the thresholds come out?";
    }
    gpu.set_head_mma({});
}

}  // namespace
}  // namespace tern
