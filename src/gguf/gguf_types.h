// GGUF metadata value types (FORMATS.md §1.4) shared by the reader and the writer.
#pragma once

#include <cstdint>
#include <string_view>

namespace tern {

enum class GgufType : uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
    string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

constexpr uint32_t k_gguf_type_count = 13;

// Encoded size of a fixed-size value type; 0 for string and array.
constexpr size_t gguf_type_size(GgufType t) {
    switch (t) {
        case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
        case GgufType::u16: case GgufType::i16: return 2;
        case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
        case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
        default: return 0;
    }
}

constexpr std::string_view gguf_type_name(GgufType t) {
    switch (t) {
        case GgufType::u8: return "UINT8";
        case GgufType::i8: return "INT8";
        case GgufType::u16: return "UINT16";
        case GgufType::i16: return "INT16";
        case GgufType::u32: return "UINT32";
        case GgufType::i32: return "INT32";
        case GgufType::f32: return "FLOAT32";
        case GgufType::boolean: return "BOOL";
        case GgufType::string: return "STRING";
        case GgufType::array: return "ARRAY";
        case GgufType::u64: return "UINT64";
        case GgufType::i64: return "INT64";
        case GgufType::f64: return "FLOAT64";
    }
    return "?";
}

constexpr bool gguf_type_is_integer(GgufType t) {
    return t == GgufType::u8 || t == GgufType::i8 || t == GgufType::u16 || t == GgufType::i16 || t == GgufType::u32 ||
           t == GgufType::i32 || t == GgufType::u64 || t == GgufType::i64;
}

constexpr uint32_t k_gguf_default_alignment = 32;
constexpr size_t   k_gguf_max_tensor_name   = 63;  // GGML_MAX_NAME 64 includes the NUL

}  // namespace tern
