// find_non_finite: where each type keeps its floats (FORMATS.md §2-3, block_formats.h,
// ternary_formats.h).
#include "quant/finite_check.h"

#include "core/error.h"
#include "core/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tern {
namespace {

uint16_t load_u16(const uint8_t * p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// Offsets of the fp16 scales inside one block of a quantized type.
struct ScaleLayout {
    int n       = 0;
    int offs[2] = {0, 0};
};

ScaleLayout scale_layout(DType type) {
    switch (type) {
        case DType::q4_0:   // fp16 d | qs[16]
        case DType::q8_0:   // fp16 d | qs[32]
        case DType::q1_0:   // fp16 d | qs[16]
        case DType::q2_0:   // fp16 d | qs[16]
        case DType::pq2_0: return {1, {0, 0}};   // fp16 d | qs[32]
        case DType::q4_k:  return {2, {0, 2}};   // fp16 d | fp16 dmin | scales[12] | qs[128]
        case DType::q6_k:  return {1, {208, 0}};  // ql[128] | qh[64] | scales[16] | fp16 d
        case DType::tq1_0: return {1, {52, 0}};   // qs[48] | qh[4] | fp16 d
        case DType::tq2_0: return {1, {64, 0}};   // qs[64] | fp16 d
        default: return {};
    }
}

// The first element i of n (`bytes` each, little-endian) whose exponent bits (`mask`) are all ones.
// Chunks are first tested without an early exit, a loop the compiler vectorizes (a model's
// largest table, 656 MB of F16 for 2B4T, is tested at memory speed instead of one element at a
// time); only a chunk that has one is searched for its first.
template <class Word> std::optional<int64_t> first_all_ones(const uint8_t * data, int64_t n, Word mask) {
    constexpr int64_t k_chunk = 4096;
    for (int64_t c0 = 0; c0 < n; c0 += k_chunk) {
        const int64_t c1  = std::min(n, c0 + k_chunk);
        bool          any = false;
        for (int64_t i = c0; i < c1; ++i) {
            Word w;
            std::memcpy(&w, data + sizeof(Word) * i, sizeof(Word));
            any |= (w & mask) == mask;
        }
        if (!any) continue;
        for (int64_t i = c0; i < c1; ++i) {
            Word w;
            std::memcpy(&w, data + sizeof(Word) * i, sizeof(Word));
            if ((w & mask) == mask) return i;
        }
    }
    return std::nullopt;
}

}  // namespace

std::optional<NonFinite> find_non_finite(DType type, std::span<const uint8_t> data, int64_t n) {
    switch (type) {
        case DType::f32:
            if (const auto i = first_all_ones<uint32_t>(data.data(), n, 0x7f800000u)) {
                float v;
                std::memcpy(&v, data.data() + 4 * *i, 4);
                return NonFinite{*i, v, false};
            }
            return std::nullopt;
        case DType::f16:
            if (const auto i = first_all_ones<uint16_t>(data.data(), n, 0x7c00)) {  // exponent all ones
                return NonFinite{*i, fp16_to_fp32(load_u16(data.data() + 2 * *i)), false};
            }
            return std::nullopt;
        case DType::bf16:
            if (const auto i = first_all_ones<uint16_t>(data.data(), n, 0x7f80)) {
                return NonFinite{*i, bf16_to_fp32(load_u16(data.data() + 2 * *i)), false};
            }
            return std::nullopt;
        case DType::i2_s: {  // n/4 bytes of codes, then the tensor's f32 scale
            float s;
            std::memcpy(&s, data.data() + n / 4, 4);
            if (!std::isfinite(s)) return NonFinite{0, s, true};
            return std::nullopt;
        }
        default: break;
    }
    const DTypeTraits & t      = dtype_traits(type);
    const ScaleLayout   layout = scale_layout(type);
    TERN_ASSERT(layout.n > 0, "find_non_finite: no scale layout for %s", std::string(t.name).c_str());
    const int64_t n_blocks = n / t.block_size;
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t * block = data.data() + b * t.block_bytes;
        for (int k = 0; k < layout.n; ++k) {
            const uint16_t h = load_u16(block + layout.offs[k]);
            if ((h & 0x7c00) == 0x7c00) return NonFinite{b * t.block_size, fp16_to_fp32(h), true};
        }
    }
    return std::nullopt;
}

}  // namespace tern
