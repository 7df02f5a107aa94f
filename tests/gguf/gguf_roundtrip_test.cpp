// GGUF writer -> reader round trips: every metadata type (scalars and arrays of each element type,
// empty strings and arrays, 64-bit extremes), custom alignment, tensors of every DType with the byte
// sizes of FORMATS.md §2.1, vocab-only files, and a multi-megabyte file through write_file + mmap.
// Sizes and layouts are checked against the spec formulas in gguf_test_util.h, not against the
// writer's own arithmetic.
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

#include "core/error.h"
#include "gguf_test_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

namespace tern {
namespace {

using test::pad;
using test::put;
using test::put_str;

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

// The writer's bytes must be exactly the layout of §1.1, byte for byte, as the test encoder makes it.
TEST(GgufRoundTrip, WriterBytesMatchTheSpecLayout) {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.block_count", 2);
    w.set_string_array("tokenizer.ggml.tokens", {"x", ""});
    std::vector<uint8_t> a(18 * 2), b(4 * 5);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(1 + 7 * i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(2 + 7 * i);
    w.add_tensor("a", DType::q4_0, {64}, a);
    w.add_tensor("b", DType::f32, {5}, b);

    test::RawFile r;
    r.kvs.push_back(test::kv_str("general.architecture", "llama"));
    r.kvs.push_back(test::kv_u32("llama.block_count", 2));
    r.kvs.push_back(test::kv_str_array("tokenizer.ggml.tokens", {"x", ""}));
    r.tensors.push_back({"a", {64}, 2, {}, {}, 1});
    r.tensors.push_back({"b", {5}, 0, {}, {}, 2});
    EXPECT_EQ(w.to_bytes(), r.build());
}

// Encodes `count` elements of a fixed-size type whose element i has the little-endian value i*k+c.
template <typename T>
std::vector<uint8_t> enc_seq(size_t count, T first, T step) {
    std::vector<uint8_t> out;
    for (size_t i = 0; i < count; ++i) put<T>(out, static_cast<T>(first + static_cast<T>(i) * step));
    return out;
}

TEST(GgufRoundTrip, EveryScalarType) {
    GgufWriter w;
    auto raw = [&](const std::string & key, GgufType t, auto v) {
        std::vector<uint8_t> e;
        put(e, v);
        w.set_raw(key, t, e);
    };
    raw("t.u8", GgufType::u8, uint8_t{255});
    raw("t.i8", GgufType::i8, int8_t{-128});
    raw("t.u16", GgufType::u16, uint16_t{65535});
    raw("t.i16", GgufType::i16, int16_t{-32768});
    w.set_u32("t.u32", 4294967295u);
    w.set_i32("t.i32", std::numeric_limits<int32_t>::min());
    w.set_f32("t.f32", -1.5f);
    w.set_bool("t.bool0", false);
    w.set_bool("t.bool1", true);
    w.set_string("t.str", "héllo");
    w.set_string("t.empty", "");
    w.set_u64("t.u64max", std::numeric_limits<uint64_t>::max());
    w.set_u64("t.u64big", uint64_t{1} << 62);
    raw("t.i64min", GgufType::i64, std::numeric_limits<int64_t>::min());
    raw("t.i64max", GgufType::i64, std::numeric_limits<int64_t>::max());
    w.set_f64("t.f64", 1e300);
    w.set_u8("t.u8b", 7);

    const GgufFile f = GgufFile::from_bytes(w.to_bytes());
    EXPECT_EQ(f.kvs().size(), 17u);
    EXPECT_EQ(f.tensors().size(), 0u);
    EXPECT_EQ(f.get_int("t.u8"), 255);
    EXPECT_EQ(f.get_int("t.i8"), -128);
    EXPECT_EQ(f.get_int("t.u16"), 65535);
    EXPECT_EQ(f.get_int("t.i16"), -32768);
    EXPECT_EQ(f.get_int("t.u32"), 4294967295LL);
    EXPECT_EQ(f.get_int("t.i32"), std::numeric_limits<int32_t>::min());
    EXPECT_EQ(f.get_float("t.f32"), -1.5);
    EXPECT_EQ(f.get_bool("t.bool0"), false);
    EXPECT_EQ(f.get_bool("t.bool1"), true);
    EXPECT_EQ(f.get_string("t.str"), "héllo");
    EXPECT_EQ(f.get_string("t.empty"), "");
    EXPECT_EQ(f.get_int("t.u64big"), int64_t{1} << 62);
    EXPECT_EQ(f.get_int("t.i64min"), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(f.get_int("t.i64max"), std::numeric_limits<int64_t>::max());
    EXPECT_EQ(f.get_float("t.f64"), 1e300);
    EXPECT_EQ(f.get_int("t.u8b"), 7);
    EXPECT_EQ(f.find("t.str")->value.type, GgufType::string);
    EXPECT_EQ(f.find("t.str")->value.n_bytes, 6u);
    EXPECT_EQ(f.find("t.u64max")->value.type, GgufType::u64);
    EXPECT_FALSE(f.get_int("absent").has_value());
    EXPECT_FALSE(f.get_string("absent").has_value());

    // A UINT64 above INT64_MAX cannot be returned as int64: a clear error, not a wrapped value.
    try {
        (void) f.get_int("t.u64max");
        FAIL() << "u64 max accepted as int64";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_model);
        EXPECT_NE(std::string(e.what()).find("t.u64max"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("18446744073709551615"), std::string::npos) << e.what();
    }
    // Wrong-type getters name the key, the type found and the type expected.
    try {
        (void) f.get_string("t.u32");
        FAIL();
    } catch (const Error & e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("t.u32"), std::string::npos) << m;
        EXPECT_NE(m.find("UINT32"), std::string::npos) << m;
        EXPECT_NE(m.find("STRING"), std::string::npos) << m;
    }
    EXPECT_THROW((void) f.get_float("t.i32"), Error);
    EXPECT_THROW((void) f.get_bool("t.u8"), Error);
    EXPECT_THROW((void) f.get_int("t.f32"), Error);
    EXPECT_EQ(GgufFile::describe(f.find("t.str")->value), "\"h\xc3\xa9llo\"");
    EXPECT_EQ(GgufFile::describe(f.find("t.i64min")->value), "-9223372036854775808");
    EXPECT_EQ(GgufFile::describe(f.find("t.bool1")->value), "true");
    // Found by gguf_fuzz: describe() threw for a UINT64 above INT64_MAX, a legal value.
    EXPECT_EQ(GgufFile::describe(f.find("t.u64max")->value), "18446744073709551615");
}

TEST(GgufRoundTrip, ArraysOfEveryElementType) {
    GgufWriter w;
    auto arr = [&](const std::string & key, GgufType elem, uint64_t count, const std::vector<uint8_t> & elems) {
        std::vector<uint8_t> e;
        put<uint32_t>(e, static_cast<uint32_t>(elem));
        put<uint64_t>(e, count);
        e.insert(e.end(), elems.begin(), elems.end());
        w.set_raw(key, GgufType::array, e);
    };
    arr("a.u8", GgufType::u8, 5, enc_seq<uint8_t>(5, 250, 1));
    arr("a.i8", GgufType::i8, 3, enc_seq<int8_t>(3, -128, 100));
    arr("a.u16", GgufType::u16, 2, enc_seq<uint16_t>(2, 65534, 1));
    arr("a.i16", GgufType::i16, 2, enc_seq<int16_t>(2, -32768, 1));
    arr("a.u32", GgufType::u32, 3, enc_seq<uint32_t>(3, 4294967293u, 1));
    arr("a.i32", GgufType::i32, 3, enc_seq<int32_t>(3, -1, 1));
    arr("a.u64", GgufType::u64, 2, enc_seq<uint64_t>(2, uint64_t{1} << 63, 0));
    arr("a.i64", GgufType::i64, 2, enc_seq<int64_t>(2, std::numeric_limits<int64_t>::min(), 1));
    arr("a.f64", GgufType::f64, 2, enc_seq<double>(2, 0.25, 0.5));
    arr("a.bool", GgufType::boolean, 4, {0, 1, 1, 0});
    w.set_f32_array("a.f32", {1.0f, -2.5f, 1e-30f});
    w.set_i32_array("a.i32w", {7, -7});
    w.set_string_array("a.str", {"", "x", "", "Ω"});
    w.set_string_array("a.str_empty", {});
    w.set_f32_array("a.f32_empty", {});
    arr("a.u8_empty", GgufType::u8, 0, {});
    arr("a.bool_empty", GgufType::boolean, 0, {});

    const GgufFile f = GgufFile::from_bytes(w.to_bytes());
    EXPECT_EQ(f.get_int_array("a.u8"), (std::vector<int64_t>{250, 251, 252, 253, 254}));
    EXPECT_EQ(f.get_int_array("a.i8"), (std::vector<int64_t>{-128, -28, 72}));
    EXPECT_EQ(f.get_int_array("a.u16"), (std::vector<int64_t>{65534, 65535}));
    EXPECT_EQ(f.get_int_array("a.i16"), (std::vector<int64_t>{-32768, -32767}));
    EXPECT_EQ(f.get_int_array("a.u32"), (std::vector<int64_t>{4294967293LL, 4294967294LL, 4294967295LL}));
    EXPECT_EQ(f.get_int_array("a.i32"), (std::vector<int64_t>{-1, 0, 1}));
    EXPECT_EQ(f.get_int_array("a.i64"),
              (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min() + 1}));
    EXPECT_EQ(f.get_int_array("a.i32w"), (std::vector<int64_t>{7, -7}));
    EXPECT_THROW((void) f.get_int_array("a.u64"), Error);  // 2^63 does not fit int64
    EXPECT_EQ(f.get_f32_array("a.f32"), (std::vector<float>{1.0f, -2.5f, 1e-30f}));
    EXPECT_EQ(f.get_string_array("a.str"), (std::vector<std::string_view>{"", "x", "", "Ω"}));
    EXPECT_EQ(f.get_string_array("a.str_empty")->size(), 0u);
    EXPECT_EQ(f.get_f32_array("a.f32_empty")->size(), 0u);
    EXPECT_EQ(f.get_int_array("a.u8_empty")->size(), 0u);

    // Raw views: element type, count and encoded byte size as §1.4 defines them.
    const struct {
        const char * key;
        GgufType     elem;
        uint64_t     count;
        size_t       n_bytes;
    } views[] = {
        {"a.u8", GgufType::u8, 5, 5},        {"a.i16", GgufType::i16, 2, 4},   {"a.u64", GgufType::u64, 2, 16},
        {"a.f64", GgufType::f64, 2, 16},     {"a.bool", GgufType::boolean, 4, 4},
        {"a.str", GgufType::string, 4, 4 * 8 + 1 + 2},                         {"a.bool_empty", GgufType::boolean, 0, 0},
    };
    for (const auto & v : views) {
        SCOPED_TRACE(v.key);
        const GgufKv * kv = f.find(v.key);
        ASSERT_NE(kv, nullptr);
        EXPECT_EQ(kv->value.type, GgufType::array);
        EXPECT_EQ(kv->value.elem_type, v.elem);
        EXPECT_EQ(kv->value.count, v.count);
        EXPECT_EQ(kv->value.n_bytes, v.n_bytes);
    }
    double f64[2];
    std::memcpy(f64, f.find("a.f64")->value.data, 16);
    EXPECT_EQ(f64[0], 0.25);
    EXPECT_EQ(f64[1], 0.75);
    const uint8_t * b = f.find("a.bool")->value.data;
    EXPECT_EQ((std::vector<uint8_t>(b, b + 4)), (std::vector<uint8_t>{0, 1, 1, 0}));

    // Wrong array element types are rejected by the typed getters, naming both types.
    try {
        (void) f.get_string_array("a.u8");
        FAIL();
    } catch (const Error & e) {
        EXPECT_NE(std::string(e.what()).find("ARRAY of UINT8"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void) f.get_f32_array("a.f64"), Error);
    EXPECT_THROW((void) f.get_int_array("a.f32"), Error);
    EXPECT_THROW((void) f.get_int("a.u8"), Error);
    EXPECT_EQ(GgufFile::describe(f.find("a.str")->value, 2), "[STRING x 4] [\"\", \"x\", ...]");
    EXPECT_EQ(GgufFile::describe(f.find("a.u8")->value), "[UINT8 x 5] [250, 251, 252, 253, 254]");
    EXPECT_EQ(GgufFile::describe(f.find("a.u8_empty")->value), "[UINT8 x 0] []");
    EXPECT_EQ(GgufFile::describe(f.find("a.u64")->value), "[UINT64 x 2] [9223372036854775808, 9223372036854775808]");
}

// One tensor of every type tern reads; sizes from §2.1 (and n/4 + 32 for I2_S), offsets by §1.6.
TEST(GgufRoundTrip, TensorsOfEveryTypeHaveSpecSizes) {
    struct Case {
        DType                type;
        uint32_t             id;
        std::vector<int64_t> ne;
        uint64_t             bytes;  // by hand from FORMATS.md §2.1
    };
    const std::vector<Case> cases = {
        {DType::f32, 0, {3, 5}, 3 * 5 * 4},
        {DType::f16, 1, {7, 3}, 7 * 3 * 2},
        {DType::q4_0, 2, {64, 3}, 2 * 18 * 3},
        {DType::q8_0, 8, {96}, 3 * 34},
        {DType::q4_k, 12, {512, 2}, 2 * 144 * 2},
        {DType::q6_k, 14, {256, 3}, 210 * 3},
        {DType::bf16, 30, {5, 1, 3}, 5 * 3 * 2},
        {DType::tq1_0, 34, {256, 3}, 54 * 3},
        {DType::tq2_0, 35, {512, 1, 1, 3}, 2 * 66 * 3},
        {DType::i2_s, 36, {256, 3}, 256 * 3 / 4 + 32},
        {DType::q1_0, 41, {128, 3}, 18 * 3},
        {DType::q2_0, 42, {64 * 3, 5}, 3 * 18 * 5},
        {DType::pq2_0, 142, {256, 3}, 2 * 34 * 3},
    };
    GgufWriter w;
    std::vector<std::vector<uint8_t>> payloads;
    for (size_t i = 0; i < cases.size(); ++i) {
        std::vector<uint8_t> p(cases[i].bytes);
        for (size_t j = 0; j < p.size(); ++j) p[j] = static_cast<uint8_t>(i * 31 + j * 7);
        payloads.push_back(p);
        w.add_tensor("t." + std::string(dtype_name(cases[i].type)), cases[i].type, cases[i].ne, p);
    }
    const auto     bytes = w.to_bytes();
    const GgufFile f     = GgufFile::from_bytes(bytes);
    ASSERT_EQ(f.tensors().size(), cases.size());
    EXPECT_EQ(f.data_offset() % 32, 0u);
    uint64_t expected_offset = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const auto & c = cases[i];
        const auto & t = f.tensors()[i];
        SCOPED_TRACE(std::string(dtype_name(c.type)));
        EXPECT_EQ(t.name, "t." + std::string(dtype_name(c.type)));
        EXPECT_EQ(t.type, c.type);
        EXPECT_EQ(static_cast<uint32_t>(t.type), c.id);
        EXPECT_EQ(t.n_dims, c.ne.size());
        int64_t n = 1;
        for (size_t d = 0; d < 4; ++d) {
            const int64_t want = d < c.ne.size() ? c.ne[d] : 1;
            EXPECT_EQ(t.ne[d], want);
            n *= want;
        }
        EXPECT_EQ(t.n_elements, n);
        EXPECT_EQ(t.rows(), n / c.ne[0]);
        EXPECT_EQ(t.n_bytes, c.bytes);
        EXPECT_EQ(test::spec_tensor_bytes(c.id, c.ne), c.bytes);
        EXPECT_EQ(dtype_tensor_bytes(c.type, c.ne[0], n), c.bytes);
        EXPECT_EQ(t.offset, expected_offset);
        expected_offset += pad(c.bytes, 32);
        const auto d = f.tensor_data(t);
        ASSERT_EQ(d.size(), c.bytes);
        EXPECT_TRUE(std::equal(d.begin(), d.end(), payloads[i].begin()));
    }
    EXPECT_EQ(f.file_size(), f.data_offset() + expected_offset);  // the last tensor is padded too
}

TEST(GgufRoundTrip, CustomAlignment64) {
    GgufWriter w;
    w.set_alignment(64);
    w.add_tensor("a", DType::f32, {3}, std::vector<uint8_t>(12, 1));
    w.add_tensor("b", DType::q8_0, {32}, std::vector<uint8_t>(34, 2));
    w.add_tensor("c", DType::f16, {1}, std::vector<uint8_t>(2, 3));
    const auto     bytes = w.to_bytes();
    const GgufFile f     = GgufFile::from_bytes(bytes);
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.get_int("general.alignment"), 64);
    EXPECT_EQ(f.find("general.alignment")->value.type, GgufType::u32);
    EXPECT_EQ(f.data_offset() % 64, 0u);
    EXPECT_EQ(f.tensors()[0].offset, 0u);
    EXPECT_EQ(f.tensors()[1].offset, 64u);
    EXPECT_EQ(f.tensors()[2].offset, 128u);
    EXPECT_EQ(bytes.size(), f.data_offset() + 192);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ((f.data_offset() + f.tensors()[i].offset) % 64, 0u);

