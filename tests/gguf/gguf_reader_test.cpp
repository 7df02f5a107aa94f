// GgufFile on real and hand-built files: the worked example of FORMATS.md §1.8 (the phi-3 vocab
// file), Q2_0 g64/g128 resolution (§2.3), lenient offsets (§1.9 checks 17-19), and the messages for
// type ids tern does not read (§2.2).
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

#include "core/error.h"
#include "core/mmap.h"
#include "gguf_test_util.h"
#include "quant/block_formats.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace tern {
namespace {

using test::RawFile;
using test::RawTensor;

std::string phi3_path() { return test::shared_data_path("llama-vocab/ggml-vocab-phi-3.gguf"); }

// Returns the error message; fails the test if bytes are accepted or the kind is wrong.
std::string rejection(const std::vector<uint8_t> & bytes, const GgufReadOptions & options = {}) {
    try {
        (void) GgufFile::from_bytes(bytes, "mem.gguf", options);
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_model) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "file accepted";
    return {};
}

void expect_rejected(const std::vector<uint8_t> & bytes, std::initializer_list<std::string> parts,
                     const GgufReadOptions & options = {}) {
    const std::string m = rejection(bytes, options);
    for (const auto & p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
}

// ------------------------------------------------------------------------------------ §1.8

TEST(GgufPhi3Vocab, WorkedExampleOfSection1_8) {
    if (!std::filesystem::exists(phi3_path())) GTEST_SKIP() << "missing " << phi3_path();
    const GgufFile f = GgufFile::open(phi3_path());
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.tensors().size(), 0u);
    ASSERT_EQ(f.kvs().size(), 26u);
    EXPECT_EQ(f.file_size(), 726019u);
    EXPECT_EQ(f.data_offset(), 726019u);  // zero tensors: the KV section ends the file

    const struct {
        size_t       pair;
        size_t       offset;
        const char * key;
    } table[] = {
        {0, 24, "general.architecture"},        {1, 68, "general.name"},
        {2, 104, "phi3.context_length"},        {15, 642, "tokenizer.ggml.tokens"},
        {16, 468795, "tokenizer.ggml.scores"},  {17, 597096, "tokenizer.ggml.token_type"},
        {25, 725975, "general.quantization_version"},
    };
    for (const auto & row : table) {
        SCOPED_TRACE(row.key);
        EXPECT_EQ(f.kvs()[row.pair].file_offset, row.offset);
        EXPECT_EQ(f.kvs()[row.pair].key, row.key);
    }
    EXPECT_EQ(f.get_string("general.architecture"), "phi3");
    EXPECT_EQ(f.get_string("general.name"), "Phi3");
    const GgufKv * tokens = f.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->value.type, GgufType::array);
    EXPECT_EQ(tokens->value.elem_type, GgufType::string);
    EXPECT_EQ(tokens->value.count, 32064u);
    const auto strings = f.get_string_array("tokenizer.ggml.tokens").value();
    ASSERT_EQ(strings.size(), 32064u);
    EXPECT_EQ(strings[0], "<unk>");
    // The pair after tokens starts where the last token string ends.
    EXPECT_EQ(strings.back().data() + strings.back().size() + 8, f.kvs()[16].key.data());
    EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores")->size(), 32064u);
    EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type")->size(), 32064u);
    const GgufKv * qv = f.find("general.quantization_version");
    EXPECT_EQ(qv->value.type, GgufType::u32);
    EXPECT_EQ(f.get_int("general.quantization_version"), 2);

    // In-memory parsing of the same bytes agrees.
    const std::string text = read_file_text(phi3_path());
    const GgufFile    g    = GgufFile::from_bytes({reinterpret_cast<const uint8_t *>(text.data()), text.size()});
    EXPECT_EQ(g.kvs().size(), 26u);
    for (size_t i = 0; i < 26; ++i) EXPECT_EQ(g.kvs()[i].file_offset, f.kvs()[i].file_offset);
}

// The big file truncated at many offsets (every byte of the first 1 KiB and around each pair start,
// then a stride through the token strings): every prefix is rejected, never crashes.
TEST(GgufPhi3Vocab, EveryTruncationIsRejected) {
    if (!std::filesystem::exists(phi3_path())) GTEST_SKIP() << "missing " << phi3_path();
    const std::string          text = read_file_text(phi3_path());
    const std::vector<uint8_t> full(text.begin(), text.end());
    const GgufFile             f = GgufFile::from_bytes(full);
    std::vector<size_t>        cuts;
    for (size_t n = 0; n < 1024; ++n) cuts.push_back(n);
    for (const auto & kv : f.kvs()) {
        for (size_t d = 0; d < 48 && kv.file_offset + d < full.size(); ++d) cuts.push_back(kv.file_offset + d);
    }
    for (size_t n = 1024; n < full.size(); n += 3331) cuts.push_back(n);
    for (size_t d = 1; d <= 16; ++d) cuts.push_back(full.size() - d);
    for (const size_t n : cuts) {
        const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
        try {
            (void) GgufFile::from_bytes(prefix);
            ADD_FAILURE() << "prefix of " << n << " bytes accepted";
        } catch (const Error & e) {
            ASSERT_EQ(e.kind(), ErrorKind::invalid_model) << n << ": " << e.what();
        }
    }
}

