// The int8 subgroup matrices (Dawn's chromium_experimental_subgroup_matrix, tensor cores on NVIDIA):
// one 16 x 16 x 32 product against the integer product on the CPU. Skipped where the adapter has no
// subgroup matrices (SwiftShader, the default Dawn build); prints which spelling of the extension's
// builtins compiled.
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
    int exact = 0;
    for (const char * shader : {"subgroup_matrix_probe", "subgroup_matrix_probe_t"}) {
        for (uint32_t unit : {1u, 4u}) {
            const auto r = be->subgroup_matrix_probe(shader, a, b, unit);
            if (!r.error.empty()) {
                std::printf("[          ] %s: %s\n", shader, r.error.c_str());
                break;
            }
            ASSERT_EQ(r.c.size(), 512u);
            int bad = 0;
            for (int i = 0; i < 16; ++i) {
                for (int j = 0; j < 32; ++j) {
                    int32_t want = 0;  // columns 0..15 stay as written (0)
                    if (j >= 16) {
                        for (int k = 32; k < 64; ++k) want += int32_t(a[i * 64 + k]) * int32_t(b[(j - 16) * 64 + k]);
                    }
                    if (r.c[i * 32 + j] != want && bad++ < 2) {
                        std::printf("[          ]   row %d column %d: %d, want %d\n", i, j, r.c[i * 32 + j], want);
                    }
                }
            }
            std::printf("[          ] %s, unit %u: %d of 512 wrong\n", shader, unit, bad);
            exact += bad == 0;
        }
    }
    EXPECT_GT(exact, 0) << "no spelling and unit of the subgroup matrix builtins gave the integer product";
}

}  // namespace
}  // namespace tern
