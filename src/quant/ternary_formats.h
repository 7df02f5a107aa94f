// Low-bit weight layouts that hold ternary (or 1/2-bit) weights: I2_S, TQ2_0, TQ1_0, Q2_0, PQ2_0,
// Q1_0. Each has a decoder to signed values + block scales (used to repack weights at load) and a
// packer (used by `tern convert`, `tern synth` and tests). Bit diagrams: FORMATS.md §3 and
// docs/formats.md.
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <cstring>
#include <span>

namespace tern {

// ---------------------------------------------------------------------------------------------
// I2_S (type 36, bitnet.cpp, x86 "128/32" layout). Whole tensor = n/4 bytes of codes + f32 scale
// at byte n/4 + 28 unspecified bytes. 128-element block b = 32 bytes; byte p of block b:
//
//   bit:  7 6 | 5 4 | 3 2 | 1 0
//         e+0 | e+32| e+64| e+96      e = 128b + p     (most significant pair first)
//
// code 0 -> -1, 1 -> 0, 2 -> +1, 3 -> 0 (as dequantize_row_i2_s).
// ---------------------------------------------------------------------------------------------

// Scale of an I2_S tensor of n elements (the f32 at byte n/4).
float i2s_tensor_scale(std::span<const uint8_t> tensor, int64_t n);
// Decodes elements [first, first + count) of the flat tensor into values in {-1, 0, +1}.
// first and count must be multiples of 128.
void i2s_decode(const uint8_t * tensor, int64_t first, int64_t count, int8_t * values);
// Packs n ternary values (n multiple of 128) and the scale into n/4 + 32 bytes; tail bytes are zero.
void i2s_pack(const int8_t * values, int64_t n, float scale, uint8_t * out);
// Counts code-3 fields (never written by bitnet.cpp's quantizer; decoded as 0).
int64_t i2s_count_code3(const uint8_t * tensor, int64_t n);
// Columns [col0, col0 + 16) of an I2_S row (col0 a multiple of 16) as one word of 2-bit codes
// value + 1 (code 3 reads as 1: value 0): byte m holds columns col0 + m, + 4, + 8, + 12 in bits 1-0,
// 3-2, 5-4, 7-6 (the WebGPU linear layout's word). A bit transcode, with no values in between.
inline uint32_t i2s_row_word(const uint8_t * row, int64_t col0) {
    constexpr uint64_t k_low2 = 0x0303030303030303ull, k_bit0 = 0x0101010101010101ull;
    const uint8_t *    block  = row + (col0 / 128) * 32;
    const int          p0     = static_cast<int>(col0 % 32);
    const int          shift  = 6 - 2 * static_cast<int>((col0 % 128) / 32);  // the 32-column quarter's field
    uint64_t           lo, hi;
    std::memcpy(&lo, block + p0, 8);
    std::memcpy(&hi, block + p0 + 8, 8);
    lo = (lo >> shift) & k_low2;  // byte i of (lo, hi): the code of column col0 + i
    hi = (hi >> shift) & k_low2;
    lo &= ~((lo & k_bit0) << 1);  // code 3 -> 1
    hi &= ~((hi & k_bit0) << 1);
    return static_cast<uint32_t>(lo) | static_cast<uint32_t>(lo >> 32) << 2 | static_cast<uint32_t>(hi) << 4 |
           static_cast<uint32_t>(hi >> 32) << 6;
}

// ---------------------------------------------------------------------------------------------
// Block formats. decode_*: one block -> QK signed values (-1..+2) and the block's scale d.
// pack_*: QK values in {-1, 0, +1} (Q2_0 also +2) and d -> one block.
// ---------------------------------------------------------------------------------------------

// TQ2_0 (type 35): 256 elements in 66 bytes: qs[64] then fp16 d LAST.
//   qs[32g + m], g = 0..1, m = 0..31:  bits 1..0 = e(128g+m), 3..2 = +32, 5..4 = +64, 7..6 = +96
void tq2_0_decode_block(const uint8_t * block, int8_t * values, float & d);
void tq2_0_pack_block(const int8_t * values, float d, uint8_t * block);

// TQ1_0 (type 34): 256 elements in 54 bytes: qs[48] (5 trits/byte), qh[4] (4 trits/byte), fp16 d.
//   byte = ceil(v * 256 / 243), v = base-3 number of the trits, first trit most significant.
//   trit n of byte b: ((uint8)(b * 3^n) * 3) >> 8.
void tq1_0_decode_block(const uint8_t * block, int8_t * values, float & d);
void tq1_0_pack_block(const int8_t * values, float d, uint8_t * block);
// The trit codec on its own (exposed for the worked-example tests).
uint8_t tq1_0_encode_trits(const uint8_t * trits, int n_trits);  // n_trits 5 (qs) or 4 (qh)
uint8_t tq1_0_trit(uint8_t byte, int n);

// Q2_0 (type 42, g64: 18 bytes) and PQ2_0 (type 142 or legacy 42, g128: 34 bytes): fp16 d FIRST,
// then qs[QK/4] with element 4k+i in bits 2i+1..2i of qs[k] (least significant first); value = code - 1.
void q2_0_decode_block(const uint8_t * block, int qk, int8_t * values, float & d);
void q2_0_pack_block(const int8_t * values, int qk, float d, uint8_t * block);

// Q1_0 (type 41): 128 elements in 18 bytes: fp16 d, qs[16]; bit i of qs[k] = sign of element 8k+i
// (1 -> +d, 0 -> -d).
void q1_0_decode_block(const uint8_t * block, int8_t * values, float & d);
void q1_0_pack_block(const int8_t * values, float d, uint8_t * block);

// Generic entry point for any weight type that holds small integers times a per-block scale:
// decodes one row of K elements (K a multiple of the block size) into values and one scale per
// group of lowbit_scale_group(type, K) elements. For I2_S the row is located inside the tensor and
// its one scale (the per-tensor f32) is returned: the group is the whole row.
bool    dtype_is_lowbit(DType type);  // i2_s, tq1_0, tq2_0, q2_0, pq2_0, q1_0
int64_t lowbit_scale_group(DType type, int64_t k);
void lowbit_decode_row(DType type, std::span<const uint8_t> tensor, int64_t n_elements, int64_t row, int64_t k,
                       int8_t * values, float * block_scales);

}  // namespace tern