// ------------------------------------------------------------------------------------ §2.3

// Q2_0 blocks: fp16 d first, then codes. A g64 payload of n elements is n/64 blocks of 18 bytes; a
// legacy g128 payload is n/128 blocks of 34 bytes.
RawTensor q2(const std::string & name, std::vector<int64_t> ne, int group, uint8_t seed = 5) {
    uint64_t n = 1;
    for (auto d : ne) n *= static_cast<uint64_t>(d);
    const uint64_t bytes = group == 64 ? n / 64 * 18 : n / 128 * 34;
    return {name, std::move(ne), 42, {}, bytes, seed};
}

TEST(GgufQ2_0, G64FilesResolveToQ2_0) {
    RawFile r;
    r.tensors.push_back(q2("a", {256, 8}, 64));  // n = 2048: g64 576 bytes, g128 544 bytes
    r.tensors.push_back(q2("b", {512, 4}, 64));
    const auto     bytes = r.build();
    const GgufFile f     = GgufFile::from_bytes(bytes);
    for (const auto & t : f.tensors()) {
        EXPECT_EQ(t.type, DType::q2_0);
        EXPECT_EQ(t.n_bytes, 576u);
    }
    EXPECT_EQ(f.tensors()[1].offset, 576u);
}

TEST(GgufQ2_0, LegacyG128FilesResolveToPq2_0) {
    RawFile r;
    r.tensors.push_back(q2("a", {256, 8}, 128));
    r.tensors.push_back(q2("b", {512, 4}, 128));
    const auto     bytes = r.build();
    const GgufFile f     = GgufFile::from_bytes(bytes);
    for (const auto & t : f.tensors()) {
        EXPECT_EQ(t.type, DType::pq2_0);
        EXPECT_EQ(t.n_bytes, 544u);
    }
    EXPECT_EQ(f.tensors()[1].offset, 544u);
    // The resolved type decodes with 128-element blocks of 34 bytes: row 1 of "a" starts at byte 68.
    const auto & a = f.tensors()[0];
    const auto   d = f.tensor_data(a);
    std::vector<float> row(256);
    dequantize_tensor_row(a.type, d, a.n_elements, 256, 1, row.data());
    std::vector<float> expect(256);
    dequantize_row(DType::pq2_0, d.data() + 68, expect.data(), 256);
    EXPECT_EQ(row, expect);
}

TEST(GgufQ2_0, LastTensorWithoutTrailingPaddingStillResolves) {
    for (int group : {64, 128}) {
        RawFile r;
        r.pad_last = false;
        r.tensors.push_back(q2("a", {256, 8}, group));
        r.tensors.push_back(q2("b", {256, 9}, group));  // n = 2304: g64 648 (pad 672), g128 612 (pad 640)
        const auto bytes = r.build();
        EXPECT_EQ(bytes.size(), r.layout.data_end);
        const GgufFile f = GgufFile::from_bytes(bytes);
        EXPECT_EQ(f.tensors()[1].type, group == 64 ? DType::q2_0 : DType::pq2_0) << group;
        // ... and with the padding cut part-way (the other types accept this too, §1.9 check 19).
        auto partial = bytes;
        partial.resize(bytes.size() + 5, 0);
        const GgufFile g = GgufFile::from_bytes(partial);
        EXPECT_EQ(g.tensors()[1].type, group == 64 ? DType::q2_0 : DType::pq2_0) << group;
    }
}

TEST(GgufQ2_0, MixedGroupSizesAreRejected) {
    RawFile r;
    r.tensors.push_back(q2("blk.0.ffn_up.weight", {256, 8}, 64));
    r.tensors.push_back(q2("blk.0.ffn_down.weight", {256, 8}, 128));
    expect_rejected(r.build(), {"blk.0.ffn_down.weight", "128", "64"});
}

TEST(GgufQ2_0, SizeMatchingNeitherGroupIsRejected) {
    RawFile r;
    r.tensors.push_back({"output.weight", {256, 8}, 42, {}, 600, 1});  // 608 after padding; g64 576, g128 544
    r.tensors.push_back({"x", {32}, 0, {}, {}, 2});
    expect_rejected(r.build(), {"output.weight", "608", "576", "544"});
}

