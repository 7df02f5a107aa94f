// Safetensors reader: well-formed files, each malformed-input rule (with the tensor or field named
// in the error), and mutated headers that must give tern::Error or parse, never crash.
#include "convert/safetensors.h"
#include "core/error.h"
#include "st_builder.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace tern {
namespace {

using test::build_safetensors;
using test::raw_safetensors;
using test::StEntry;

void expect_bad(const std::vector<uint8_t> & bytes, ErrorKind kind, const std::vector<std::string> & fragments) {
    try {
        SafetensorsFile::from_bytes(bytes, "t.safetensors");
        ADD_FAILURE() << "no error thrown";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        for (const auto & f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
}

std::vector<uint8_t> bytes_of(size_t n, uint8_t start = 0) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(start + i);
    return v;
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
    const auto bytes = build_safetensors(
        {
            {"w.packed", "U8", {2, 3}, bytes_of(6)},
            {"w.scale", "BF16", {1}, test::bf16_bytes({0.75f})},
            {"norm", "F32", {2}, test::f32_bytes({1.5f, -2.0f})},
            {"half", "F16", {2}, {0x00, 0x3c, 0x00, 0xc0}},
            {"i8", "I8", {4}, {0xff, 1, 2, 0x80}},
            {"scalar", "F32", {}, test::f32_bytes({3.0f})},
            {"empty", "F32", {0, 5}, {}},
        },
        {{"format", "pt"}});
    const auto f = SafetensorsFile::from_bytes(bytes);
    ASSERT_EQ(f.tensors().size(), 7u);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    const StTensor * p = f.find("w.packed");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->dtype, StDType::u8);
    EXPECT_EQ(p->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(p->n_elements, 6);
    EXPECT_EQ(p->shape_string(), "[2, 3]");
    EXPECT_EQ(std::vector<uint8_t>(p->data.begin(), p->data.end()), bytes_of(6));
    float v[2];
    st_read_f32(*f.find("w.scale"), 0, 1, v);
    EXPECT_EQ(v[0], 0.75f);
    st_read_f32(*f.find("norm"), 0, 2, v);
    EXPECT_EQ(v[0], 1.5f);
    EXPECT_EQ(v[1], -2.0f);
    st_read_f32(*f.find("half"), 0, 2, v);
    EXPECT_EQ(v[0], 1.0f);
    EXPECT_EQ(v[1], -2.0f);
    EXPECT_EQ(f.find("scalar")->n_elements, 1);
    EXPECT_EQ(f.find("empty")->n_elements, 0);
    EXPECT_EQ(f.find("i8")->dtype, StDType::i8);
    EXPECT_EQ(f.find("nope"), nullptr);
}

TEST(Safetensors, OpensFilesAndFolders) {
    const auto dir = test::temp_dir("st-open");
    test::write_bytes(dir / "model.safetensors", build_safetensors({{"a", "F32", {1}, test::f32_bytes({1.0f})}}));
    const auto f = SafetensorsFile::open((dir / "model.safetensors").string());
    EXPECT_NE(f.find("a"), nullptr);
    const auto ck = SafetensorsCheckpoint::open_dir(dir.string());
    EXPECT_EQ(ck.names(), std::vector<std::string>{"a"});
    // A single file with another name is found too.
    const auto dir2 = test::temp_dir("st-open2");
    test::write_bytes(dir2 / "weights.safetensors", build_safetensors({{"b", "U8", {1}, {7}}}));
    EXPECT_NE(SafetensorsCheckpoint::open_dir(dir2.string()).find("b"), nullptr);
    // Two files without an index are ambiguous.
    test::write_bytes(dir2 / "more.safetensors", build_safetensors({{"c", "U8", {1}, {7}}}));
    EXPECT_THROW(SafetensorsCheckpoint::open_dir(dir2.string()), Error);
    EXPECT_THROW(SafetensorsFile::open((dir / "missing.safetensors").string()), Error);
}

TEST(Safetensors, RejectsTruncatedFiles) {
    expect_bad({}, ErrorKind::invalid_model, {"t.safetensors", "0 bytes", "8-byte header length"});
    expect_bad({1, 0, 0}, ErrorKind::invalid_model, {"3 bytes"});
    auto good = build_safetensors({{"x", "F32", {4}, test::f32_bytes({1, 2, 3, 4})}});
    good.resize(good.size() - 4);  // data cut short
    expect_bad(good, ErrorKind::invalid_model, {"tensor 'x'", "run past the data region"});
}

TEST(Safetensors, RejectsHeaderLengthPastEof) {
    const std::string header = R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
    expect_bad(raw_safetensors(header, {1}, header.size() + 100), ErrorKind::invalid_model,
               {"header length", "past the end of the file"});
    expect_bad(raw_safetensors(header, {1}, UINT64_MAX - 3), ErrorKind::invalid_model, {"header length"});
}

TEST(Safetensors, RejectsOffsetsOutOfRange) {
    expect_bad(raw_safetensors(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", bytes_of(4)),
               ErrorKind::invalid_model, {"tensor 'x'", "[2, 6]", "4 bytes"});
    expect_bad(raw_safetensors(R"({"x":{"dtype":"U8","shape":[0],"data_offsets":[3,1]}})", bytes_of(4)),
               ErrorKind::invalid_model, {"tensor 'x'", "end before begin"});
    expect_bad(raw_safetensors(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", bytes_of(4)),
               ErrorKind::invalid_model, {"tensor 'x'", "data_offsets"});
    expect_bad(raw_safetensors(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", bytes_of(4)),
               ErrorKind::invalid_model, {"tensor 'x'", "data_offsets"});
    expect_bad(raw_safetensors(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1e3]}})", bytes_of(4)),
               ErrorKind::invalid_model, {"tensor 'x'", "data_offsets"});
}

TEST(Safetensors, RejectsShapeSizeMismatch) {
    expect_bad(raw_safetensors(R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,6]}})", bytes_of(8)),
               ErrorKind::invalid_model, {"tensor 'w'", "BF16 [2, 3] needs 12 bytes", "hold 6"});
    expect_bad(raw_safetensors(R"({"w":{"dtype":"U8","shape":[-2],"data_offsets":[0,2]}})", bytes_of(8)),
               ErrorKind::invalid_model, {"tensor 'w'", "shape"});
    expect_bad(raw_safetensors(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}})", bytes_of(8)),
               ErrorKind::invalid_model, {"tensor 'w'", "overflows"});
    expect_bad(raw_safetensors(R"({"w":{"dtype":"U8","shape":2,"data_offsets":[0,2]}})", bytes_of(8)),
               ErrorKind::invalid_model, {"tensor 'w'", "shape"});
}

