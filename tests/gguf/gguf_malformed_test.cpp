// Malformed-file corpus for the strict reader (FORMATS.md §1.9 checklist, STYLE.md §2.8 pattern 6).
// Every case starts from a valid file built by gguf_test_util.h and corrupts one field. Each must
// throw tern::Error(invalid_model) whose message names the key or tensor and the offending value,
// and never crash (the suite also runs under ASan/UBSan).
#include "gguf/gguf_reader.h"

#include "core/error.h"
#include "gguf_test_util.h"

#include <gtest/gtest.h>

#include <limits>

namespace tern {
namespace {

using test::kv_array;
using test::kv_scalar;
using test::kv_str;
using test::kv_u32;
using test::peek;
using test::poke;
using test::RawFile;
using test::RawKv;
using test::RawTensor;

constexpr uint64_t k_u64_max = std::numeric_limits<uint64_t>::max();

std::string rejection(const std::vector<uint8_t> & bytes, const GgufReadOptions & options = {}) {
    try {
        (void) GgufFile::from_bytes(bytes, "bad.gguf", options);
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_model) << e.what();
        EXPECT_NE(std::string(e.what()).find("bad.gguf"), std::string::npos) << e.what();  // the file is named
        return e.what();
    }
    ADD_FAILURE() << "file accepted";
    return {};
}

#define EXPECT_REJECTED(bytes, ...)                                                                      \
    do {                                                                                                 \
        const std::string msg_ = rejection(bytes);                                                       \
        for (const std::string & part_ : std::initializer_list<std::string>{__VA_ARGS__}) {              \
            EXPECT_NE(msg_.find(part_), std::string::npos) << "'" << part_ << "' missing from: " << msg_; \
        }                                                                                                \
    } while (0)

RawFile one_tensor(RawTensor t, std::vector<RawKv> kvs = {}) {
    RawFile r;
    r.kvs = std::move(kvs);
    r.tensors.push_back(std::move(t));
    return r;
}

// ------------------------------------------------------------------------------ truncation

// Every prefix shorter than the end of the last tensor's payload is rejected; prefixes that only
// lose (some of) the trailing padding are valid (§1.9 check 19).
TEST(GgufMalformed, TruncationAtEveryByteOffset) {
    for (bool pad_last : {true, false}) {
        RawFile r  = test::small_valid_file();
        r.pad_last = pad_last;
        const auto full = r.build();
        ASSERT_NO_THROW((void) GgufFile::from_bytes(full));
        for (size_t n = 0; n <= full.size(); ++n) {
            const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
            if (n >= r.layout.data_end) {
                EXPECT_NO_THROW((void) GgufFile::from_bytes(prefix)) << n;
                continue;
            }
            try {
                (void) GgufFile::from_bytes(prefix, "cut.gguf");
                ADD_FAILURE() << "prefix of " << n << " bytes accepted";
            } catch (const Error & e) {
                ASSERT_EQ(e.kind(), ErrorKind::invalid_model) << n;
                const std::string m = e.what();
                const bool        says_why = m.find("truncated") != std::string::npos ||
                                      m.find("exceeds") != std::string::npos ||
                                      m.find("cannot fit") != std::string::npos ||
                                      m.find("left in the file") != std::string::npos ||
                                      m.find("outside the data section") != std::string::npos ||
                                      m.find("smaller than the 24-byte") != std::string::npos;
                EXPECT_TRUE(says_why) << n << ": " << m;
            }
        }
    }
}

// ------------------------------------------------------------------------------ header

TEST(GgufMalformed, BadMagic) {
    for (const char * magic : {"GGUG", "FUGG", "ggml", "\x7f" "ELF"}) {
        RawFile r = test::small_valid_file();
        r.magic   = magic;
        EXPECT_REJECTED(r.build(), "magic", "GGUF");
    }
    auto bytes = test::small_valid_file().build();
    bytes[0]   = 0;
    EXPECT_REJECTED(bytes, "magic is '\\x00GUF'");
}

TEST(GgufMalformed, Versions) {
    const struct {
        uint32_t     version;
        const char * part;
    } cases[] = {
        {0, "version 0"}, {1, "version 1"}, {4, "version 4"}, {0xffffffffu, "version 4294967295"},
        {0x03000000u, "byte-swapped"}, {0x02000000u, "byte-swapped"},
    };
    for (const auto & c : cases) {
        SCOPED_TRACE(c.version);
        RawFile r = test::small_valid_file();
        r.version = c.version;
        EXPECT_REJECTED(r.build(), c.part);
    }
    RawFile v2 = test::small_valid_file();  // v2 has the v3 layout and is accepted (§1.3)
    v2.version = 2;
    EXPECT_EQ(GgufFile::from_bytes(v2.build()).version(), 2u);
}

TEST(GgufMalformed, HugeCounts) {
    for (uint64_t n : {k_u64_max, uint64_t{1} << 63, uint64_t{1} << 40, uint64_t{1000}}) {
        SCOPED_TRACE(n);
        RawFile r   = test::small_valid_file();
        r.n_tensors = n;
        EXPECT_REJECTED(r.build(), "tensor count", std::to_string(n));
        RawFile k = test::small_valid_file();
        k.n_kv    = n;
        EXPECT_REJECTED(k.build(), "metadata count", std::to_string(n));
    }
    // Counts one larger than the file holds fail when the missing record is read.
    RawFile r   = test::small_valid_file();
    r.n_kv      = 5;
    EXPECT_NO_FATAL_FAILURE(rejection(r.build()));
    RawFile t   = test::small_valid_file();
    t.n_tensors = 4;
    EXPECT_NO_FATAL_FAILURE(rejection(t.build()));
}

// ------------------------------------------------------------------------------ metadata

TEST(GgufMalformed, HugeStringLengths) {
    for (uint64_t len : {k_u64_max, uint64_t{1} << 63, uint64_t{1} << 32}) {
        SCOPED_TRACE(len);
        {   // key length of pair 1
            RawFile r  = test::small_valid_file();
            auto    b  = r.build();
            poke<uint64_t>(b, r.layout.kv_pos[1], len);
            EXPECT_REJECTED(b, "metadata key #1", "string length " + std::to_string(len));
        }
        {   // string value: general.architecture = "bitnet-b1.58"
            RawFile r = test::small_valid_file();
            auto    b = r.build();
            poke<uint64_t>(b, r.layout.kv_pos[0] + 8 + 20 + 4, len);
            EXPECT_REJECTED(b, "general.architecture", std::to_string(len));
        }
        {   // element 2 of tokenizer.ggml.tokens: "a", "", "bc"
            RawFile r = test::small_valid_file();
            auto    b = r.build();
            poke<uint64_t>(b, r.layout.kv_pos[2] + 8 + 21 + 4 + 4 + 8 + 9 + 8, len);
            EXPECT_REJECTED(b, "tokenizer.ggml.tokens", "element 2", std::to_string(len));
        }
        {   // tensor name
            RawFile r = test::small_valid_file();
            auto    b = r.build();
            poke<uint64_t>(b, r.layout.info_pos[1], len);
            EXPECT_REJECTED(b, "tensor #1 name", std::to_string(len));
        }
    }
    // A string that swallows the rest of the file exactly: the next field is then missing.
    RawFile r = test::small_valid_file();
    auto    b = r.build();
    poke<uint64_t>(b, r.layout.kv_pos[0] + 8 + 20 + 4, b.size() - (r.layout.kv_pos[0] + 8 + 20 + 4 + 8));
    EXPECT_NO_FATAL_FAILURE(rejection(b));
}

TEST(GgufMalformed, HugeArrayCounts) {
    // tokenizer.ggml.tokens (strings) and tokenizer.ggml.token_type (INT32).
    const size_t count_in_pair = 8 + 21 + 4 + 4;  // key length, "tokenizer.ggml.tokens", type, element type
    for (uint64_t count : {k_u64_max, uint64_t{1} << 62, (uint64_t{1} << 62) + 1, uint64_t{1} << 61, uint64_t{100000}}) {
        SCOPED_TRACE(count);
        {
            RawFile r = test::small_valid_file();
            auto    b = r.build();
            poke<uint64_t>(b, r.layout.kv_pos[2] + count_in_pair, count);
            EXPECT_REJECTED(b, "tokenizer.ggml.tokens", std::to_string(count));
        }
        {
            RawFile r = test::small_valid_file();
            auto    b = r.build();
            poke<uint64_t>(b, r.layout.kv_pos[3] + 8 + 25 + 4 + 4, count);
            EXPECT_REJECTED(b, "tokenizer.ggml.token_type", std::to_string(count), "INT32");
        }
    }
    // Every fixed-size element type: count * size must not wrap around.
    for (uint32_t elem : {test::T_U8, test::T_I16, test::T_U32, test::T_F32, test::T_BOOL, test::T_U64, test::T_F64}) {
        SCOPED_TRACE(elem);
        RawFile r;
        r.kvs.push_back(kv_array("x.arr", elem, k_u64_max / 2 + 1, {}));
        EXPECT_REJECTED(r.build(), "x.arr", std::to_string(k_u64_max / 2 + 1));
    }
}

TEST(GgufMalformed, InvalidValueTypes) {
    for (uint32_t type : {13u, 14u, 255u, 0xffffffffu}) {
        SCOPED_TRACE(type);
        RawFile r = test::small_valid_file();
        auto    b = r.build();
        poke<uint32_t>(b, r.layout.kv_pos[1] + 8 + 24, type);  // bitnet-b1.58.block_count
        EXPECT_REJECTED(b, "bitnet-b1.58.block_count", "value type " + std::to_string(type));
        RawFile a;
        a.kvs.push_back(kv_array("x.arr", type, 0, {}));
        EXPECT_REJECTED(a.build(), "x.arr", std::to_string(type));
    }
}

TEST(GgufMalformed, NestedArray) {
    std::vector<uint8_t> inner;
    test::put<uint32_t>(inner, test::T_U8);
    test::put<uint64_t>(inner, 1);
    inner.push_back(7);
    RawFile r;
    r.kvs.push_back(kv_array("x.nested", test::T_ARRAY, 1, inner));
    EXPECT_REJECTED(r.build(), "x.nested", "nested");
    RawFile e;  // even an empty one
    e.kvs.push_back(kv_array("x.nested", test::T_ARRAY, 0, {}));
    EXPECT_REJECTED(e.build(), "x.nested", "nested");
}

TEST(GgufMalformed, InvalidBoolByte) {
    for (uint8_t v : {uint8_t{2}, uint8_t{0x80}, uint8_t{0xff}}) {
        SCOPED_TRACE(v);
        RawFile r;
        r.kvs.push_back(kv_scalar("tokenizer.ggml.add_bos_token", test::T_BOOL, v));
        EXPECT_REJECTED(r.build(), "tokenizer.ggml.add_bos_token", "BOOL value is " + std::to_string(v));
        RawFile a;
        a.kvs.push_back(kv_array("x.flags", test::T_BOOL, 4, {0, 1, v, 0}));
        EXPECT_REJECTED(a.build(), "x.flags", "element 2", std::to_string(v));
    }
}

TEST(GgufMalformed, DuplicateKey) {
    RawFile r = test::small_valid_file();
    r.kvs.push_back(kv_u32("bitnet-b1.58.block_count", 3));
    EXPECT_REJECTED(r.build(), "duplicate", "bitnet-b1.58.block_count");
    RawFile s = test::small_valid_file();  // same key, different type
    s.kvs.push_back(kv_str("general.architecture", "llama"));
    EXPECT_REJECTED(s.build(), "duplicate", "general.architecture");
}

TEST(GgufMalformed, InvalidUtf8Key) {
    for (const std::string bad : {"gen\xff", "\xc0\xaf.key", "k.\xed\xa0\x80", "k.\xe2\x82", "k\x80", "\xf5\x80\x80\x80"}) {
        RawFile r;
        r.kvs.push_back(kv_u32(bad, 1));
        EXPECT_REJECTED(r.build(), "metadata key #0", "UTF-8");
    }
    RawFile ok;  // valid multi-byte keys are fine
    ok.kvs.push_back(kv_u32("ключ.ü.😀", 1));
    EXPECT_EQ(GgufFile::from_bytes(ok.build()).get_int("ключ.ü.😀"), 1);
    RawFile empty;
    empty.kvs.push_back(kv_u32("", 1));
    EXPECT_REJECTED(empty.build(), "metadata key #0", "empty");
}

TEST(GgufMalformed, Alignment) {
    auto with_alignment = [](RawKv kv) {
        RawFile r = test::small_valid_file();
        r.kvs.insert(r.kvs.begin(), std::move(kv));
        return r.build();
    };
    EXPECT_REJECTED(with_alignment(kv_scalar("general.alignment", test::T_U64, uint64_t{32})), "general.alignment", "UINT64",
                    "UINT32");
    EXPECT_REJECTED(with_alignment(kv_scalar("general.alignment", test::T_I32, int32_t{32})), "general.alignment", "INT32");
    EXPECT_REJECTED(with_alignment(kv_scalar("general.alignment", test::T_U16, uint16_t{32})), "general.alignment", "UINT16");
    EXPECT_REJECTED(with_alignment(kv_str("general.alignment", "32")), "general.alignment", "STRING");
    for (uint32_t a : {0u, 1u, 2u, 3u, 4u, 12u, 48u, 0x80000001u}) {
        SCOPED_TRACE(a);
        EXPECT_REJECTED(with_alignment(kv_u32("general.alignment", a)), "general.alignment", "is " + std::to_string(a));
    }
    // A valid but huge alignment pushes the data section past the end of the file.
    EXPECT_REJECTED(with_alignment(kv_u32("general.alignment", 0x80000000u)), "data section starts at offset 2147483648");
    // 8 and 16 are valid; the layout follows them.
    for (uint32_t a : {8u, 16u, 256u}) {
        RawFile r   = test::small_valid_file();
        r.alignment = a;
        r.kvs.insert(r.kvs.begin(), kv_u32("general.alignment", a));
        const GgufFile f = GgufFile::from_bytes(r.build());
        EXPECT_EQ(f.alignment(), a);
        EXPECT_EQ(f.data_offset(), r.layout.data_offset);
        EXPECT_EQ(f.tensors()[2].offset, r.layout.offsets[2]);
    }
    // A file laid out for 32 but declaring 64 has misaligned offsets.
    RawFile m = test::small_valid_file();
    m.kvs.insert(m.kvs.begin(), kv_u32("general.alignment", 64));
    EXPECT_REJECTED(m.build(), "output.weight", "offset 160", "alignment 64");
}

// ------------------------------------------------------------------------------ tensor infos

TEST(GgufMalformed, DuplicateTensorName) {
    RawFile r = test::small_valid_file();
    r.tensors.push_back({"token_embd.weight", {8}, 0, {}, {}, 9});
    EXPECT_REJECTED(r.build(), "duplicate", "token_embd.weight");
}

TEST(GgufMalformed, TensorNameLengths) {
    EXPECT_REJECTED(one_tensor({"", {8}, 0}).build(), "tensor #0", "empty name");
    const std::string n63(63, 'x'), n64(64, 'y');
    EXPECT_EQ(GgufFile::from_bytes(one_tensor({n63, {8}, 0}).build()).tensors()[0].name, n63);
    EXPECT_REJECTED(one_tensor({n64, {8}, 0}).build(), n64, "64 bytes", "63");
    EXPECT_REJECTED(one_tensor({std::string(1000, 'z'), {8}, 0}).build(), "1000 bytes");
}

TEST(GgufMalformed, NDims) {
    for (uint32_t n : {0u, 5u, 8u, 0xffffffffu}) {
        SCOPED_TRACE(n);
        RawFile r = test::small_valid_file();
        auto    b = r.build();
        poke<uint32_t>(b, r.layout.ndims_pos[1], n);
        EXPECT_REJECTED(b, "blk.0.attn_q.weight", "n_dims is " + std::to_string(n));
    }
    // Four dimensions are fine.
    const GgufFile f = GgufFile::from_bytes(one_tensor({"w4", {2, 3, 4, 5}, 0}).build());
    EXPECT_EQ(f.tensors()[0].n_elements, 120);
}

TEST(GgufMalformed, ZeroAndNegativeDimensions) {
    for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{-256}, std::numeric_limits<int64_t>::min()}) {
        for (size_t d = 0; d < 3; ++d) {
            SCOPED_TRACE(std::to_string(v) + " at " + std::to_string(d));
            std::vector<int64_t> ne{256, 2, 3};
            ne[d] = v;
            EXPECT_REJECTED(one_tensor({"blk.7.ffn_up.weight", ne, 0, {}, 16}).build(), "blk.7.ffn_up.weight",
                            "dimension " + std::to_string(d) + " is " + std::to_string(v));
        }
    }
}

