// Ternary weight decoding: the HF packed bit layout (FORMATS.md §4.14, example 0x92), the code-3
// check, weight_scale semantics, absmean ternarisation (§4.15: ties, dead rows, scale), and the
// I2_S / TQ packers' round trip.
#include "convert/hf_ternary.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/ternary_formats.h"
#include "st_builder.h"
#include "tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tern {
namespace {

// A StTensor over bytes the test owns.
StTensor tensor(const std::string & name, StDType dtype, std::vector<int64_t> shape, const std::vector<uint8_t> & bytes) {
    StTensor t;
    t.name       = name;
    t.dtype      = dtype;
    t.shape      = std::move(shape);
    t.n_elements = 1;
    for (int64_t d : t.shape) t.n_elements *= d;
    t.data = bytes;
    return t;
}

TEST(HfTernary, PackedExample0x92) {
    // FORMATS.md §4.14: out = 8, in = 2, packed[0][0] = 0x92 = 10 01 00 10:
    // W[0][0] = +1, W[2][0] = -1, W[4][0] = 0, W[6][0] = +1. Everything else is field 1 (0).
    std::vector<uint8_t> bytes = {0x92, 0x55, 0x55, 0x55};  // [2, 2]
    const StTensor       t     = tensor("w", StDType::u8, {2, 2}, bytes);
    std::vector<int8_t>  v(16);
    unpack_hf_packed(t, 8, 2, v.data());
    const std::vector<int8_t> want = {1, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    EXPECT_EQ(v, want);
    EXPECT_EQ(check_hf_packed(t).n_invalid, 0);
}

TEST(HfTernary, PackedRoundTripIsNotSymmetric) {
    // A random non-symmetric matrix through the test's packer and the converter's unpacker: any
    // swap of quarters, bit order or transposition would show.
    const int64_t       out = 12, in = 5;
    std::mt19937        rng(3);
    std::vector<int8_t> w(static_cast<size_t>(out * in));
    for (auto & x : w) x = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
    const auto          packed = test::hf_pack(w, out, in);
    const StTensor      t      = tensor("w", StDType::u8, {out / 4, in}, packed);
    std::vector<int8_t> v(w.size());
    unpack_hf_packed(t, out, in, v.data());
    EXPECT_EQ(v, w);
    // Row 1 alone set to +1 lands in bits 1..0 of packed row 1; row 3 (= 0 + out/4) in bits 3..2 of packed row 0.
    std::vector<int8_t> one(static_cast<size_t>(out * in), 0);
    one[static_cast<size_t>(1 * in)] = 1;
    one[static_cast<size_t>(3 * in + 4)] = -1;
    const auto p = test::hf_pack(one, out, in);
    EXPECT_EQ(p[static_cast<size_t>(1 * in)], 0x56);  // 01 01 01 10
    EXPECT_EQ(p[4], 0x51);                            // 01 01 00 01
}

TEST(HfTernary, Code3IsFoundAndLocated) {
    std::vector<uint8_t> bytes(2 * 3, 0x55);
    bytes[1 * 3 + 2] = 0x75;  // 01 11 01 01: field k = 2 of packed [1][2] -> dense row 1 + 2 * 2 = 5
    bytes[0]         = 0xff;  // four code-3 fields
    const auto r = check_hf_packed(tensor("w", StDType::u8, {2, 3}, bytes));
    EXPECT_EQ(r.n_invalid, 5);
    EXPECT_EQ(r.first_row, 0);
    EXPECT_EQ(r.first_col, 0);
    bytes[0]      = 0x55;
    const auto r2 = check_hf_packed(tensor("w", StDType::u8, {2, 3}, bytes));
    EXPECT_EQ(r2.n_invalid, 1);
    EXPECT_EQ(r2.first_row, 5);
    EXPECT_EQ(r2.first_col, 2);
}

TEST(HfTernary, WeightScaleSemantics) {
    const auto bytes = test::bf16_bytes({0.25f});
    const auto s     = tensor("x.weight_scale", StDType::bf16, {1}, bytes);
    EXPECT_EQ(hf_packed_scale(s, LinearClass::autobitlinear), 0.25f);  // multiplier
    EXPECT_EQ(hf_packed_scale(s, LinearClass::bitlinear), 4.0f);       // divisor -> reciprocal
    for (float bad : {0.0f, -1.0f, INFINITY, NAN}) {
        const auto b = test::f32_bytes({bad});
        try {
            hf_packed_scale(tensor("y.weight_scale", StDType::f32, {}, b), LinearClass::autobitlinear);
            ADD_FAILURE() << bad;
        } catch (const Error & e) {
            EXPECT_NE(std::string(e.what()).find("y.weight_scale"), std::string::npos) << e.what();
        }
    }
}

TEST(HfTernary, AbsmeanRule) {
    // mean|W| = 1: s_w = 1 and ties at exactly ±0.5 round to the even 0; ±1.5 rounds to ±2 and clamps.
    const std::vector<float> w = {0.5f, -0.5f, 1.5f, -1.5f, 0.25f, -0.75f, 2.0f, 1.0f};
    const auto               bytes = test::f32_bytes(w);
    const StTensor           t     = tensor("m", StDType::f32, {2, 4}, bytes);
    const AbsmeanScale       s     = absmean_scale(t);
    EXPECT_EQ(s.s_w, 1.0f);
    EXPECT_EQ(s.scale, 1.0f);
    std::vector<int8_t> v(8);
    absmean_ternarize(t, s.s_w, v.data());
    EXPECT_EQ(v, (std::vector<int8_t>{0, 0, 1, -1, 0, -1, 1, 1}));
    // The shortcut equals clamp(nearbyint(x), -1, 1) across the interesting range, ties included.
    for (float x = -3.0f; x <= 3.0f; x += 0.125f) {
        EXPECT_EQ(absmean_ternary(x, 1.0f), static_cast<int8_t>(std::clamp(std::nearbyint(x), -1.0f, 1.0f))) << x;
    }
    EXPECT_EQ(absmean_ternary(std::nextafter(0.5f, 1.0f), 1.0f), 1);
    EXPECT_EQ(absmean_ternary(std::nextafter(-0.5f, -1.0f), 1.0f), -1);
}

TEST(HfTernary, AbsmeanScaleAndDeadRows) {
    // Rows of magnitude ~3 and one dead row (~1e-34): mean|W| is set by the live rows, the dead row is 0.
    std::vector<float> w;
    for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 4; ++c) w.push_back(r == 1 ? (c % 2 ? -1e-34f : 1e-34f) : (c % 2 ? -3.0f : 1.0f + c));
    }
    const auto         bytes = test::bf16_bytes(w);
    const StTensor     t     = tensor("m", StDType::bf16, {3, 4}, bytes);
    float              ref_scale = 0;
    std::vector<float> rounded;
    for (float x : w) rounded.push_back(test::bf16_round(x));
    const auto         ref = test::reference_absmean(rounded, ref_scale);
    const AbsmeanScale s   = absmean_scale(t);
    EXPECT_EQ(s.scale, ref_scale);
    EXPECT_EQ(s.s_w, 1.0f / std::max(static_cast<float>((1 + 3 + 3 + 3 + 1 + 3 + 3 + 3) * 1.0 / 12), 1e-5f));
    std::vector<int8_t> v(12);
    absmean_ternarize(t, s.s_w, v.data());
    EXPECT_EQ(v, ref);
    for (int c = 0; c < 4; ++c) EXPECT_EQ(v[static_cast<size_t>(4 + c)], 0);
    // All-zero tensor: s_w = 1e5 (the clamp), everything 0, scale 1e-5.
    const auto zeros = test::f32_bytes(std::vector<float>(8, 0.0f));
    EXPECT_EQ(absmean_scale(tensor("z", StDType::f32, {2, 4}, zeros)).s_w, 1.0f / 1e-5f);
}

