// Small valid GGUF files covering every reader path: all metadata types, every tensor type, Q2_0
// g64 and legacy g128, custom alignment, vocab-only, missing trailing padding. They seed the
// libFuzzer corpus (tests/fuzz/fuzz_seeds) and the deterministic mutation test.
#pragma once

#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

#include <string>
#include <utility>
#include <vector>

namespace tern::test {

inline std::vector<std::pair<std::string, std::vector<uint8_t>>> gguf_seed_files() {
    std::vector<std::pair<std::string, std::vector<uint8_t>>> out;

    RawFile small = small_valid_file();
    out.emplace_back("small", small.build());
    small.pad_last = false;
    out.emplace_back("small_unpadded", small.build());

    {  // every metadata type, arrays of each, vocab-only
        RawFile r;
        r.kvs.push_back(kv_str("general.architecture", "llama"));
        r.kvs.push_back(kv_scalar("m.u8", T_U8, uint8_t{1}));
        r.kvs.push_back(kv_scalar("m.i8", T_I8, int8_t{-1}));
        r.kvs.push_back(kv_scalar("m.u16", T_U16, uint16_t{2}));
        r.kvs.push_back(kv_scalar("m.i16", T_I16, int16_t{-2}));
        r.kvs.push_back(kv_u32("m.u32", 3));
        r.kvs.push_back(kv_scalar("m.i32", T_I32, int32_t{-3}));
        r.kvs.push_back(kv_scalar("m.f32", T_F32, 0.5f));
        r.kvs.push_back(kv_scalar("m.bool", T_BOOL, uint8_t{1}));
        r.kvs.push_back(kv_scalar("m.u64", T_U64, uint64_t{4}));
        r.kvs.push_back(kv_scalar("m.i64", T_I64, int64_t{-4}));
        r.kvs.push_back(kv_scalar("m.f64", T_F64, 0.25));
        r.kvs.push_back(kv_str("m.empty", ""));
        r.kvs.push_back(kv_array("a.u8", T_U8, 3, {1, 2, 3}));
        r.kvs.push_back(kv_array("a.bool", T_BOOL, 2, {0, 1}));
        r.kvs.push_back(kv_array("a.i16", T_I16, 2, {1, 0, 0xff, 0xff}));
        r.kvs.push_back(kv_array("a.u64", T_U64, 1, {9, 0, 0, 0, 0, 0, 0, 0}));
        r.kvs.push_back(kv_array("a.f32", T_F32, 1, {0, 0, 0x80, 0x3f}));
        r.kvs.push_back(kv_array("a.f64", T_F64, 0, {}));
        r.kvs.push_back(kv_str_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "", "hé"}));
        out.emplace_back("metadata", r.build());
    }
    {  // every tensor type through the writer, alignment 64
        GgufWriter w;
        w.set_string("general.architecture", "bitnet-b1.58");
        w.set_alignment(64);
        int i = 0;
        for (const auto & t : k_spec_types) {
            const std::vector<int64_t> ne{static_cast<int64_t>(t.qk) * (t.qk == 1 ? 3 : 1), 2};
            std::vector<uint8_t>       data(spec_tensor_bytes(t.id, ne));
            for (size_t j = 0; j < data.size(); ++j) data[j] = static_cast<uint8_t>(j * 37 + i);
            w.add_tensor("t" + std::to_string(i++), static_cast<DType>(t.id), ne, data);
        }
        std::vector<uint8_t> i2s(128 * 2 / 4 + 32, 0x55);
        w.add_tensor("i2s", DType::i2_s, {128, 2}, i2s);
        out.emplace_back("all_types", w.to_bytes());
    }
    for (int group : {64, 128}) {  // type 42 both ways (§2.3)
        RawFile r;
        for (int t = 0; t < 2; ++t) {
            const uint64_t n = 256 * 8;
            r.tensors.push_back({"q" + std::to_string(t), {256, 8}, 42, {}, group == 64 ? n / 64 * 18 : n / 128 * 34,
                                 static_cast<uint8_t>(t)});
        }
        r.tensors.push_back({"tiny", {128}, 42, {}, group == 64 ? 36u : 34u, 9});
        out.emplace_back("q2_0_g" + std::to_string(group), r.build());
    }
    {  // bitnet-b1.58 file with an I2_S matrix and norms
        RawFile r;
        r.kvs.push_back(kv_str("general.architecture", "bitnet-b1.58"));
        r.kvs.push_back(kv_u32("general.alignment", 32));
        r.tensors.push_back({"blk.0.attn_norm.weight", {256}, 0, {}, {}, 1});
        r.tensors.push_back({"blk.0.attn_q.weight", {256, 4}, k_i2s, {}, {}, 2});
        r.tensors.push_back({"blk.0.ffn_down.weight", {256, 3}, 34, {}, {}, 3});
        out.emplace_back("bitnet", r.build());
    }
    return out;
}

}  // namespace tern::test