TEST(GgufMalformed, ElementCountOverflow) {
    const int64_t big = int64_t{1} << 32;
    EXPECT_REJECTED(one_tensor({"e", {big, big}, 0, {}, 32}).build(), "tensor 'e'", "overflow");
    EXPECT_REJECTED(one_tensor({"e", {std::numeric_limits<int64_t>::max(), 2}, 0, {}, 32}).build(), "tensor 'e'", "overflow");
    EXPECT_REJECTED(one_tensor({"e", {2, 2, std::numeric_limits<int64_t>::max() / 4 + 1}, 0, {}, 32}).build(), "overflow");
    EXPECT_REJECTED(one_tensor({"e", {65536, 65536, 65536, 65536}, 0, {}, 32}).build(), "overflow");
    // The element count fits int64, but the byte size does not fit 64 bits.
    EXPECT_REJECTED(one_tensor({"b", {int64_t{1} << 31, int64_t{1} << 31}, 0, {}, 32}).build(), "tensor 'b'");
    EXPECT_REJECTED(one_tensor({"b", {int64_t{1} << 62}, 0, {}, 32}).build(), "tensor 'b'");
    // Fits in every way but is far larger than the file.
    EXPECT_REJECTED(one_tensor({"big", {int64_t{1} << 20, int64_t{1} << 20}, 1, {}, 32}).build(), "tensor 'big'", "outside");
}