    // The same file with the default alignment of 32 gives offsets 0, 32, 96.
    GgufWriter w32;
    w32.add_tensor("a", DType::f32, {3}, std::vector<uint8_t>(12, 1));
    w32.add_tensor("b", DType::q8_0, {32}, std::vector<uint8_t>(34, 2));
    w32.add_tensor("c", DType::f16, {1}, std::vector<uint8_t>(2, 3));
    const GgufFile g = GgufFile::from_bytes(w32.to_bytes());
    EXPECT_EQ(g.alignment(), 32u);
    EXPECT_EQ(g.tensors()[1].offset, 32u);
    EXPECT_EQ(g.tensors()[2].offset, 96u);
}

// general.alignment written through the plain u32 setter must still drive the layout.
TEST(GgufRoundTrip, AlignmentKeySetDirectlyIsHonoured) {
    GgufWriter w;
    w.set_u32("general.alignment", 128);
    w.add_tensor("a", DType::f32, {3}, std::vector<uint8_t>(12, 1));
    w.add_tensor("b", DType::f32, {3}, std::vector<uint8_t>(12, 2));
    const GgufFile f = GgufFile::from_bytes(w.to_bytes());
    EXPECT_EQ(f.alignment(), 128u);
    EXPECT_EQ(f.tensors()[1].offset, 128u);
}

TEST(GgufRoundTrip, VocabOnlyFileHasNoPadding) {
    GgufWriter w;
    w.set_string("general.architecture", "phi3");
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    const auto bytes = w.to_bytes();
    // 24 header + (8+20+4+8+4) + (8+21+4+4+8 + 3*8 + 5+3+4) = 24 + 44 + 81
    EXPECT_EQ(bytes.size(), 24u + 44u + 81u);
    const GgufFile f = GgufFile::from_bytes(bytes);
    EXPECT_EQ(f.tensors().size(), 0u);
    EXPECT_EQ(f.data_offset(), bytes.size());  // no padding with zero tensors (§1.6)
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->at(2), "</s>");

