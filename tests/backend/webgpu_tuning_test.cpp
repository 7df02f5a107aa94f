// TERN_WEBGPU_TUNE (WebGpuTuning::apply): every key of the struct is settable, unknown keys and
// values out of a key's range are errors that name the key, the device class picks the defaults,
// and the backend refuses a bad setting when it is made.
#include "backend/webgpu/webgpu_backend_impl.h"
#include "backend/webgpu/webgpu_tuning.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <string>

namespace tern {
namespace {

// The message of the Error(invalid_argument) that apply(settings) throws ("" when it does not).
std::string apply_error(std::string_view settings) {
    WebGpuTuning t;
    try {
        t.apply(settings);
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << settings;
        return e.what() + std::string(" | ") + e.hint();
    }
    return "";
}

TEST(WebGpuTuning, SettingsReplaceTheDefaultsKeyByKey) {
    WebGpuTuning t;
    t.apply("decode_wg=128,gemm_tile=4x8x16x4,mma_tile_long=1x2,attn_long_positions=0,head_i8_min_bytes=0,,");
    EXPECT_EQ(t.decode_wg, 128u);
    EXPECT_EQ(t.gemm_tile.tm, 4u);
    EXPECT_EQ(t.gemm_tile.tc, 4u);
    EXPECT_EQ(t.mma_tile_long.sgm, 1u);
    EXPECT_EQ(t.mma_tile_long.sgn, 2u);
    EXPECT_EQ(t.attn_long_positions, 0u);
    EXPECT_EQ(t.head_i8_min_bytes, 0u);
    EXPECT_EQ(t.decode_wg_long, WebGpuTuning{}.decode_wg_long) << "keys not named keep their defaults";
    // describe() names every key with its value, in a form apply() takes back.
    WebGpuTuning back;
    back.apply(t.describe());
    EXPECT_EQ(back.describe(), t.describe());
    EXPECT_NE(t.describe().find("steps_per_submit=4"), std::string::npos) << t.describe();
}

TEST(WebGpuTuning, UnknownKeysAndBadValuesNameTheKey) {
    EXPECT_NE(apply_error("decode_wgs=128").find("unknown key 'decode_wgs'"), std::string::npos);
    EXPECT_NE(apply_error("decode_wgs=128").find("known keys: decode_wg,"), std::string::npos);
    EXPECT_NE(apply_error("decode_wg=100").find("decode_wg=100: expected a power of two in 32..1024"),
              std::string::npos);
    EXPECT_NE(apply_error("decode_wg=2048").find("decode_wg=2048"), std::string::npos);
    EXPECT_NE(apply_error("decode_lane_loads=11").find("an unsigned number in 1..10"), std::string::npos);
    EXPECT_NE(apply_error("spin_us=-1").find("spin_us=-1"), std::string::npos);
    EXPECT_NE(apply_error("qkv_lanes=").find("qkv_lanes="), std::string::npos);
    EXPECT_NE(apply_error("o_lanes=12").find("0 (automatic) or a power of two"), std::string::npos);
    EXPECT_NE(apply_error("gemm_tile=4x8").find("TMxTNxTRxTC"), std::string::npos);
    EXPECT_NE(apply_error("gemm_tile=4x0x16x8").find("TMxTNxTRxTC"), std::string::npos);
    EXPECT_NE(apply_error("mma_tile=0x1").find("SGMxSGN"), std::string::npos);
    EXPECT_NE(apply_error("decode_wg").find("is not key=value"), std::string::npos);
    EXPECT_NE(apply_error("=5").find("is not key=value"), std::string::npos);
    EXPECT_EQ(apply_error("o_lanes=0,gemm_tile=0x0x0x0"), "") << "0 is each one's automatic choice";
}

TEST(WebGpuTuning, ACpuAdapterDoesNotSpin) {
    WgpuAdapterSummary gpu, cpu;
    cpu.is_cpu = true;
    EXPECT_EQ(WebGpuTuning::for_adapter(gpu).spin_us, 20000u);
    EXPECT_EQ(WebGpuTuning::for_adapter(cpu).spin_us, 0u);
    EXPECT_EQ(WebGpuTuning::for_adapter(cpu).decode_wg, WebGpuTuning::for_adapter(gpu).decode_wg);
}

// The backend takes WebGpuOptions::tune (default: $TERN_WEBGPU_TUNE) over its device class's
// defaults, and refuses a bad key, or a tiling this device cannot run, when it is made.
TEST(WebGpuTuning, TheBackendAppliesItsSettingsAndRefusesBadOnes) {
    TERN_REQUIRE_WEBGPU();
    WebGpuOptions o;
    o.allow_cpu_adapter = true;
    o.tune              = "exact_groups=7,steps_per_submit=2";
    auto be             = make_webgpu_backend(o);
    const auto & t      = dynamic_cast<WebGpuBackend &>(*be).tuning();
    EXPECT_EQ(t.exact_groups, 7u);
    EXPECT_EQ(t.steps_per_submit, 2u);
    for (const char * bad : {"no_such_key=1", "gemm_tile=3x8x16x8", "gemm_tile=4x8x64x64", "mma_tile=3x1"}) {
        SCOPED_TRACE(bad);
        o.tune = bad;
        try {
            make_webgpu_backend(o);
            ADD_FAILURE() << "accepted";
        } catch (const Error & e) {
            EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
            EXPECT_NE(std::string(e.what()).find(std::string(bad).substr(0, 8)), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace tern
