// The int8 subgroup matrices (Dawn's chromium_experimental_subgroup_matrix, tensor cores on NVIDIA):
// one 16 x 16 x 32 product from workgroup memory at an offset against the integer product on the
// CPU, with the builtins' offsets in i8 elements and in i32 words (one of the two must be exact).
// Skipped where the adapter has no subgroup matrices (SwiftShader, npm bun-webgpu's Dawn).
#include "backend/webgpu/webgpu_backend_impl.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <random>

namespace tern {
namespace {

TEST(WebGpuSubgroupMatrix, Int8ProductIsTheIntegerProduct) {
    TERN_REQUIRE_WEBGPU();
    auto * be = dynamic_cast<WebGpuBackend *>(test::shared_webgpu().backend.get());
    ASSERT_NE(be, nullptr);
    if (!be->context().features().subgroup_matrix) GTEST_SKIP() << "the adapter has no subgroup matrices";
    std::mt19937                       rng(7);
    std::vector<int8_t>                a(16 * 64), b(16 * 64);  // a [row][64], b [column][64]
    std::uniform_int_distribution<int> d(-128, 127);
    for (auto & v : a) v = static_cast<int8_t>(d(rng));
    for (auto & v : b) v = static_cast<int8_t>(d(rng));
    a[32] = -128;  // the extremes, in the operands (columns 32..63)
    b[32] = -128;
    // The product on the CPU, written out here (subgroup_matrix_probe_product, which the backend
    // compares with, is checked against it too).
    std::vector<int32_t> want(16 * 32, 0);
    for (int i = 0; i < 16; ++i) {
        for (int j = 16; j < 32; ++j) {
            for (int k = 32; k < 64; ++k) want[i * 32 + j] += int32_t(a[i * 64 + k]) * int32_t(b[(j - 16) * 64 + k]);
        }
    }
    EXPECT_EQ(WebGpuBackend::subgroup_matrix_probe_product(a, b), want);
    int exact = 0;
    for (uint32_t unit : {1u, 4u}) {
        const auto r = be->subgroup_matrix_probe(a, b, unit);
        ASSERT_TRUE(r.error.empty()) << r.error;
        ASSERT_EQ(r.c.size(), 512u);
        int bad = 0;
        for (size_t e = 0; e < want.size(); ++e) {
            if (r.c[e] != want[e] && bad++ < 2) {
                std::printf("[          ]   row %zu column %zu: %d, want %d\n", e / 32, e % 32, r.c[e], want[e]);
            }
        }
        std::printf("[          ] offsets and strides in units of %u bytes: %d of 512 wrong\n", unit, bad);
        exact += bad == 0;
    }
    EXPECT_GT(exact, 0) << "neither unit of the subgroup matrix builtins' offsets gave the integer product";
}

}  // namespace
}  // namespace tern