TEST(GgufMalformed, RowLengthNotAMultipleOfTheBlockSize) {
    const struct {
        uint32_t     type;
        int64_t      ne0;
        const char * name;
        const char * qk;
    } cases[] = {
        {2, 33, "q4_0", "32"},     {8, 16, "q8_0", "32"},    {12, 128, "q4_k", "256"}, {14, 512 + 16, "q6_k", "256"},
        {34, 255, "tq1_0", "256"}, {35, 384, "tq2_0", "256"}, {41, 64, "q1_0", "128"},  {42, 96, "q2_0", "64"},
        {142, 64, "pq2_0", "128"},
    };
    for (const auto & c : cases) {
        SCOPED_TRACE(c.name);
        EXPECT_REJECTED(one_tensor({"blk.1.attn_v.weight", {c.ne0, 4}, c.type, {}, 4096}).build(), "blk.1.attn_v.weight",
                        c.name, "row length " + std::to_string(c.ne0), c.qk);
    }
}

TEST(GgufMalformed, I2sRowLengthNotAMultipleOf128) {
    // n = 256 is a multiple of 128, but the rows of 64 would split 128-element blocks (§1.9 check 14).
    EXPECT_REJECTED(one_tensor({"blk.0.attn_k.weight", {64, 4}, test::k_i2s}).build(), "blk.0.attn_k.weight", "i2_s", "64",
                    "128");
    EXPECT_REJECTED(one_tensor({"blk.0.attn_k.weight", {2560 + 32, 4}, test::k_i2s}).build(), "2592");
    EXPECT_NO_THROW((void) GgufFile::from_bytes(one_tensor({"ok", {128, 3}, test::k_i2s}).build()));
}

