// The rule for non-finite weights: a NaN or an infinity in any weight (a plain value, a block
// scale, an i2_s tensor scale) makes the load fail with Error(invalid_model) naming the tensor,
// before a backend sees it, on the CPU backend and on WebGPU alike.
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/mmap.h"
#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "quant/finite_check.h"
#include "synth/synth.h"
#include "test_util.h"
#ifdef TERN_TEST_WEBGPU
#include "webgpu_test_util.h"
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

namespace tern {
namespace {

std::vector<uint8_t> synth_bytes(DType linear) {
    const auto   dir = test::temp_dir("nonfinite");
    SynthOptions o;
    o.shape       = "tiny";
    o.output_path = (dir / "m.gguf").string();
    o.linear_type = linear;
    o.progress    = false;
    write_synthetic_model(o);
    const std::string s = read_file_text(o.output_path, size_t{1} << 30);
    return {s.begin(), s.end()};
}

// A copy of `bytes` with `len` bytes at `offset` of tensor `name`'s data replaced.
std::vector<uint8_t> poke(std::vector<uint8_t> bytes, const std::string & name, size_t offset, const void * v, size_t len) {
    const GgufFile         f = GgufFile::from_bytes(bytes);
    const GgufTensorInfo * t = f.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    std::memcpy(bytes.data() + f.data_offset() + t->offset + offset, v, len);
    return bytes;
}

void expect_refused(const std::vector<uint8_t> & bytes, Backend & backend, const std::string & tensor,
                    const std::string & what) {
    const GgufFile f = GgufFile::from_bytes(bytes);
    try {
        auto model = BitnetModel::load(f, backend);
        ADD_FAILURE() << "loaded a model whose tensor " << tensor << " holds " << what;
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_model) << e.what();
        EXPECT_NE(std::string(e.what()).find("'" + tensor + "'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
}

void check_backend(Backend & backend) {
    const float    nan = std::numeric_limits<float>::quiet_NaN();
    const float    inf = std::numeric_limits<float>::infinity();
    const uint16_t h_inf = 0x7c00, h_nan = 0x7e00;
    const auto     i2s = synth_bytes(DType::i2_s);
    expect_refused(poke(i2s, "blk.0.attn_norm.weight", 4 * 3, &nan, 4), backend, "blk.0.attn_norm.weight", "NaN");
    expect_refused(poke(i2s, "blk.1.ffn_sub_norm.weight", 0, &inf, 4), backend, "blk.1.ffn_sub_norm.weight", "+infinity");
    expect_refused(poke(i2s, "token_embd.weight", 2 * 1000, &h_inf, 2), backend, "token_embd.weight", "+infinity");
    // i2_s: the f32 scale after the n/4 code bytes of a [256, 512] projection.
    expect_refused(poke(i2s, "blk.0.ffn_gate.weight", 256 * 512 / 4, &nan, 4), backend, "blk.0.ffn_gate.weight", "NaN");
    // tq2_0: fp16 d at the end of the second 66-byte block.
    const auto tq2 = synth_bytes(DType::tq2_0);
    expect_refused(poke(tq2, "blk.0.attn_q.weight", 66 + 64, &h_nan, 2), backend, "blk.0.attn_q.weight", "block scale");
    // The untouched file loads.
    const GgufFile f = GgufFile::from_bytes(i2s);
    EXPECT_NO_THROW(BitnetModel::load(f, backend));
}

TEST(NonFiniteWeights, AreRefusedAtLoadOnTheCpu) {
    auto be = make_cpu_backend({1});
    check_backend(*be);
}

TEST(NonFiniteWeights, AreRefusedAtLoadOnWebGpu) {
#ifdef TERN_TEST_WEBGPU
    TERN_REQUIRE_WEBGPU();
    check_backend(*test::shared_webgpu().backend);
#else
    GTEST_SKIP() << "built without the WebGPU backend";
#endif
}

// Finite but huge norm weights are accepted; the activations then overflow to inf and NaN inside the
// forward pass, where the int8 quantizer maps NaN to 0 (converting it would be undefined: UBSan
// reports it in the sanitizer build). The run must finish without a crash.
TEST(NonFiniteWeights, ActivationsThatOverflowAreDefined) {
    const float big = 3e38f;
    auto        bytes = synth_bytes(DType::i2_s);
    for (int i = 0; i < 256; ++i) bytes = poke(bytes, "blk.0.attn_norm.weight", 4 * i, &big, 4);
    const GgufFile f  = GgufFile::from_bytes(bytes);
    auto           be = make_cpu_backend({1});
    auto           m  = BitnetModel::load(f, *be);
    SessionOptions so;
    so.n_ctx = 8;
    Session s(*m, so);
    const int32_t ids[3] = {1, 2, 3};
    EXPECT_NO_THROW(s.eval(ids));
    EXPECT_EQ(s.logits().size(), static_cast<size_t>(m->config().n_vocab));
}

TEST(FindNonFinite, FindsValuesAndScalesOfEveryType) {
    // f32 / f16 / bf16 values.
    float f32[4] = {1, 2, std::numeric_limits<float>::infinity(), 4};
    auto  r      = find_non_finite(DType::f32, {reinterpret_cast<const uint8_t *>(f32), 16}, 4);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->element, 2);
    EXPECT_FALSE(r->in_scale);
    const uint16_t f16[3] = {0x3c00, 0x7c01, 0x3c00};  // 1, NaN, 1
    r                     = find_non_finite(DType::f16, {reinterpret_cast<const uint8_t *>(f16), 6}, 3);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->element, 1);
    const uint16_t bf16[2] = {0x3f80, 0xff80};  // 1, -inf
    r                      = find_non_finite(DType::bf16, {reinterpret_cast<const uint8_t *>(bf16), 4}, 2);
    ASSERT_TRUE(r);
    EXPECT_LT(r->value, 0);
    // Quantized blocks: only the scale positions count (codes may hold any bits).
    struct Case {
        DType  type;
        size_t block_bytes, scale_offset;
        int    block_elems;
    };
    for (const Case c : {Case{DType::q4_0, 18, 0, 32}, Case{DType::q8_0, 34, 0, 32}, Case{DType::q4_k, 144, 2, 256},
                         Case{DType::q6_k, 210, 208, 256}, Case{DType::tq1_0, 54, 52, 256}, Case{DType::tq2_0, 66, 64, 256},
                         Case{DType::q1_0, 18, 0, 128}, Case{DType::q2_0, 18, 0, 64}, Case{DType::pq2_0, 34, 0, 128}}) {
        std::vector<uint8_t> blocks(3 * c.block_bytes, 0xff);  // codes all ones (no scale there)
        for (int b = 0; b < 3; ++b) {
            blocks[b * c.block_bytes + c.scale_offset]     = 0x00;  // scale 1.0
            blocks[b * c.block_bytes + c.scale_offset + 1] = 0x3c;
            if (c.type == DType::q4_k) blocks[b * c.block_bytes] = 0, blocks[b * c.block_bytes + 1] = 0x3c;
        }
        EXPECT_FALSE(find_non_finite(c.type, blocks, 3 * c.block_elems)) << dtype_name(c.type);
        blocks[2 * c.block_bytes + c.scale_offset + 1] = 0x7c;  // third block's scale: +inf
        r = find_non_finite(c.type, blocks, 3 * c.block_elems);
        ASSERT_TRUE(r) << dtype_name(c.type);
        EXPECT_EQ(r->element, 2 * c.block_elems) << dtype_name(c.type);
        EXPECT_TRUE(r->in_scale);
    }
}

}  // namespace
// Long tensors are tested a chunk at a time before the first bad element is searched for: the
// first one is still the one reported, at a chunk's first and last element, past the last whole
// chunk, and where a later chunk holds one too; a tensor with none reports none.
TEST(FindNonFinite, FindsTheFirstOfLongTensors) {
    const int64_t n = 3 * 4096 + 77;
    for (const int64_t at : {int64_t{0}, int64_t{4095}, int64_t{4096}, int64_t{8191}, n - 1}) {
        SCOPED_TRACE(at);
        std::vector<uint16_t> f16(static_cast<size_t>(n), 0x3c00);
        std::vector<uint16_t> bf16(static_cast<size_t>(n), 0x3f80);
        std::vector<float>    f32(static_cast<size_t>(n), 1.0f);
        const auto bytes = [](const auto & v) {
            return std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(v.data()), v.size() * sizeof(v[0]));
        };
        EXPECT_FALSE(find_non_finite(DType::f16, bytes(f16), n));
        EXPECT_FALSE(find_non_finite(DType::bf16, bytes(bf16), n));
        EXPECT_FALSE(find_non_finite(DType::f32, bytes(f32), n));
        f16[static_cast<size_t>(at)] = 0xfc00;  // -inf
        bf16[static_cast<size_t>(at)] = 0x7fc1;  // NaN
        f32[static_cast<size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
        if (at + 5 < n) f16[static_cast<size_t>(at + 5)] = 0x7c00, bf16[static_cast<size_t>(at + 5)] = 0x7f80;
        f32[static_cast<size_t>(n - 1)] = std::numeric_limits<float>::infinity();  // (after `at`, or it)
        const auto a = find_non_finite(DType::f16, bytes(f16), n);
        const auto b = find_non_finite(DType::bf16, bytes(bf16), n);
        const auto c = find_non_finite(DType::f32, bytes(f32), n);
        ASSERT_TRUE(a && b && c);
        EXPECT_EQ(a->element, at);
        EXPECT_LT(a->value, 0);
        EXPECT_EQ(b->element, at);
        EXPECT_TRUE(std::isnan(b->value));
        EXPECT_EQ(c->element, at);
    }
}

}  // namespace tern
