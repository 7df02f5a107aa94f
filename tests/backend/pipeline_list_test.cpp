// The list of a run's pipelines (pipeline_list.h) and PipelineCache::prebuild: keys survive a line
// exactly; malformed lines are skipped; foreign, truncated, corrupt and oversized files are not used,
// never an error; writes leave no temp file; pipelines started ahead serve later requests (counted), and one that cannot build
// still fails with its error when asked for. The prebuild test needs a WebGPU adapter.
#include "backend/webgpu/pipeline_cache.h"
#include "backend/webgpu/pipeline_list.h"
#include "backend/webgpu/wgpu_device.h"
#include "backend/webgpu/wgpu_loader.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

namespace tern {
namespace {

PipelineKey key_of(std::string_view shader, std::string_view sig,
                   std::initializer_list<std::pair<std::string_view, double>> overrides) {
    PipelineKey k{shader, sig, {}};
    for (const auto & [name, value] : overrides) k.add(name, value);
    return k;
}

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        path = std::filesystem::temp_directory_path() / ("tern_pipeline_list_" + std::to_string(::getpid()));
        std::filesystem::remove_all(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string file(const char * name) const { return (path / name).string(); }
};

std::string read_all(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void write_all(const std::string & path, const std::string & text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

TEST(PipelineList, KeyLinesRoundTripExactly) {
    std::deque<std::string> names;
    for (const PipelineKey & k :
         {key_of("argmax_final", "rwu", {}), key_of("bitlinear", "rrrwu", {{"WG", 256}, {"ROWS", 8}, {"TOKS", 5}}),
          key_of("attention", "rrrwwrrrru", {{"PF_WORDS0", 2239488.0 + 1.0 / 3}, {"X", -0.1}, {"Y", 1e-300}})}) {
        const std::string line = pipeline_key_line(k);
        const auto        back = parse_pipeline_key_line(line, names);
        ASSERT_TRUE(back.has_value()) << line;
        EXPECT_TRUE(*back == k) << line << " -> " << pipeline_key_line(*back);
    }
    // Names are interned: a second parse of the same line adds none.
    const size_t n = names.size();
    parse_pipeline_key_line("bitlinear rrrwu WG=256", names);
    EXPECT_EQ(names.size(), n);
}

TEST(PipelineList, MalformedLinesAreRejected) {
    std::deque<std::string> names;
    for (const char * bad :
         {"", "bitlinear", "no_such_shader rrrwu", "bitlinear rrxwu", "bitlinear rrrwu WG", "bitlinear rrrwu WG=",
          "bitlinear rrrwu WG=12x", "bitlinear rrrwu W-G=1", "bitlinear rrrwu =3", "bit\xff rrrwu",
          "bitlinear rrrwu A=1 B=1 C=1 D=1 E=1 F=1 G=1 H=1 I=1 J=1 K=1 L=1 M=1 N=1 O=1 P=1 Q=1 R=1 S=1 T=1 U=1 V=1 "
          "W=1 X=1 Y=1"}) {
        EXPECT_FALSE(parse_pipeline_key_line(bad, names).has_value()) << bad;
    }
}

TEST(PipelineList, ForeignTruncatedAndCorruptFilesCostOnlyKeys) {
    TempDir                        dir;
    const std::string              path = dir.file("sub/list.txt");
    const std::vector<PipelineKey> keys = {key_of("argmax_final", "rwu", {{"WG", 256}}),
                                           key_of("bitlinear", "rrrwu", {{"WG", 256}, {"ROWS", 8}}),
                                           key_of("embed", "rrwwu", {})};
    ASSERT_TRUE(write_pipeline_list(path, "head 1", keys));  // creates the folder
    std::deque<std::string> names;
    const auto              back = read_pipeline_list(path, "head 1", names);
    ASSERT_EQ(back.size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_TRUE(back[i] == keys[i]) << i;
    // No temp file is left beside it.
    size_t files = 0;
    for (const auto & e : std::filesystem::directory_iterator(dir.path / "sub")) files += e.is_regular_file();
    EXPECT_EQ(files, 1u);

    EXPECT_TRUE(read_pipeline_list(path, "head 2", names).empty());              // another adapter / tuning
    EXPECT_TRUE(read_pipeline_list(dir.file("missing.txt"), "head 1", names).empty());
    // Cut short anywhere, or one byte changed: the checksum line rejects the whole file.
    const std::string text = read_all(path);
    for (size_t cut : {text.size() - 1, text.size() - 4, text.size() - 30, text.size() / 2}) {
        write_all(path, text.substr(0, cut));
        EXPECT_TRUE(read_pipeline_list(path, "head 1", names).empty()) << cut;
    }
    for (size_t at : {size_t{9}, text.size() / 2, text.size() - 3}) {
        std::string bad = text;
        bad[at] ^= 4;
        write_all(path, bad);
        EXPECT_TRUE(read_pipeline_list(path, "head 1", names).empty()) << at;
    }
    write_all(path, "head 1\nbitlinear rrrwu WG=256\nend 0000000000000000\n");
    EXPECT_TRUE(read_pipeline_list(path, "head 1", names).empty());
    write_all(path, std::string(3 * k_max_pipeline_list_bytes, 'x'));
    EXPECT_TRUE(read_pipeline_list(path, "head 1", names).empty());
    write_all(path, text);
    EXPECT_EQ(read_pipeline_list(path, "head 1", names).size(), keys.size());
    // A line this build cannot use (a shader it does not embed) is skipped, the others kept.
    ASSERT_TRUE(write_pipeline_list(path, "head 1", {keys[0], key_of("no_such_shader", "rwu", {}), keys[1]}));
    EXPECT_EQ(read_pipeline_list(path, "head 1", names).size(), 2u);

    // At most k_max_pipeline_list_keys keys are written.
    std::vector<PipelineKey> many;
    for (size_t i = 0; i < k_max_pipeline_list_keys + 10; ++i) many.push_back(key_of("embed", "rrwwu", {{"WG", static_cast<double>(i)}}));
    ASSERT_TRUE(write_pipeline_list(path, "head 1", many));
    EXPECT_EQ(read_pipeline_list(path, "head 1", names).size(), k_max_pipeline_list_keys);
    // A folder that cannot be made: false, nothing thrown.
    write_all(dir.file("plain"), "x");
    EXPECT_FALSE(write_pipeline_list(dir.file("plain/list.txt"), "head 1", keys));
}

TEST(PipelineList, PrebuiltPipelinesServeLaterRequests) {
    WgpuContext * ctx = test::shared_wgpu_context();
    if (!ctx) GTEST_SKIP() << "no WebGPU device";
    if (!wgpu().wgpuDeviceCreateComputePipelineAsync) GTEST_SKIP() << "this library has no async pipeline creation";
    const std::vector<PipelineKey> keys = {key_of("argmax_final", "rwu", {{"WG", 64}}),
                                           key_of("argmax_final", "rwu", {{"WG", 128}}),
                                           key_of("embed", "rrwwu", {})};
    {
        PipelineCache cache(*ctx);
        EXPECT_EQ(cache.prebuild(keys), keys.size());
        EXPECT_EQ(cache.prebuild(keys), 0u);  // started already
        EXPECT_EQ(cache.n_pipelines(), 0u);
        for (const PipelineKey & k : {keys[2], keys[0], keys[1]}) EXPECT_NE(cache.pipeline(k), nullptr);
        EXPECT_EQ(cache.n_prebuilt(), keys.size());
        ASSERT_EQ(cache.used().size(), keys.size());
        EXPECT_TRUE(cache.used()[0] == keys[2]);  // in the order asked for
        EXPECT_EQ(cache.prebuild(keys), 0u);      // built already
        // One never built ahead is built on the spot.
        EXPECT_NE(cache.pipeline(key_of("argmax_final", "rwu", {{"WG", 256}})), nullptr);
        EXPECT_EQ(cache.n_prebuilt(), keys.size());
    }
    {
        // A key setting an override its shader does not declare is not started (with skip_validation,
        // on a GPU, Dawn would abort on it); a cache destroyed with builds in flight waits for them.
        PipelineCache     cache(*ctx);
        const PipelineKey bad = key_of("argmax_final", "rwu", {{"NO_SUCH_OVERRIDE", 1}});
        EXPECT_EQ(cache.prebuild({bad, keys[0]}), 1u);
        if (ctx->adapter().is_cpu) {  // validated: asked for, it fails with the device's error
            EXPECT_THROW(cache.pipeline(bad), Error);
        }
    }
    if (ctx->adapter().is_cpu) {
        // One whose build fails (bindings that do not match the shader's): asked for, it is built
        // again inside an error scope, which names the error.
        PipelineCache     cache(*ctx);
        const PipelineKey bad = key_of("argmax_final", "rw", {});
        EXPECT_EQ(cache.prebuild({bad}), 1u);
        EXPECT_THROW(cache.pipeline(bad), Error);
        EXPECT_EQ(cache.n_prebuilt(), 0u);
    }
}

}  // namespace
}  // namespace tern
