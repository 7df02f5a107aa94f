// Repacking of file weights into the CPU backend's layouts (cpu_weights.h), with the checks that
// make a bad file an error at load time rather than garbage at run time.
#include "backend/cpu/cpu_weights.h"

#include "core/error.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tern {

// Out of memory is std::bad_alloc, as from operator new: the CLI answers it with the hint that fits
// the command (a KV cache too big for -c: a smaller context or batch).
CpuBuffer::CpuBuffer(size_t n) : data_(static_cast<uint8_t *>(std::calloc(n > 0 ? n : 1, 1))), size_(n) {
    if (!data_) throw std::bad_alloc();
}
void CpuBuffer::Free::operator()(uint8_t * p) const { std::free(p); }

std::unique_ptr<CpuLinear> cpu_pack_linear(std::span<const WeightSource> parts) {
    const int64_t n    = check_linear_parts(parts);
    const int64_t k    = parts[0].ne[0];
    const DType   type = parts[0].type;
    auto w          = std::make_unique<CpuLinear>();
    w->n_rows       = n;
    w->type         = type;
    w->n_cols       = k;
    w->group        = lowbit_scale_group(type, k);
    const int64_t n_groups = k / w->group;
    w->codes.assign(static_cast<size_t>(n * k / 4), 0);
    w->scales.assign(static_cast<size_t>(n * n_groups), 0.0f);
    w->output_scales.assign(static_cast<size_t>(n), 1.0f);

    std::vector<int8_t> values(static_cast<size_t>(k));
    int64_t             row0 = 0;
    for (const auto & p : parts) {
        for (int64_t r = 0; r < p.ne[1]; ++r) {
            float * scales = w->scales.data() + (row0 + r) * n_groups;
            lowbit_decode_row(type, p.data, p.n_elements(), r, k, values.data(), scales);
            uint8_t * dst = w->codes.data() + (row0 + r) * (k / 4);
            for (int64_t c = 0; c < k; c += 4) {
                dst[c / 4] = static_cast<uint8_t>((values[c] + 1) | ((values[c + 1] + 1) << 2) |
                                                  ((values[c + 2] + 1) << 4) | ((values[c + 3] + 1) << 6));
            }
            w->output_scales[static_cast<size_t>(row0 + r)] = p.output_scale;
        }
        row0 += p.ne[1];
    }
    return w;
}

std::unique_ptr<CpuNorm> cpu_pack_norm(const WeightSource & src) {
    auto w    = std::make_unique<CpuNorm>();
    w->n_rows = 1;
    w->n_cols = src.ne[0];
    w->w.resize(static_cast<size_t>(src.ne[0]));
    dequantize_row(src.type, src.data.data(), w->w.data(), src.ne[0]);
    return w;
}

std::unique_ptr<CpuEmbedding> cpu_pack_embedding(const WeightSource & src) {
    if (src.type == DType::i2_s) {
        fail(ErrorKind::unsupported, format("tensor '%s': an i2_s embedding table is not supported", src.name.c_str()));
    }
    auto w       = std::make_unique<CpuEmbedding>();
    w->n_cols    = src.ne[0];
    w->n_rows    = src.ne[1];
    w->src       = src;
    w->row_bytes = dtype_row_bytes(src.type, src.ne[0]);
    return w;
}

}  // namespace tern
