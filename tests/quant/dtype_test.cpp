// The dtype table against FORMATS.md §2.1 (block sizes and bytes), the I2_S size rule n/4 + 32
// (§1.7) with the 2B4T numbers of §8.1, and the names given to ids tern rejects (§2.2).
#include "core/dtype.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(DTypeTable, BlockGeometryMatchesTheSpec) {
    const struct {
        uint32_t     id;
        const char * name;
        uint32_t     qk, bytes;
        bool         quantized, ternary;
    } table[] = {
        {0, "f32", 1, 4, false, false},        {1, "f16", 1, 2, false, false},
        {2, "q4_0", 32, 18, true, false},      {8, "q8_0", 32, 34, true, false},
        {12, "q4_k", 256, 144, true, false},   {14, "q6_k", 256, 210, true, false},
        {30, "bf16", 1, 2, false, false},      {34, "tq1_0", 256, 54, true, true},
        {35, "tq2_0", 256, 66, true, true},    {41, "q1_0", 128, 18, true, false},
        {42, "q2_0", 64, 18, true, true},      {142, "pq2_0", 128, 34, true, true},
    };
    for (const auto & t : table) {
        SCOPED_TRACE(t.name);
        const auto tr = dtype_traits(t.id);
        ASSERT_TRUE(tr.has_value());
        EXPECT_EQ(tr->name, t.name);
        EXPECT_EQ(tr->block_size, t.qk);
        EXPECT_EQ(tr->block_bytes, t.bytes);
        EXPECT_EQ(tr->is_quantized, t.quantized);
        EXPECT_EQ(tr->is_ternary, t.ternary);
        EXPECT_EQ(dtype_from_name(t.name), static_cast<DType>(t.id));
        EXPECT_EQ(dtype_name(static_cast<DType>(t.id)), t.name);
        const int64_t ne0 = 3 * static_cast<int64_t>(t.qk);
        EXPECT_EQ(dtype_row_bytes(static_cast<DType>(t.id), ne0), 3u * t.bytes);
        EXPECT_EQ(dtype_tensor_bytes(static_cast<DType>(t.id), ne0, ne0 * 5), 15u * t.bytes);
    }
    // i2_s is read, and it is tensor-level: ggml's block 1 / 1 byte with the packed row ne0/4.
    ASSERT_TRUE(dtype_traits(36).has_value());
    EXPECT_EQ(dtype_traits(36)->name, "i2_s");
    EXPECT_TRUE(dtype_traits(36)->is_ternary);
    EXPECT_EQ(dtype_row_bytes(DType::i2_s, 2560), 640u);
}

TEST(DTypeTable, I2sTensorBytes) {
    EXPECT_EQ(dtype_tensor_bytes(DType::i2_s, 128, 128), 64u);          // §3.2.5
    EXPECT_EQ(dtype_tensor_bytes(DType::i2_s, 128, 256), 96u);          // two-row variant
    EXPECT_EQ(dtype_tensor_bytes(DType::i2_s, 2560, 2560 * 2560), 1638432u);  // attn_q, attn_o
    EXPECT_EQ(dtype_tensor_bytes(DType::i2_s, 2560, 2560 * 640), 409632u);    // attn_k, attn_v
    EXPECT_EQ(dtype_tensor_bytes(DType::i2_s, 2560, 2560 * 6912), 4423712u);  // ffn_gate, ffn_up
    EXPECT_EQ(dtype_tensor_bytes(DType::i2_s, 6912, 6912 * 2560), 4423712u);  // ffn_down
    EXPECT_EQ(dtype_tensor_bytes(DType::f16, 2560, int64_t{2560} * 128256), 656670720u);  // token_embd
}

TEST(DTypeTable, RejectedIdsHaveNoTraitsButHaveNames) {
    for (uint32_t id : {3u, 4u, 5u, 6u, 7u, 9u, 10u, 11u, 13u, 15u, 16u, 24u, 28u, 29u, 31u, 33u, 37u, 38u, 39u, 40u, 43u,
                        141u, 143u, 999u, 1000u, 1001u, 0xffffffffu}) {
        EXPECT_FALSE(dtype_traits(id).has_value()) << id;
        EXPECT_FALSE(dtype_unsupported_name(id, false).empty()) << id;
    }
    EXPECT_NE(dtype_unsupported_name(38, true).find("TL1"), std::string_view::npos);
    EXPECT_NE(dtype_unsupported_name(39, true).find("TL2"), std::string_view::npos);
    EXPECT_NE(dtype_unsupported_name(39, false).find("MXFP4"), std::string_view::npos);
    EXPECT_NE(dtype_unsupported_name(37, false).find("I8_S"), std::string_view::npos);
    EXPECT_NE(dtype_unsupported_name(143, false).find("PTQ1_0"), std::string_view::npos);
    EXPECT_FALSE(dtype_from_name("tl1").has_value());
    EXPECT_FALSE(dtype_from_name("").has_value());
    // Internal activation types are named but never valid in a file.
    EXPECT_EQ(dtype_name(DType::i8), "i8");
    EXPECT_EQ(dtype_name(DType::i32), "i32");
}

}  // namespace
}  // namespace tern
