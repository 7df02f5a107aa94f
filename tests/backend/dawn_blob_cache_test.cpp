// Dawn's blob cache in files (dawn_blob_cache.h): values come back exactly; truncated, corrupt and
// foreign files are misses; the size limit holds; no temp file is left. On a WebGPU adapter with
// dawn.node: a second device's pipeline comes from what the first one stored (its load callbacks hit).
#include "backend/webgpu/dawn_blob_cache.h"
#include "backend/webgpu/pipeline_cache.h"
#include "backend/webgpu/wgpu_device.h"
#include "backend/webgpu/wgpu_loader.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

namespace tern {
namespace {

struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const char * tag) {
        path = std::filesystem::temp_directory_path() / (std::string("tern_blob_") + tag + std::to_string(::getpid()));
        std::filesystem::remove_all(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::vector<std::filesystem::path> files() const {
        std::vector<std::filesystem::path> out;
        for (const auto & e : std::filesystem::directory_iterator(path)) out.push_back(e.path());
        return out;
    }
};

std::vector<uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

// Dawn's two calls: the size, then the value.
std::vector<uint8_t> load(DawnBlobCache & c, const std::vector<uint8_t> & key) {
    const size_t n = c.load(key.data(), key.size(), nullptr, 0);
    if (n == 0) return {};
    std::vector<uint8_t> v(n);
    if (c.load(key.data(), key.size(), v.data(), v.size()) != n) return {};
    return v;
}

TEST(DawnBlobCache, ValuesComeBackAndBadFilesAreMisses) {
    TempDir                    dir("files");
    DawnBlobCache              c(dir.path.string());
    const std::vector<uint8_t> k1 = bytes("key one"), k2 = bytes("key two"), v1 = bytes("the first value"),
                               v2(100000, 7);
    EXPECT_TRUE(load(c, k1).empty());
    c.store(k1.data(), k1.size(), v1.data(), v1.size());
    c.store(k2.data(), k2.size(), v2.data(), v2.size());
    EXPECT_EQ(c.stores(), 2u);
    EXPECT_EQ(load(c, k1), v1);
    EXPECT_EQ(load(c, k2), v2);
    EXPECT_EQ(c.hits(), 2u);
    ASSERT_EQ(dir.files().size(), 2u);  // no temp file left
    // A new cache on the same folder (the next run) finds them.
    DawnBlobCache again(dir.path.string());
    EXPECT_EQ(load(again, k1), v1);

    // Corrupt one byte of the value, then cut the file short, then write garbage: misses.
    std::filesystem::path f1;
    for (const auto & f : dir.files()) {
        if (std::filesystem::file_size(f) < 1000) f1 = f;
    }
    ASSERT_FALSE(f1.empty());
    std::string text;
    {
        std::ifstream in(f1, std::ios::binary);
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::string bad = text;
    bad.back() ^= 1;
    std::ofstream(f1, std::ios::binary | std::ios::trunc) << bad;
    EXPECT_TRUE(load(again, k1).empty());
    std::ofstream(f1, std::ios::binary | std::ios::trunc) << text.substr(0, text.size() - 3);
    EXPECT_TRUE(load(again, k1).empty());
    std::ofstream(f1, std::ios::binary | std::ios::trunc) << "garbage";
    EXPECT_TRUE(load(again, k1).empty());
    std::ofstream(f1, std::ios::binary | std::ios::trunc) << text;
    EXPECT_EQ(load(again, k1), v1);
    // A buffer of another size than the file's value: not filled as a hit.
    std::vector<uint8_t> small(3);
    EXPECT_NE(again.load(k1.data(), k1.size(), small.data(), small.size()), small.size());
}

TEST(DawnBlobCache, StopsStoringAtItsLimit) {
    TempDir                    dir("limit");
    DawnBlobCache              c(dir.path.string(), 1000);
    const std::vector<uint8_t> v(400, 1);
    for (int i = 0; i < 5; ++i) {
        const std::vector<uint8_t> k = bytes("key " + std::to_string(i));
        c.store(k.data(), k.size(), v.data(), v.size());
    }
    EXPECT_EQ(c.stores(), 2u);  // 2 x (32 + 5 + 400) fit in 1000 bytes, a third does not
    EXPECT_EQ(dir.files().size(), 2u);
    DawnBlobCache full(dir.path.string(), 1000);  // the folder's bytes count from the start
    const std::vector<uint8_t> k = bytes("key x");
    full.store(k.data(), k.size(), v.data(), v.size());
    EXPECT_EQ(full.stores(), 0u);
}

TEST(DawnBlobCache, ASecondDeviceLoadsWhatTheFirstStored) {
    TempDir dir("device");
    std::unique_ptr<WgpuContext> first;
    try {
        WgpuDeviceOptions o;
        o.allow_cpu_adapter = true;
        o.blob_cache_dir    = dir.path.string();
        first               = std::make_unique<WgpuContext>(o);
    } catch (const Error & e) {
        GTEST_SKIP() << "no WebGPU device: " << e.what();
    }
    if (!first->blob_cache()) GTEST_SKIP() << "this library is not dawn.node: no blob cache";
    const PipelineKey key{"argmax_final", "rwu", {}};
    {
        PipelineCache pipelines(*first);
        EXPECT_NE(pipelines.pipeline(key), nullptr);
    }
    EXPECT_GT(first->blob_cache()->stores(), 0u);
    EXPECT_EQ(first->blob_cache()->hits(), 0u);
    first.reset();

    WgpuDeviceOptions o;
    o.allow_cpu_adapter = true;
    o.blob_cache_dir    = dir.path.string();
    WgpuContext second(o);
    {
        PipelineCache pipelines(second);
        EXPECT_NE(pipelines.pipeline(key), nullptr);
    }
    EXPECT_GT(second.blob_cache()->hits(), 0u);
    std::printf("note: the second device: %llu hits, %llu stores\n", static_cast<unsigned long long>(second.blob_cache()->hits()),
                static_cast<unsigned long long>(second.blob_cache()->stores()));
}

}  // namespace
}  // namespace tern
