// GGUF writer -> reader round trips.
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(GgufRoundTrip, MetadataAndTensorsSurvive) {
    GgufWriter w;
    w.set_string("general.architecture", "bitnet-b1.58");
    w.set_u32("bitnet-b1.58.block_count", 30);
    w.set_f32("bitnet-b1.58.rope.freq_base", 500000.0f);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "Ġhello"});
    std::vector<uint8_t> data(4 * 3 * 2);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
    w.add_tensor("t0", DType::f32, {3, 2}, data);
    w.add_tensor("t1", DType::f16, {5}, std::vector<uint8_t>(10, 7));
    const auto bytes = w.to_bytes();

    const GgufFile f = GgufFile::from_bytes(bytes);
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.get_string("general.architecture").value(), "bitnet-b1.58");
    EXPECT_EQ(f.get_int("bitnet-b1.58.block_count").value(), 30);
    EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("bitnet-b1.58.rope.freq_base").value()), 500000.0f);
    EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token").value());
    const auto toks = f.get_string_array("tokenizer.ggml.tokens").value();
    ASSERT_EQ(toks.size(), 3u);
    EXPECT_EQ(toks[2], "Ġhello");
    ASSERT_EQ(f.tensors().size(), 2u);
    const GgufTensorInfo * t0 = f.find_tensor("t0");
    ASSERT_NE(t0, nullptr);
    EXPECT_EQ(t0->ne[0], 3);
    EXPECT_EQ(t0->ne[1], 2);
    const auto d0 = f.tensor_data(*t0);
    ASSERT_EQ(d0.size(), data.size());
    EXPECT_TRUE(std::equal(d0.begin(), d0.end(), data.begin()));
    EXPECT_EQ(f.find_tensor("t1")->offset, 32u);  // 24 bytes padded to 32
}

}  // namespace
}  // namespace tern