    // A file with nothing at all is the 24-byte header.
    const auto empty = GgufWriter().to_bytes();
    EXPECT_EQ(empty.size(), 24u);
    const GgufFile e = GgufFile::from_bytes(empty);
    EXPECT_EQ(e.kvs().size(), 0u);
    EXPECT_EQ(e.data_offset(), 24u);
}

// A few megabytes through write_file (streamed, lazily filled) and GgufFile::open (mmap).
TEST(GgufRoundTrip, LargeFileThroughWriteFileAndMmap) {
    const auto dir  = test::temp_dir("gguf-large");
    const auto path = (dir / "large.gguf").string();
    GgufWriter w;
    w.set_string("general.architecture", "bitnet-b1.58");
    w.set_alignment(64);
    const int64_t k = 2560, rows = 640;
    w.add_tensor("blk.0.attn_k.weight", DType::i2_s, {k, rows}, [&](std::span<uint8_t> dst) {
        for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    });
    w.add_tensor("token_embd.weight", DType::f16, {k, 500}, [&](std::span<uint8_t> dst) {
        for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<uint8_t>(i ^ (i >> 8));
    });
    std::vector<uint8_t> small(54 * 10 * 3);
    for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<uint8_t>(i * 13);
    w.add_tensor("blk.0.ffn_down.weight", DType::tq1_0, {2560, 3}, small);
    w.write_file(path);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.path(), path);
    EXPECT_EQ(f.alignment(), 64u);
    ASSERT_EQ(f.tensors().size(), 3u);
    const auto & a = f.tensors()[0];
    EXPECT_EQ(a.n_bytes, static_cast<size_t>(k * rows / 4 + 32));  // 409,632: the 2B4T attn_k size (§8.1)
    EXPECT_EQ(a.n_bytes, 409632u);
    const auto & b = f.tensors()[1];
    EXPECT_EQ(b.offset, pad(409632, 64));
    EXPECT_EQ(b.n_bytes, static_cast<size_t>(k * 500 * 2));
    const auto & c = f.tensors()[2];
    EXPECT_EQ(c.offset, b.offset + pad(b.n_bytes, 64));
    EXPECT_EQ(f.file_size(), std::filesystem::file_size(path));
    EXPECT_EQ(f.file_size(), f.data_offset() + c.offset + pad(c.n_bytes, 64));

    const auto da = f.tensor_data(a);
    for (size_t i = 0; i < da.size(); i += 4099) ASSERT_EQ(da[i], static_cast<uint8_t>(i * 2654435761u >> 13)) << i;
    EXPECT_EQ(da[da.size() - 1], static_cast<uint8_t>((da.size() - 1) * 2654435761u >> 13));
    const auto db = f.tensor_data(b);
    for (size_t i = 0; i < db.size(); i += 997) ASSERT_EQ(db[i], static_cast<uint8_t>(i ^ (i >> 8))) << i;
    const auto dc = f.tensor_data(c);
    EXPECT_TRUE(std::equal(dc.begin(), dc.end(), small.begin()));
    // Padding after each payload is zero.
    const uint8_t * base = f.tensor_data(a).data() - a.offset;
    for (uint64_t i = a.n_bytes; i < b.offset; ++i) ASSERT_EQ(base[i], 0) << i;

    // The mmap path and the in-memory path agree on everything.
    const auto     raw = std::vector<uint8_t>(base - f.data_offset(), base - f.data_offset() + f.file_size());
    const GgufFile g   = GgufFile::from_bytes(raw);
    EXPECT_EQ(g.data_offset(), f.data_offset());
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(g.tensors()[i].offset, f.tensors()[i].offset);
        EXPECT_EQ(g.tensors()[i].n_bytes, f.tensors()[i].n_bytes);
    }
    std::filesystem::remove_all(dir);
}