TEST(Safetensors, RejectsOverlapDuplicatesAndBadFields) {
    expect_bad(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                               bytes_of(4)),
               ErrorKind::invalid_model, {"'a'", "'b'", "overlap"});
    expect_bad(raw_safetensors(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                               bytes_of(2)),
               ErrorKind::invalid_model, {"\"a\"", "twice"});
    expect_bad(raw_safetensors(R"({"a":{"shape":[1],"data_offsets":[0,1]}})", bytes_of(1)), ErrorKind::invalid_model,
               {"tensor 'a'", "dtype"});
    expect_bad(raw_safetensors(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", bytes_of(1)),
               ErrorKind::invalid_model, {"tensor 'a'", "unknown dtype 'Q4'"});
    expect_bad(raw_safetensors(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", bytes_of(8)),
               ErrorKind::unsupported, {"tensor 'a'", "F64"});
    expect_bad(raw_safetensors(R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,1]}})", bytes_of(1)),
               ErrorKind::invalid_model, {"tensor 'a'", "dtype"});
    expect_bad(raw_safetensors(R"({"a":[1,2]})", bytes_of(1)), ErrorKind::invalid_model, {"tensor 'a'", "object"});
    expect_bad(raw_safetensors(R"({"__metadata__":{"k":1}})", {}), ErrorKind::invalid_model, {"__metadata__", "'k'"});
    expect_bad(raw_safetensors(R"({"__metadata__":[]})", {}), ErrorKind::invalid_model, {"__metadata__"});
    expect_bad(raw_safetensors(R"([1,2,3])", {}), ErrorKind::invalid_model, {"header", "object"});
    expect_bad(raw_safetensors(R"({"a":)", {}), ErrorKind::invalid_model, {"header", "not valid JSON"});
    expect_bad(raw_safetensors("", {}), ErrorKind::invalid_model, {"not valid JSON"});
    expect_bad(raw_safetensors(std::string(100, '[') + std::string(100, ']'), {}), ErrorKind::invalid_model, {"nests deeper"});
}

TEST(Safetensors, ShardedIndex) {
    const auto dir = test::temp_dir("st-shards");
    test::write_bytes(dir / "s1.safetensors", build_safetensors({{"a", "U8", {1}, {1}}, {"b", "U8", {1}, {2}}}));
    test::write_bytes(dir / "s2.safetensors", build_safetensors({{"c", "U8", {1}, {3}}, {"extra", "U8", {1}, {4}}}));
    test::write_text(dir / "model.safetensors.index.json",
                     R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})");
    const auto ck = SafetensorsCheckpoint::open_dir(dir.string());
    EXPECT_EQ(ck.n_files(), 2u);
    EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b", "c"}));  // "extra" is not in the index
    EXPECT_EQ(ck.find("c")->data[0], 3);
    test::write_text(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"missing.safetensors"}})");
    EXPECT_THROW(SafetensorsCheckpoint::open_dir(dir.string()), Error);
    test::write_text(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","a":"s2.safetensors"}})");
    EXPECT_THROW(SafetensorsCheckpoint::open_dir(dir.string()), Error);
}