TEST(GgufMalformed, MisalignedOffset) {
    for (uint64_t off : {uint64_t{1}, uint64_t{8}, uint64_t{16}, uint64_t{31}}) {
        SCOPED_TRACE(off);
        RawFile r = one_tensor({"output_norm.weight", {8}, 0, off});
        EXPECT_REJECTED(r.build(), "output_norm.weight", "offset " + std::to_string(off), "alignment 32");
    }
    RawFile r = test::small_valid_file();
    auto    b = r.build();
    poke<uint64_t>(b, r.layout.offset_pos[2], r.layout.offsets[2] + 2);
    EXPECT_REJECTED(b, "output.weight", "not a multiple");
}

TEST(GgufMalformed, OffsetPastEndOfFile) {
    for (uint64_t off : {uint64_t{1} << 40, k_u64_max & ~uint64_t{31}, uint64_t{256}}) {
        SCOPED_TRACE(off);
        RawFile r = test::small_valid_file();
        auto    b = r.build();
        poke<uint64_t>(b, r.layout.offset_pos[2], off);
        EXPECT_REJECTED(b, "output.weight", std::to_string(off), "outside the data section");
    }
    // Payload starts inside the file but runs past its end.
    RawFile r = test::small_valid_file();
    auto    b = r.build();
    b.resize(r.layout.data_end - 1);
    EXPECT_REJECTED(b, "output.weight", "outside");
}

