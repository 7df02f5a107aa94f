// Every embedded WGSL kernel (and each _nodp4 variant) compiles on the local adapter and builds a
// pipeline with its default override values; a broken shader is reported as file:line:col; the
// embed script's include mapping points into the right file. Skipped without a WebGPU adapter.
#include "backend/webgpu/pipeline_cache.h"
#include "backend/webgpu/wgpu_device.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <memory>

namespace tern {
namespace {

// A device of our own (the backend's context is private).
const WgpuContext * test_context() {
    static std::unique_ptr<WgpuContext> ctx = [] {
        std::unique_ptr<WgpuContext> c;
        try {
            WgpuDeviceOptions o;
            o.allow_cpu_adapter = true;
            c                   = std::make_unique<WgpuContext>(o);
        } catch (const Error &) {
        }
        return c;
    }();
    return ctx.get();
}

TEST(WebGpuShaders, TableListsEveryKernelAndItsEmulatedVariant) {
    std::vector<std::string> names;
    for (const WgslShader & s : wgsl_shaders()) names.emplace_back(s.name);
    for (const char * want : {"embed", "rms_norm", "rms_norm_quant", "bitlinear", "bitlinear_nodp4", "gate_up",
                              "gate_up_nodp4", "qkv_rope", "qkv_rope_nodp4", "attention", "lm_head", "argmax"}) {
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    }
    const WgslShader * emulated = find_wgsl_shader("bitlinear_nodp4");
    ASSERT_NE(emulated, nullptr);
    EXPECT_EQ(emulated->source.find("dot4I8Packed"), std::string_view::npos);
    EXPECT_EQ(emulated->source.find("\nrequires "), std::string_view::npos);
}

TEST(WebGpuShaders, IncludeLinesMapBackToTheirFiles) {
    const WgslShader * s = find_wgsl_shader("rms_norm_quant");
    ASSERT_NE(s, nullptr);
    ASSERT_NE(s->includes, nullptr);
    ASSERT_NE(s->includes[0].file, nullptr);
    EXPECT_STREQ(s->includes[0].file, "lib/numerics.wgsl");
    const uint32_t first = s->includes[0].first_line;
    EXPECT_EQ(wgsl_location(*s, 3, 7), "rms_norm_quant.wgsl:3:7");
    EXPECT_EQ(wgsl_location(*s, first + 4, 2), "lib/numerics.wgsl:5:2");
}

TEST(WebGpuShaders, EveryEmbeddedShaderCompilesAndMakesAPipeline) {
    TERN_REQUIRE_WEBGPU();
    const WgpuContext * ctx = test_context();
    ASSERT_NE(ctx, nullptr);
    PipelineCache cache(*ctx);
    for (const WgslShader & s : wgsl_shaders()) {
        SCOPED_TRACE(std::string(s.name));
        EXPECT_NO_THROW(cache.module(s.name));
    }
    // Pipelines with default overrides; the binding signature must match the kernel's bindings.
    const std::pair<const char *, const char *> signatures[] = {
        {"embed", "rrwu"},          {"rms_norm", "rrwu"},     {"rms_norm_quant", "rrwwu"}, {"bitlinear", "rrrwu"},
        {"bitlinear_nodp4", "rrrwu"}, {"gate_up", "rrrwu"},   {"gate_up_nodp4", "rrrwu"},  {"qkv_rope", "rrrrwwwu"},
        {"qkv_rope_nodp4", "rrrrwwwu"}, {"attention", "rrrwu"}, {"lm_head", "rrwu"},        {"argmax", "rwu"}};
    for (const auto & [name, sig] : signatures) {
        SCOPED_TRACE(name);
        EXPECT_NO_THROW(cache.pipeline(PipelineKey{name, sig, {}}));
    }
}

TEST(WebGpuShaders, CompileErrorsNameFileLineAndColumn) {
    TERN_REQUIRE_WEBGPU();
    const WgpuContext * ctx = test_context();
    ASSERT_NE(ctx, nullptr);
    const WgslInclude none[] = {{nullptr, 0}};
    const WgslShader  bad{"broken", "broken.wgsl",
                         "// a kernel with a type error on line 3\n@compute @workgroup_size(1) fn main() {\n"
                         "    let x: u32 = 1.5;\n}\n",
                         none};
    try {
        compile_wgsl(*ctx, bad);
        FAIL() << "a broken shader compiled";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::device);
        EXPECT_NE(std::string(e.what()).find("broken.wgsl:3:"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace tern
