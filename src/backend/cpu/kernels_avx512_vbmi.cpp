// The base-3 tiles' codes looked up instead of multiplied out (AVX-512 VBMI, compiled with the
// AVX-512 flags plus -mavx512vbmi; kernels_avx512() takes these where the CPU has VBMI). Every byte
// value's 5 codes come from 5 tables of 256 bytes, each 4 registers: two vpermi2b (128 entries
// each) and a blend on the byte's top bit per code vector, 15 shuffle-port operations per chunk
// instead of 18 multiplies, which on Intel's cores share port 0 with vpdpbusd (base3_avx512.h).
// The codes, and so every result, are the multiply decode's.
#include "backend/cpu/base3_avx512.h"

namespace tern::cpu {
namespace {

using namespace avx512;

struct Base3Tables {
    alignas(64) uint8_t code[5][256];  // code[j][b]: the j-th code of byte b (MulDecode's recurrence)
};
constexpr Base3Tables make_tables() {
    Base3Tables t{};
    for (int b = 0; b < 256; ++b) {
        int x = b;
        for (int j = 0; j < 5; ++j) {
            t.code[j][b] = static_cast<uint8_t>((x * 3) >> 8);
            x            = (x * 3) & 255;
        }
    }
    return t;
}
constexpr Base3Tables k_tables = make_tables();

struct LutDecode {
    __m512i tab[5][4];  // code[j] bytes 0-63, 64-127, 128-191, 192-255
    LutDecode() {
        for (int j = 0; j < 5; ++j) {
            for (int q = 0; q < 4; ++q) tab[j][q] = _mm512_load_si512(k_tables.code[j] + 64 * q);
        }
    }
    void operator()(__m512i bytes, __m512i codes[5]) const {
        const __mmask64 high = _mm512_movepi8_mask(bytes);  // bytes >= 128: the upper two tables
#pragma GCC unroll 5
        for (int j = 0; j < 5; ++j) {
            const __m512i lo = _mm512_permutex2var_epi8(tab[j][0], bytes, tab[j][1]);
            const __m512i hi = _mm512_permutex2var_epi8(tab[j][2], bytes, tab[j][3]);
            codes[j]         = _mm512_mask_blend_epi8(high, lo, hi);
        }
    }
};

}  // namespace

void ternary_gemm_base3_vbmi(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y,
                             int64_t ldy, int64_t row0, bool accumulate) {
    ternary_gemm_base3(LutDecode{}, w, tile0, tile1, a, y, ldy, row0, accumulate);
}

}  // namespace tern::cpu