TEST(GgufQ2_0, TinyAmbiguousTensorsSettleByTheFileWideRule) {
    // n = 128: g64 is 36 bytes, g128 34; both pad to 64, so this tensor alone cannot tell.
    {
        RawFile r;
        r.tensors.push_back(q2("tiny", {128}, 64));
        const GgufFile f = GgufFile::from_bytes(r.build());
        EXPECT_EQ(f.tensors()[0].type, DType::q2_0);  // nothing else decides: mainline g64
        EXPECT_EQ(f.tensors()[0].n_bytes, 36u);
    }
    {
        RawFile r;
        r.tensors.push_back(q2("tiny", {128}, 128));
        r.tensors.push_back(q2("big", {256, 8}, 128));
        const GgufFile f = GgufFile::from_bytes(r.build());
        EXPECT_EQ(f.tensors()[0].type, DType::pq2_0);
        EXPECT_EQ(f.tensors()[0].n_bytes, 34u);
        EXPECT_EQ(f.tensors()[1].type, DType::pq2_0);
    }
    {
        RawFile r;  // the deciding tensor comes first in the file this time
        r.tensors.push_back(q2("big", {256, 8}, 64));
        r.tensors.push_back(q2("tiny", {128}, 64));
        const GgufFile f = GgufFile::from_bytes(r.build());
        EXPECT_EQ(f.tensors()[1].type, DType::q2_0);
        EXPECT_EQ(f.tensors()[1].n_bytes, 36u);
    }
}

TEST(GgufQ2_0, RowsNotAMultipleOf128CanOnlyBeG64) {
    RawFile r;
    r.tensors.push_back(q2("odd", {192, 2}, 64));  // 6 blocks of 64; no whole g128 blocks
    const GgufFile f = GgufFile::from_bytes(r.build());
    EXPECT_EQ(f.tensors()[0].type, DType::q2_0);
    EXPECT_EQ(f.tensors()[0].n_bytes, 108u);
    RawFile m;
    m.tensors.push_back(q2("odd", {192, 2}, 64));
    m.tensors.push_back(q2("big", {256, 8}, 128));
    expect_rejected(m.build(), {"big", "disagrees"});
}

TEST(GgufQ2_0, WriterProducesG64) {
    GgufWriter w;
    std::vector<float> x(256 * 3);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 3) - 1) * 0.25f;
    std::vector<uint8_t> q(3 * 4 * 18);
    quantize_row(DType::q2_0, x.data(), q.data(), static_cast<int64_t>(x.size()));
    w.add_tensor("w", DType::q2_0, {256, 3}, q);
    const GgufFile f = GgufFile::from_bytes(w.to_bytes());
    EXPECT_EQ(f.tensors()[0].type, DType::q2_0);
    std::vector<float> back(256);
    dequantize_tensor_row(DType::q2_0, f.tensor_data(f.tensors()[0]), 768, 256, 2, back.data());
    for (int i = 0; i < 256; ++i) EXPECT_EQ(back[i], x[512 + i]) << i;
}

// ---------------------------------------------------------------------------------- §1.9 17-19

TEST(GgufOffsets, NonContiguousOffsetsAreStrictErrorsButLenientlyAccepted) {
    RawFile r;
    r.tensors.push_back({"a", {8}, 0, 0, {}, 1});
    r.tensors.push_back({"b", {8}, 0, 96, {}, 2});  // contiguous would be 32
    const auto bytes = r.build();
    expect_rejected(bytes, {"tensor 'b'", "offset 96", "expected 32"});
    const GgufFile f = GgufFile::from_bytes(bytes, "lenient", GgufReadOptions{.strict_offsets = false});
    EXPECT_EQ(f.tensors()[1].offset, 96u);
    EXPECT_EQ(f.tensor_data(f.tensors()[1])[1], 2 + 7);

    // Out-of-order but aligned and disjoint offsets are lenient-only too.
    RawFile s;
    s.tensors.push_back({"a", {8}, 0, 64, {}, 1});
    s.tensors.push_back({"b", {8}, 0, 0, {}, 2});
    const auto swapped = s.build();
    expect_rejected(swapped, {"tensor 'a'", "offset 64", "expected 0"});
    const GgufFile g = GgufFile::from_bytes(swapped, "lenient", GgufReadOptions{.strict_offsets = false});
    EXPECT_EQ(g.tensor_data(g.tensors()[0])[0], 1);
    EXPECT_EQ(g.tensor_data(g.tensors()[1])[0], 2);
}

