// Decoding of packed / master BitNet projections and packing into I2_S / TQ2_0 / TQ1_0; see hf_ternary.h.
#include "convert/hf_ternary.h"

#include "core/error.h"
#include "quant/ternary_formats.h"

#include <cmath>
#include <vector>

namespace tern {

PackedFieldCheck check_hf_packed(const StTensor & packed) {
    PackedFieldCheck r;
    const int64_t    quarter = packed.shape.size() == 2 ? packed.shape[0] : 0;
    const int64_t    in      = packed.shape.size() == 2 ? packed.shape[1] : 0;
    const uint8_t *  p       = packed.data.data();
    for (int64_t i = 0; i < packed.n_elements; ++i) {
        const uint8_t b = p[i];
        // A field is 3 iff both of its bits are set: (b & (b >> 1)) has bit 2k set for such a field k.
        const uint8_t both = static_cast<uint8_t>(b & (b >> 1) & 0x55);
        if (both == 0) continue;
        for (int k = 0; k < 4; ++k) {
            if (((both >> (2 * k)) & 1) == 0) continue;
            if (r.n_invalid++ == 0 && in > 0) {
                r.first_row = (i / in) + k * quarter;
                r.first_col = i % in;
            }
        }
    }
    return r;
}

void unpack_hf_packed(const StTensor & packed, int64_t out, int64_t in, int8_t * values) {
    const int64_t   quarter = out / 4;
    const uint8_t * p       = packed.data.data();
    for (int64_t r = 0; r < out; ++r) {
        const int      shift = static_cast<int>(2 * (r / quarter));
        const uint8_t * src  = p + (r % quarter) * in;
        int8_t *        dst  = values + r * in;
        for (int64_t c = 0; c < in; ++c) dst[c] = static_cast<int8_t>(((src[c] >> shift) & 3) - 1);
    }
}

float hf_packed_scale(const StTensor & weight_scale, LinearClass linear_class) {
    float v = 0;
    st_read_f32(weight_scale, 0, 1, &v);
    if (!std::isfinite(v) || v <= 0.0f) {
        fail(ErrorKind::invalid_model,
             format("tensor '%s' is %g, expected a finite number > 0", weight_scale.name.c_str(), static_cast<double>(v)),
             "weight_scale is mean|W| (autobitlinear) or its reciprocal (bitlinear)");
    }
    return linear_class == LinearClass::autobitlinear ? v : 1.0f / v;
}

AbsmeanScale absmean_scale(const StTensor & master) {
    constexpr int64_t  chunk = 1 << 16;
    std::vector<float> buf(static_cast<size_t>(std::min<int64_t>(chunk, master.n_elements)));
    double             sum = 0.0;
    for (int64_t first = 0; first < master.n_elements; first += chunk) {
        const int64_t n = std::min(chunk, master.n_elements - first);
        st_read_f32(master, first, n, buf.data());
        for (int64_t i = 0; i < n; ++i) {
            const float w = buf[static_cast<size_t>(i)];
            if (!std::isfinite(w)) {
                const int64_t in = master.shape.size() == 2 ? master.shape[1] : master.n_elements;
                fail(ErrorKind::invalid_model,
                     format("tensor '%s' has a non-finite value (%g) at [%lld, %lld]", master.name.c_str(),
                            static_cast<double>(w), (long long) ((first + i) / in), (long long) ((first + i) % in)),
                     "the master weights are damaged");
            }
            sum += std::fabs(w);
        }
    }
    return absmean_scale_from_sum(sum, master.n_elements);
}

void absmean_ternarize(const StTensor & master, float s_w, int8_t * values) {
    constexpr int64_t  chunk = 1 << 16;
    std::vector<float> buf(static_cast<size_t>(std::min<int64_t>(chunk, master.n_elements)));
    for (int64_t first = 0; first < master.n_elements; first += chunk) {
        const int64_t n = std::min(chunk, master.n_elements - first);
        st_read_f32(master, first, n, buf.data());
        for (int64_t i = 0; i < n; ++i) values[first + i] = absmean_ternary(buf[static_cast<size_t>(i)], s_w);
    }
}

}  // namespace tern