// A Fill callback that throws: the error propagates, the temp file is closed and removed, and no
// half-written file appears under the final name.
TEST(GgufRoundTrip, WriteFileCleansUpWhenAFillThrows) {
    const auto dir  = test::temp_dir("gguf-throw");
    const auto path = (dir / "out.gguf").string();
    GgufWriter w;
    w.add_tensor("a", DType::f32, {4}, std::vector<uint8_t>(16, 1));
    w.add_tensor("b", DType::f32, {4}, [](std::span<uint8_t>) { fail(ErrorKind::io, "source went away"); });
    EXPECT_THROW(w.write_file(path), Error);
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    std::filesystem::remove_all(dir);
}

TEST(GgufRoundTrip, OpenReportsIoErrorsWithThePath) {
    const auto dir = test::temp_dir("gguf-io");
    try {
        (void) GgufFile::open((dir / "missing.gguf").string());
        FAIL() << "missing file opened";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::io);
        EXPECT_NE(std::string(e.what()).find("missing.gguf"), std::string::npos) << e.what();
    }
    try {
        (void) GgufFile::open(dir.string());  // a directory
        FAIL() << "directory opened";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::io);
    }
    const auto empty = (dir / "empty.gguf").string();
    { std::FILE * fp = std::fopen(empty.c_str(), "wb"); std::fclose(fp); }
    try {
        (void) GgufFile::open(empty);
        FAIL() << "empty file accepted";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_model);
        EXPECT_NE(std::string(e.what()).find("empty.gguf"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("0 bytes"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// `tern inspect` shows UTF-8 text as text and escapes what a terminal would act on.
TEST(GgufDescribe, KeepsUtf8EscapesControlAndInvalidBytes) {
    GgufWriter w;
    w.set_string("a", "Ġhello 東京");
    w.set_string("b", std::string("x\ny\x1b[31m\xff", 9));
    const auto     bytes = w.to_bytes();
    const GgufFile f     = GgufFile::from_bytes(bytes);
    EXPECT_EQ(GgufFile::describe(f.find("a")->value), "\"Ġhello 東京\"");
    EXPECT_EQ(GgufFile::describe(f.find("b")->value), "\"x\\x0ay\\x1b[31m\\xff\"");
}

}  // namespace
}  // namespace tern