TEST(GgufOffsets, OverlapIsRejectedInLenientMode) {
    RawFile r;
    r.tensors.push_back({"first", {16}, 0, 0, {}, 1});   // 64 bytes at 0
    r.tensors.push_back({"second", {8}, 0, 32, {}, 2});  // 32 bytes at 32: overlaps
    const auto bytes = r.build();
    expect_rejected(bytes, {"second", "offset 32", "expected 64"});
    expect_rejected(bytes, {"first", "second", "overlap"}, GgufReadOptions{.strict_offsets = false});
    RawFile same;
    same.tensors.push_back({"x", {8}, 0, 0, {}, 1});
    same.tensors.push_back({"y", {8}, 0, 0, {}, 2});
    expect_rejected(same.build(), {"overlap"}, GgufReadOptions{.strict_offsets = false});
}

TEST(GgufOffsets, LenientModeStillChecksAlignmentAndBounds) {
    RawFile r;
    r.tensors.push_back({"a", {8}, 0, 8, {}, 1});
    expect_rejected(r.build(), {"tensor 'a'", "offset 8", "alignment 32"}, GgufReadOptions{.strict_offsets = false});
    RawFile b;
    b.tensors.push_back({"a", {8}, 0, 0, {}, 1});
    auto bytes = b.build();
    bytes.resize(b.layout.data_offset + 31);
    expect_rejected(bytes, {"tensor 'a'", "outside"}, GgufReadOptions{.strict_offsets = false});
}

// The trailing padding after the last tensor is not required (§1.9 check 19).
TEST(GgufOffsets, TrailingPaddingIsOptional) {
    RawFile r = test::small_valid_file();
    r.pad_last = false;
    const auto bytes = r.build();
    EXPECT_EQ(bytes.size(), r.layout.data_end);
    EXPECT_NE(bytes.size() % 32, r.layout.data_offset % 32);
    const GgufFile f = GgufFile::from_bytes(bytes);
    EXPECT_EQ(f.tensors().size(), 3u);
}

// ------------------------------------------------------------------------------- §2.1, §2.2

std::vector<uint8_t> file_with_type(uint32_t type, const std::string & arch = "llama") {
    RawFile r;
    r.kvs.push_back(test::kv_str("general.architecture", arch));
    r.tensors.push_back({"blk.3.ffn_gate.weight", {256, 2}, type, {}, 1024, 1});
    return r.build();
}

TEST(GgufTypeIds, UnknownIdsNameTheTensorAndTheType) {
    const struct {
        uint32_t     id;
        const char * what;
    } cases[] = {
        {3, "Q4_1"}, {4, "removed"}, {37, "I8_S"}, {38, "TL1"}, {39, "MXFP4"}, {40, "NVFP4"},
        {143, "PTQ1_0"}, {999, "unknown"}, {1000, "unknown"}, {0xffffffffu, "unknown"},
    };
    for (const auto & c : cases) {
        SCOPED_TRACE(c.id);
        expect_rejected(file_with_type(c.id), {"blk.3.ffn_gate.weight", "type id " + std::to_string(c.id), c.what});
    }
}

TEST(GgufTypeIds, Ids38And39InBitnetCppFilesAreTl1AndTl2) {
    for (const char * arch : {"bitnet-b1.58", "bitnet-25"}) {
        SCOPED_TRACE(arch);
        expect_rejected(file_with_type(38, arch), {"blk.3.ffn_gate.weight", "38", "TL1"});
        expect_rejected(file_with_type(39, arch), {"blk.3.ffn_gate.weight", "39", "TL2"});
    }
    const std::string m = rejection(file_with_type(39, "bitnet"));  // mainline arch: MXFP4
    EXPECT_NE(m.find("MXFP4"), std::string::npos) << m;
    EXPECT_EQ(m.find("TL2"), std::string::npos) << m;
}

TEST(GgufTypeIds, EveryReadableIdIsAccepted) {
    for (const auto & t : test::k_spec_types) {
        SCOPED_TRACE(t.id);
        RawFile r;
        r.tensors.push_back({"w", {static_cast<int64_t>(t.qk) * 256, 2}, t.id, {}, {}, 1});
        const GgufFile f = GgufFile::from_bytes(r.build());
        EXPECT_EQ(f.tensors()[0].n_bytes, r.layout.n_bytes[0]);
        EXPECT_EQ(static_cast<uint32_t>(f.tensors()[0].type), t.id);  // 42 here is g64 (not ambiguous)
    }
    RawFile r;
    r.tensors.push_back({"w", {2560, 2560}, test::k_i2s, {}, {}, 1});
    const GgufFile f = GgufFile::from_bytes(r.build());
    EXPECT_EQ(f.tensors()[0].type, DType::i2_s);
    EXPECT_EQ(f.tensors()[0].n_bytes, 1638432u);  // §1.7
}

}  // namespace
}  // namespace tern
