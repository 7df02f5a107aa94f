// Test helpers that write safetensors files from C++: a well-formed builder (named tensors with raw
// bytes) and a raw one (any header text + data) for malformed-input tests, plus bf16 encoding.
#pragma once

#include "core/fp16.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tern::test {

struct StEntry {
    std::string          name;
    std::string          dtype;  // "U8", "BF16", ...
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
};

// u64 LE length | header | data.
inline std::vector<uint8_t> raw_safetensors(const std::string & header, const std::vector<uint8_t> & data,
                                            uint64_t header_len_override = UINT64_MAX) {
    std::vector<uint8_t> out(8);
    const uint64_t       len = header_len_override == UINT64_MAX ? header.size() : header_len_override;
    for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(len >> (8 * i));
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

// Tensors laid out back to back in the given order; the header padded with spaces to 8 bytes.
inline std::vector<uint8_t> build_safetensors(const std::vector<StEntry> & entries,
                                              const nlohmann::json & metadata = nlohmann::json()) {
    nlohmann::json       header = nlohmann::json::object();
    std::vector<uint8_t> data;
    for (const auto & e : entries) {
        header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {data.size(), data.size() + e.data.size()}}};
        data.insert(data.end(), e.data.begin(), e.data.end());
    }
    if (!metadata.is_null()) header["__metadata__"] = metadata;
    std::string text = header.dump();
    text.resize((text.size() + 7) / 8 * 8, ' ');
    return raw_safetensors(text, data);
}

inline void write_bytes(const std::filesystem::path & path, const std::vector<uint8_t> & bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::filesystem::path & path, const std::string & text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

inline std::vector<uint8_t> bf16_bytes(const std::vector<float> & values) {
    std::vector<uint8_t> out;
    for (float v : values) {
        const uint16_t b = fp32_to_bf16(v);
        out.push_back(static_cast<uint8_t>(b & 0xff));
        out.push_back(static_cast<uint8_t>(b >> 8));
    }
    return out;
}

inline std::vector<uint8_t> f32_bytes(const std::vector<float> & values) {
    std::vector<uint8_t> out(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
    return out;
}

// The value a float has after a round trip through bf16 (what the converter reads back).
inline float bf16_round(float v) { return bf16_to_fp32(fp32_to_bf16(v)); }

}  // namespace tern::test
