// The type table of FORMATS.md §2.1, restricted to what tern reads, plus names for the ids it rejects.
#include "core/dtype.h"

#include "core/error.h"

#include <array>

namespace tern {
namespace {

struct Entry {
    DType       type;
    DTypeTraits traits;
};

constexpr std::array<Entry, 15> k_table = {{
    {DType::f32,   {"f32", 1, 4, false, false}},
    {DType::f16,   {"f16", 1, 2, false, false}},
    {DType::q4_0,  {"q4_0", 32, 18, true, false}},
    {DType::q8_0,  {"q8_0", 32, 34, true, false}},
    {DType::q4_k,  {"q4_k", 256, 144, true, false}},
    {DType::q6_k,  {"q6_k", 256, 210, true, false}},
    {DType::bf16,  {"bf16", 1, 2, false, false}},
    {DType::tq1_0, {"tq1_0", 256, 54, true, true}},
    {DType::tq2_0, {"tq2_0", 256, 66, true, true}},
    {DType::i2_s,  {"i2_s", 1, 1, true, true}},
    {DType::q1_0,  {"q1_0", 128, 18, true, false}},
    {DType::q2_0,  {"q2_0", 64, 18, true, true}},
    {DType::pq2_0, {"pq2_0", 128, 34, true, true}},
    {DType::i8,    {"i8", 1, 1, false, false}},
    {DType::i32,   {"i32", 1, 4, false, false}},
}};

}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t id) {
    for (const auto & e : k_table) {
        if (static_cast<uint32_t>(e.type) == id && id < 1000) return e.traits;
    }
    return std::nullopt;
}

const DTypeTraits & dtype_traits(DType type) {
    for (const auto & e : k_table) {
        if (e.type == type) return e.traits;
    }
    TERN_ASSERT(false, "dtype %u has no traits", static_cast<unsigned>(type));
}

std::string_view dtype_name(DType type) { return dtype_traits(type).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
    for (const auto & e : k_table) {
        if (e.traits.name == name) return e.type;
    }
    return std::nullopt;
}

size_t dtype_row_bytes(DType type, int64_t ne0) {
    const auto & t = dtype_traits(type);
    if (type == DType::i2_s) return static_cast<size_t>(ne0) / 4;
    TERN_ASSERT(ne0 % t.block_size == 0, "row of %lld elements is not a multiple of %s blocks", (long long) ne0,
                std::string(t.name).c_str());
    return static_cast<size_t>(ne0 / t.block_size) * t.block_bytes;
}

size_t dtype_tensor_bytes(DType type, int64_t ne0, int64_t n) {
    if (type == DType::i2_s) return static_cast<size_t>(n) / 4 + 32;
    return dtype_row_bytes(type, ne0) * static_cast<size_t>(n / ne0);
}

std::string_view dtype_unsupported_name(uint32_t id, bool bitnet_cpp_arch) {
    switch (id) {
        case 3: return "Q4_1";
        case 4: case 5: return "a removed type (Q4_2/Q4_3)";
        case 6: return "Q5_0";
        case 7: return "Q5_1";
        case 9: return "Q8_1 (activation-only type)";
        case 10: return "Q2_K";
        case 11: return "Q3_K";
        case 13: return "Q5_K";
        case 15: return "Q8_K (activation-only type)";
        case 16: case 17: case 18: case 19: case 20: case 21: case 22: case 23: case 29: return "an IQ type";
        case 24: case 25: case 26: case 27: case 28: return "an integer/F64 type";
        case 31: case 32: case 33: return "a removed repacked Q4_0 type";
        case 37: return "I8_S (bitnet.cpp activation type)";
        case 38: return "TL1 (bitnet.cpp lookup-table tiles)";
        case 39: return bitnet_cpp_arch ? "TL2 (bitnet.cpp lookup-table tiles)" : "MXFP4";
        case 40: return "NVFP4";
        case 143: return "PTQ1_0 (PrismML)";
        default: return "an unknown type";
    }
}

}  // namespace tern
