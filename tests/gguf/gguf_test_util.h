// Test-side GGUF encoder written from FORMATS.md §1 and §2.1 alone, independent of GgufWriter and of
// the dtype table in src/core, so that reader tests do not check the code against itself.
//
// RawFile describes a file field by field; build() lays it out exactly as §1.1 says and records
// where every field landed (Layout), so that a test can take a valid file and corrupt one field.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tern::test {

// ---- primitive encodings (§1.2), little-endian ----
template <typename T>
inline void put(std::vector<uint8_t> & out, T v) {
    uint8_t b[sizeof v];
    std::memcpy(b, &v, sizeof v);  // the test hosts are little-endian, like the reader's
    out.insert(out.end(), b, b + sizeof v);
}
inline void put_str(std::vector<uint8_t> & out, const std::string & s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}
template <typename T>
inline void poke(std::vector<uint8_t> & bytes, size_t pos, T v) {
    std::memcpy(bytes.data() + pos, &v, sizeof v);
}
template <typename T>
inline T peek(const std::vector<uint8_t> & bytes, size_t pos) {
    T v;
    std::memcpy(&v, bytes.data() + pos, sizeof v);
    return v;
}

// ---- value type ids (§1.4) ----
enum : uint32_t {
    T_U8 = 0, T_I8 = 1, T_U16 = 2, T_I16 = 3, T_U32 = 4, T_I32 = 5, T_F32 = 6, T_BOOL = 7,
    T_STRING = 8, T_ARRAY = 9, T_U64 = 10, T_I64 = 11, T_F64 = 12,
};

// ---- ggml type table (§2.1): elements per block, bytes per block. I2_S is tensor-level. ----
struct SpecType {
    uint32_t id;
    uint32_t qk;
    uint32_t bytes;
};
inline constexpr SpecType k_spec_types[] = {
    {0, 1, 4},       // F32
    {1, 1, 2},       // F16
    {2, 32, 18},     // Q4_0
    {8, 32, 34},     // Q8_0
    {12, 256, 144},  // Q4_K
    {14, 256, 210},  // Q6_K
    {30, 1, 2},      // BF16
    {34, 256, 54},   // TQ1_0
    {35, 256, 66},   // TQ2_0
    {41, 128, 18},   // Q1_0
    {42, 64, 18},    // Q2_0 (mainline g64)
    {142, 128, 34},  // PQ2_0
};
inline constexpr uint32_t k_i2s = 36;

// §1.7: nbytes = (ne0/QK)·bytes·ne1·ne2·ne3, and n/4 + 32 for I2_S.
inline uint64_t spec_tensor_bytes(uint32_t id, const std::vector<int64_t> & ne) {
    uint64_t n = 1;
    for (int64_t d : ne) n *= static_cast<uint64_t>(d);
    if (id == k_i2s) return n / 4 + 32;
    for (const auto & t : k_spec_types) {
        if (t.id == id) return n / t.qk * t.bytes;
    }
    throw std::logic_error("spec_tensor_bytes: no size for type " + std::to_string(id));
}

