// lib/dataflow.wgsl: dependent phases inside one dispatch (tickets + tagged words) against the same
// phases as one dispatch each. Correctness on any adapter; the printed µs per phase is the figure
// that decides whether a persistent decode kernel pays (a dispatch boundary costs ~2.1 µs of GPU time on
// an H200, TERN_WEBGPU_GAP; these figures are wall time from submit to idle, the host included).
#include "backend/webgpu/webgpu_backend_impl.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(WebGpuDataflow, PhasesInOneDispatchSeeEveryValueOfThePreviousPhase) {
    TERN_REQUIRE_WEBGPU();
    auto * be = dynamic_cast<WebGpuBackend *>(test::shared_webgpu().backend.get());
    ASSERT_NE(be, nullptr);
    // Blocks not a multiple of the workgroup size; a chain long enough that a missed dependency
    // (a value read before it was written) shows as a smaller count somewhere downstream.
    for (const auto & [phases, blocks] : {std::pair{40u, 3u}, std::pair{150u, 70u}}) {
        for (bool one : {true, false}) {
            const auto r = be->dataflow_chain(phases, blocks, one, 3);
            EXPECT_EQ(r.error, 0u) << "a poll gave up (phases " << phases << ", one dispatch " << one << ")";
            ASSERT_EQ(r.last.size(), blocks);
            for (uint32_t b = 0; b < blocks; ++b) {
                EXPECT_EQ(r.last[b], static_cast<float>(phases)) << "block " << b << ", one dispatch " << one;
            }
            std::printf("[          ] %u phases x %u blocks, %s: %.2f us per phase\n", phases, blocks,
                        one ? "one dispatch" : "a dispatch per phase", r.us_per_phase);
        }
    }
}

// grid_sync_probe.wgsl: persistent workgroups that all-gather a vector in every round. Every
// workgroup must be resident at once, which a software adapter does not promise (it may run them one
// after another), so it runs on GPUs only. The printed figure is what a phase boundary inside a
// persistent decode kernel would cost; compare it with $TERN_WEBGPU_GAP's cost of a dispatch.
TEST(WebGpuDataflow, PersistentWorkgroupsSeeEveryValueOfEachRound) {
    TERN_REQUIRE_WEBGPU();
    auto * be = dynamic_cast<WebGpuBackend *>(test::shared_webgpu().backend.get());
    ASSERT_NE(be, nullptr);
    if (be->context().adapter().is_cpu) GTEST_SKIP() << "software adapter: workgroups need not be resident together";
    const char * names[] = {"counter", "tagged values", "counter + tagged values", "counter + plain values",
                            "plain values stored after the counter (racy on purpose)"};
    for (uint32_t groups : {32u, 128u, 256u}) {
        for (uint32_t n : {2048u, 7168u}) {
            for (uint32_t mode : {0u, 1u, 2u, 3u, 4u}) {
                if (mode == 0 && n != 2048u) continue;
                const auto r = be->grid_sync_probe(groups, n, 400, mode, 3);
                // Mode 4 races on purpose (producers count themselves done before they store): its
                // re-reads after a workgroup-scope barrier may keep seeing a stale cached word until the
                // probe gives up (seen once on an H100: 128 groups, 2048 values), which is the finding
                // it exists to show, not a failure. Modes 0-3 must always complete.
                if (mode == 4 && (r.error != 0 || !r.all_reached)) {
                    std::printf("[          ] %u groups, %u values, %s: gave up (plain re-reads never saw a store)\n",
                                groups, n, names[mode]);
                    continue;
                }
                EXPECT_EQ(r.error, 0u) << "a poll gave up (" << groups << " groups, mode " << mode << ")";
                EXPECT_TRUE(r.all_reached) << groups << " groups, n " << n << ", mode " << mode;
                std::printf("[          ] %u groups, %u values, %s: %.2f us per round, %llu re-reads\n", groups, n,
                            names[mode], r.us_per_round, static_cast<unsigned long long>(r.rereads));
            }
        }
    }
}

}  // namespace
}  // namespace tern
