// GgufFile::open_streamed (the browser build's reader for files larger than its heap): the same
// metadata, directory and tensor bytes as the mapped open(), with metadata that needs the prefix to
// grow several times; the same errors for truncated files (at every offset of a small file);
// progress; and tensor bytes that are freed on release_tensor_data().
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

#include "core/error.h"
#include "core/mmap.h"
#include "gguf_test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <random>

namespace tern {
namespace {

namespace fs = std::filesystem;

fs::path temp_file(const std::string & name) { return fs::temp_directory_path() / ("tern_stream_" + name); }

// Errors come out the same from both readers (the message names the file: same path).
std::string error_of(const std::function<void()> & fn) {
    try {
        fn();
    } catch (const Error & e) {
        return e.what();
    }
    return "accepted";
}

TEST(GgufStream, SameMetadataAndTensorsAsMapped) {
    // A string array of ~5 MB (Llama-3's vocabulary is about that) makes the 1 MiB first prefix grow
    // twice; tensors of awkward sizes and types, random bytes.
    GgufWriter w;
    std::vector<std::string> vocab;
    std::mt19937             rng(7);
    for (int i = 0; i < 200000; ++i) vocab.push_back("token_" + std::to_string(rng()) + "_" + std::to_string(i));
    w.set_string("general.architecture", "test");
    w.set_string_array("tokenizer.ggml.tokens", vocab);
    std::uniform_int_distribution<int> byte(0, 255);
    auto random_bytes = [&](size_t n) {
        std::vector<uint8_t> v(n);
        for (auto & b : v) b = static_cast<uint8_t>(byte(rng));
        return v;
    };
    w.add_tensor("a", DType::f16, {37, 3}, random_bytes(37 * 3 * 2));
    w.add_tensor("b", DType::f32, {1, 5}, random_bytes(20));
    w.add_tensor("c", DType::q8_0, {32 * 7}, random_bytes(7 * 34));
    const fs::path path = temp_file("same.gguf");
    w.write_file(path.string());

    const GgufFile mapped   = GgufFile::open(path.string());
    GgufFile       streamed = GgufFile::open_streamed(path.string());
    EXPECT_FALSE(mapped.streamed());
    EXPECT_TRUE(streamed.streamed());
    EXPECT_EQ(streamed.file_size(), mapped.file_size());
    EXPECT_EQ(streamed.data_offset(), mapped.data_offset());
    EXPECT_GT(streamed.data_offset(), size_t{4} << 20);
    ASSERT_EQ(streamed.kvs().size(), mapped.kvs().size());
    EXPECT_EQ(*streamed.get_string_array("tokenizer.ggml.tokens"), *mapped.get_string_array("tokenizer.ggml.tokens"));
    std::vector<std::pair<uint64_t, uint64_t>> progress;
    streamed.set_read_progress([&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); });
    ASSERT_EQ(streamed.tensors().size(), 3u);
    uint64_t total = 0;
    for (size_t i = 0; i < 3; ++i) {
        const auto & t = streamed.tensors()[i];
        total += t.n_bytes;
        const auto a = mapped.tensor_data(mapped.tensors()[i]);
        const auto b = streamed.tensor_data(t);
        ASSERT_EQ(a.size(), b.size()) << t.name;
        EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << t.name;
    }
    ASSERT_EQ(progress.size(), 3u);
    EXPECT_EQ(progress.back(), std::make_pair(total, total));
    // Spans stay valid across later reads until the release.
    const auto first = streamed.tensor_data(streamed.tensors()[0]);
    (void) streamed.tensor_data(streamed.tensors()[2]);
    EXPECT_TRUE(std::equal(first.begin(), first.end(), mapped.tensor_data(mapped.tensors()[0]).begin()));
    streamed.release_tensor_data();
    mapped.release_tensor_data();  // nothing for a mapped file
    EXPECT_EQ(mapped.tensor_data(mapped.tensors()[1]).size(), 20u);
    fs::remove(path);
}

TEST(GgufStream, TruncatedFilesFailAsMapped) {
    const auto     full = test::small_valid_file().build();
    const fs::path path = temp_file("cut.gguf");
    for (size_t n = 0; n <= full.size(); ++n) {
        write_file_bytes(path.string(), {full.data(), n});
        const std::string mapped   = error_of([&] { (void) GgufFile::open(path.string()); });
        const std::string streamed = error_of([&] { (void) GgufFile::open_streamed(path.string()); });
        if (n == 0) {
            EXPECT_NE(streamed.find("smaller than the 24-byte GGUF header"), std::string::npos) << streamed;
            continue;  // (mapping an empty file: its own message)
        }
        EXPECT_EQ(streamed, mapped) << n;
    }
    fs::remove(path);
}

TEST(GgufStream, MissingFileAndDirectory) {
    EXPECT_NE(error_of([] { (void) GgufFile::open_streamed("/nonexistent/x.gguf"); }).find("cannot open '/nonexistent/x.gguf'"),
              std::string::npos);
    EXPECT_NE(error_of([] { (void) GgufFile::open_streamed(fs::temp_directory_path().string()); }).find("not a regular file"),
              std::string::npos);
}

}  // namespace
}  // namespace tern