TEST(GgufMalformed, DataSectionStartsPastTheEnd) {
    RawFile r = test::small_valid_file();
    auto    b = r.build();
    ASSERT_LT(r.layout.dir_end, r.layout.data_offset);  // there is padding before the data
    b.resize(r.layout.dir_end + 1);
    EXPECT_REJECTED(b, "data section starts at offset " + std::to_string(r.layout.data_offset));
}

TEST(GgufMalformed, NonContiguousAndOverlappingOffsetsInStrictMode) {
    RawFile r = test::small_valid_file();
    auto    b = r.build();
    poke<uint64_t>(b, r.layout.offset_pos[1], 0);  // overlaps token_embd.weight
    EXPECT_REJECTED(b, "blk.0.attn_q.weight", "offset 0", "expected 64");
    RawFile g = test::small_valid_file();  // a gap of 32 bytes
    g.tensors[2].offset = 192;
    auto gb = g.build();
    EXPECT_REJECTED(gb, "output.weight", "offset 192", "expected 160");
    EXPECT_NO_THROW((void) GgufFile::from_bytes(gb, "lenient", GgufReadOptions{.strict_offsets = false}));
}

// Bytes after the last tensor's padding belong to no tensor and are not an error.
TEST(GgufMalformed, TrailingBytesAfterTheLastTensorAreIgnored) {
    RawFile r = test::small_valid_file();
    auto    b = r.build();
    b.insert(b.end(), 100, 0xAB);  // extra bytes after the last tensor: harmless
    EXPECT_NO_THROW((void) GgufFile::from_bytes(b));
}

}  // namespace
}  // namespace tern