// A header of 200,000 small tensors: read one entry at a time (nlohmann's callback parser rescanned
// the root object after each entry: quadratic, minutes for this, and a DOM of >1 GB for 50 MB), and
// tensor names from the file are escaped in messages.
TEST(Safetensors, AHeaderOfManyTensorsAndHostileNames) {
    std::string header = "{";
    for (int i = 0; i < 200000; ++i) {
        header += (i ? "," : "") + ("\"t" + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}");
    }
    header += "}";
    const auto f = SafetensorsFile::from_bytes(raw_safetensors(header, {}));
    EXPECT_EQ(f.tensors().size(), 200000u);
    ASSERT_NE(f.find("t199999"), nullptr);
    expect_bad(raw_safetensors(R"({"\u001b[2J":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", bytes_of(1)),
               ErrorKind::invalid_model, {"tensor '\\x1b[2J'", "unknown dtype 'Q9'"});
    expect_bad(raw_safetensors(R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", bytes_of(1)),
               ErrorKind::invalid_model, {"tensor 'a'", "\"dtype\" appears twice"});
}

// Mutated headers and lengths: the reader must either accept the file or throw tern::Error; any
// other exception or a crash fails (ASan builds also catch out-of-bounds reads).
TEST(Safetensors, MutatedInputsNeverCrash) {
    const auto seed = build_safetensors(
        {
            {"model.layers.0.self_attn.q_proj.weight", "U8", {4, 8}, bytes_of(32)},
            {"model.layers.0.self_attn.q_proj.weight_scale", "BF16", {1}, test::bf16_bytes({0.5f})},
            {"model.norm.weight", "F32", {3}, test::f32_bytes({1, 2, 3})},
        },
        {{"format", "pt"}});
    std::mt19937_64 rng(12345);
    const std::string alphabet = "{}[]\":,0123456789-e.E+ truenullfalseU8BF16F32shapedtypedata_offsets\\u00";
    int accepted = 0, rejected = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        std::vector<uint8_t> b = seed;
        const int            n_mut = 1 + static_cast<int>(rng() % 4);
        for (int m = 0; m < n_mut; ++m) {
            if (b.size() <= 8) break;  // mutations below keep to an 8-byte length field plus something
            const size_t pos = rng() % b.size();
            switch (rng() % 6) {
                case 0: b[pos] = static_cast<uint8_t>(rng()); break;  // any byte, header or length or data
                case 1: b[8 + rng() % (b.size() - 8)] = static_cast<uint8_t>(alphabet[rng() % alphabet.size()]); break;
                case 2: b.resize(rng() % (b.size() + 1)); break;  // truncate
                case 3: b.insert(b.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<uint8_t>(alphabet[rng() % alphabet.size()])); break;
                case 4: b.erase(b.begin() + static_cast<std::ptrdiff_t>(8 + rng() % (b.size() - 8))); break;
                default: b[rng() % 8] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;  // header length bits
            }
        }
        try {
            const auto f = SafetensorsFile::from_bytes(b);
            for (const auto & t : f.tensors()) {  // whatever was accepted must be readable in bounds
                if (st_dtype_is_float(t.dtype) && t.n_elements > 0) {
                    std::vector<float> out(static_cast<size_t>(t.n_elements));
                    st_read_f32(t, 0, t.n_elements, out.data());
                }
                volatile uint8_t sink = 0;
                for (uint8_t x : t.data) sink = static_cast<uint8_t>(sink ^ x);
            }
            ++accepted;
        } catch (const Error &) {
            ++rejected;
        }
    }
    EXPECT_GT(rejected, 1000);
    EXPECT_GT(accepted, 0);  // some mutations (e.g. in the data region) keep the file valid
}

TEST(Safetensors, RandomBytesNeverCrash) {
    std::mt19937_64 rng(777);
    for (int iter = 0; iter < 2000; ++iter) {
        std::vector<uint8_t> b(rng() % 64);
        for (auto & x : b) x = static_cast<uint8_t>(rng());
        if (b.size() >= 8 && iter % 2 == 0) {  // plausible header lengths
            const uint64_t len = rng() % (b.size() - 7);
            for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<uint8_t>(len >> (8 * i));
        }
        try {
            SafetensorsFile::from_bytes(b);
        } catch (const Error &) {
        }
    }
}

}  // namespace
}  // namespace tern