inline uint64_t pad(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// ---- metadata values: the bytes after the value_type field ----
struct RawKv {
    std::string          key;
    uint32_t             type;
    std::vector<uint8_t> value;
};
template <typename T>
inline RawKv kv_scalar(const std::string & key, uint32_t type, T v) {
    RawKv kv{key, type, {}};
    put(kv.value, v);
    return kv;
}
inline RawKv kv_u32(const std::string & key, uint32_t v) { return kv_scalar(key, T_U32, v); }
inline RawKv kv_str(const std::string & key, const std::string & s) {
    RawKv kv{key, T_STRING, {}};
    put_str(kv.value, s);
    return kv;
}
// Array header (elem type, count) followed by already-encoded elements.
inline RawKv kv_array(const std::string & key, uint32_t elem, uint64_t count, const std::vector<uint8_t> & elems) {
    RawKv kv{key, T_ARRAY, {}};
    put(kv.value, elem);
    put(kv.value, count);
    kv.value.insert(kv.value.end(), elems.begin(), elems.end());
    return kv;
}
inline RawKv kv_str_array(const std::string & key, const std::vector<std::string> & v) {
    std::vector<uint8_t> e;
    for (const auto & s : v) put_str(e, s);
    return kv_array(key, T_STRING, v.size(), e);
}

// ---- tensors ----
struct RawTensor {
    std::string             name;
    std::vector<int64_t>    ne;                // as written (may be hostile)
    uint32_t                type = 0;
    std::optional<uint64_t> offset;            // nullopt: contiguous layout of §1.6
    std::optional<uint64_t> n_bytes;           // bytes reserved for the payload; nullopt: spec size
    uint8_t                 seed = 0;          // payload byte i = seed + 7*i
};

struct Layout {
    std::vector<size_t>   kv_pos;      // start of each pair
    std::vector<size_t>   info_pos;    // start of each tensor info
    std::vector<size_t>   ndims_pos;   // the n_dims field
    std::vector<size_t>   dims_pos;    // ne[0]
    std::vector<size_t>   type_pos;    // the ggml type field
    std::vector<size_t>   offset_pos;  // the offset field
    std::vector<uint64_t> offsets;     // offsets as written
    std::vector<uint64_t> n_bytes;     // payload bytes per tensor
    size_t                dir_end     = 0;
    size_t                data_offset = 0;
    size_t                data_end    = 0;  // end of the last payload (before its trailing padding)
};

struct RawFile {
    std::string             magic   = "GGUF";
    uint32_t                version = 3;
    std::optional<uint64_t> n_tensors;  // override of the header count
    std::optional<uint64_t> n_kv;
    std::vector<RawKv>      kvs;
    std::vector<RawTensor>  tensors;
    uint64_t                alignment = 32;  // layout only; add general.alignment to kvs yourself
    bool                    pad_last  = true;
    Layout                  layout;

    std::vector<uint8_t> build() {
        layout = {};
        std::vector<uint8_t> out(magic.begin(), magic.end());
        put(out, version);
        put<uint64_t>(out, n_tensors.value_or(tensors.size()));
        put<uint64_t>(out, n_kv.value_or(kvs.size()));
        for (const auto & kv : kvs) {
            layout.kv_pos.push_back(out.size());
            put_str(out, kv.key);
            put(out, kv.type);
            out.insert(out.end(), kv.value.begin(), kv.value.end());
        }
        uint64_t next = 0;
        for (const auto & t : tensors) {
            const uint64_t nb  = t.n_bytes ? *t.n_bytes : spec_tensor_bytes(t.type, t.ne);
            const uint64_t off = t.offset.value_or(next);
            layout.info_pos.push_back(out.size());
            put_str(out, t.name);
            layout.ndims_pos.push_back(out.size());
            put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
            layout.dims_pos.push_back(out.size());
            for (int64_t d : t.ne) put<int64_t>(out, d);
            layout.type_pos.push_back(out.size());
            put(out, t.type);
            layout.offset_pos.push_back(out.size());
            put(out, off);
            layout.offsets.push_back(off);
            layout.n_bytes.push_back(nb);
            next = off + pad(nb, alignment);
        }
        layout.dir_end     = out.size();
        layout.data_offset = tensors.empty() ? out.size() : pad(out.size(), alignment);
        out.resize(layout.data_offset, 0);
        uint64_t end = 0;
        for (size_t i = 0; i < tensors.size(); ++i) {
            const uint64_t off = layout.offsets[i], nb = layout.n_bytes[i];
            if (layout.data_offset + off + nb > out.size()) out.resize(layout.data_offset + off + nb, 0);
            for (uint64_t j = 0; j < nb; ++j) {
                out[layout.data_offset + off + j] = static_cast<uint8_t>(tensors[i].seed + 7 * j);
            }
            end = std::max<uint64_t>(end, off + nb);
        }
        layout.data_end = layout.data_offset + end;
        if (pad_last && !tensors.empty()) out.resize(std::max<size_t>(out.size(), layout.data_offset + pad(end, alignment)), 0);
        return out;
    }
};

// A small valid file with three tensors of different types and a few KVs (the truncation and
// mutation corpora start from it).
inline RawFile small_valid_file() {
    RawFile f;
    f.kvs.push_back(kv_str("general.architecture", "bitnet-b1.58"));
    f.kvs.push_back(kv_u32("bitnet-b1.58.block_count", 2));
    f.kvs.push_back(kv_str_array("tokenizer.ggml.tokens", {"a", "", "bc"}));
    f.kvs.push_back(kv_array("tokenizer.ggml.token_type", T_I32, 3, {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}));
    f.tensors.push_back({"token_embd.weight", {8, 3}, 1, {}, {}, 1});       // F16, 48 bytes
    f.tensors.push_back({"blk.0.attn_q.weight", {128, 2}, k_i2s, {}, {}, 2});  // I2_S, 64 + 32 bytes
    f.tensors.push_back({"output.weight", {256, 1}, 35, {}, {}, 3});         // TQ2_0, 66 bytes
    return f;
}

}  // namespace tern::test