TEST(HfTernary, AbsmeanRejectsNonFinite) {
    const auto bytes = test::f32_bytes({1.0f, 2.0f, NAN, 3.0f});
    try {
        absmean_scale(tensor("model.layers.3.mlp.up_proj.weight", StDType::f32, {2, 2}, bytes));
        ADD_FAILURE();
    } catch (const Error & e) {
        EXPECT_NE(std::string(e.what()).find("model.layers.3.mlp.up_proj.weight"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("[1, 0]"), std::string::npos) << e.what();
    }
}

TEST(HfTernary, PackersRoundTrip) {
    const int64_t       out = 3, in = 256;
    std::mt19937        rng(9);
    std::vector<int8_t> w(static_cast<size_t>(out * in));
    for (auto & x : w) x = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
    // I2_S: one scale at n/4, decoded values identical.
    std::vector<uint8_t> i2s(dtype_tensor_bytes(DType::i2_s, in, out * in));
    pack_ternary_tensor(DType::i2_s, w.data(), out, in, 2.1631613f, i2s);
    std::vector<int8_t> v(w.size());
    i2s_decode(i2s.data(), 0, out * in, v.data());
    EXPECT_EQ(v, w);
    EXPECT_EQ(i2s_tensor_scale(i2s, out * in), 2.1631613f);
    // TQ2_0 / TQ1_0: every block's d is the scale (fp16).
    for (DType type : {DType::tq2_0, DType::tq1_0}) {
        std::vector<uint8_t> q(dtype_tensor_bytes(type, in, out * in));
        pack_ternary_tensor(type, w.data(), out, in, 0.75f, q);
        for (int64_t b = 0; b < out; ++b) {
            float d = 0;
            if (type == DType::tq2_0) {
                tq2_0_decode_block(q.data() + 66 * b, v.data() + 256 * b, d);
            } else {
                tq1_0_decode_block(q.data() + 54 * b, v.data() + 256 * b, d);
            }
            EXPECT_EQ(d, 0.75f);
        }
        EXPECT_EQ(v, w) << dtype_name(type);
    }
}

}  // namespace
}  // namespace tern
