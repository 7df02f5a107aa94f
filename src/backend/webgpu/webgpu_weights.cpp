// Repacking into the WebGPU layouts of webgpu_weights.h.
#include "backend/webgpu/webgpu_weights.h"

#include "core/error.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>

namespace tern {

namespace {

// Values (-1..+2) of k_words * 16 columns into words of 2-bit codes value + 1: element 4s + b of a
// word in byte b, bit pair s.
void pack_values(const int8_t * values, size_t k_words, uint32_t * dst) {
    for (size_t wi = 0; wi < k_words; ++wi) {
        uint32_t word = 0;
        for (uint32_t e = 0; e < 16; ++e) {
            const auto code = static_cast<uint32_t>(values[wi * 16 + e] + 1) & 3u;
            word |= code << (8 * (e % 4) + 2 * (e / 4));
        }
        dst[wi] = word;
    }
}

// Row `r` of part `p`, which is row `row` of the stacked layout: its code words, group scales and
// output scale (values, scales: scratch of K and n_groups).
void pack_row(GpuLinearLayout & w, const WeightSource & p, int64_t r, int64_t row, std::vector<int8_t> & values,
              std::vector<float> & scales) {
    const int64_t k       = w.n_cols;
    const size_t  k_words = static_cast<size_t>(k / 16);
    uint32_t *    dst     = w.words.data() + static_cast<size_t>(row) * k_words;
    if (w.type == DType::i2_s) {  // its codes are bit fields: transcoded a word at a time (one scale per tensor)
        TERN_ASSERT(k % 128 == 0 && (r + 1) * k <= p.n_elements(), "i2_s row %lld of %lld columns",
                    static_cast<long long>(r), static_cast<long long>(k));
        scales[0] = i2s_tensor_scale(p.data, p.n_elements());
        const uint8_t * codes = p.data.data() + static_cast<size_t>(r * (k / 4));
        for (size_t wi = 0; wi < k_words; ++wi) dst[wi] = i2s_row_word(codes, static_cast<int64_t>(wi) * 16);
    } else {
        lowbit_decode_row(w.type, p.data, p.n_elements(), r, k, values.data(), scales.data());
        pack_values(values.data(), k_words, dst);
    }
    for (int64_t g = 0; g < w.n_groups; ++g) {
        std::memcpy(&w.words[w.scales_offset + static_cast<size_t>(row * w.n_groups + g)], &scales[g], 4);
    }
    std::memcpy(&w.words[w.oscales_offset + static_cast<size_t>(row)], &p.output_scale, 4);
}

}  // namespace

GpuLinearLayout gpu_pack_linear(std::span<const WeightSource> parts) {
    const int64_t n    = check_linear_parts(parts);
    const int64_t k    = parts[0].ne[0];
    const DType   type = parts[0].type;
    if (k % 16 != 0) {
        fail(ErrorKind::unsupported, format("tensor '%s': K = %lld is not a multiple of 16, which the WebGPU layout needs",
                                            parts[0].name.c_str(), static_cast<long long>(k)));
    }
    GpuLinearLayout w;
    w.n_rows   = n;
    w.n_cols   = k;
    w.type     = type;
    w.group    = lowbit_scale_group(type, k);
    w.n_groups = k / w.group;
    const size_t k_words = static_cast<size_t>(k / 16);
    w.scales_offset      = static_cast<size_t>(n) * k_words;
    w.oscales_offset     = w.scales_offset + static_cast<size_t>(n * w.n_groups);
    w.words.resize(w.oscales_offset + static_cast<size_t>(n));  // not zeroed: pack_row writes every word

    // Rows [r0, r1) of the parts stacked; each row writes only its own words.
    auto pack_rows = [&](int64_t r0, int64_t r1) {
        std::vector<int8_t> values(static_cast<size_t>(k));
        std::vector<float>  scales(static_cast<size_t>(w.n_groups));
        int64_t             row0 = 0;
        for (const auto & p : parts) {
            for (int64_t r = std::max<int64_t>(0, r0 - row0); r < std::min(p.ne[1], r1 - row0); ++r) {
                pack_row(w, p, r, row0 + r, values, scales);
            }
            row0 += p.ne[1];
        }
    };
    // 2B4T repacks 2.1 billion weights at load: a weight of a million or more spreads its rows
    // over the host's threads (up to 16; one in a browser build without threads); the layout is
    // the same however it is split.
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
    const int64_t n_threads = 1;
#else
    const int64_t n_threads = n * k >= (int64_t{1} << 20)
                                  ? std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::min<int64_t>(16, n))
                                  : 1;
#endif
    if (n_threads == 1) {
        pack_rows(0, n);
        return w;
    }
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n_threads));
    std::vector<std::thread>        threads;
    for (int64_t t = 1; t < n_threads; ++t) {
        auto job = [&, t] {
            try {
                pack_rows(n * t / n_threads, n * (t + 1) / n_threads);
            } catch (...) {
                errors[static_cast<size_t>(t)] = std::current_exception();
            }
        };
        try {
            threads.emplace_back(job);
        } catch (const std::system_error &) {  // no thread to be had: its rows packed here
            job();
        }
    }
    try {
        pack_rows(0, n / n_threads);
    } catch (...) {
        errors[0] = std::current_exception();
    }
    for (auto & th : threads) th.join();
    for (const auto & e : errors) {
        if (e) std::rethrow_exception(e);
    }
    return w;
}

int gpu_linear_value(const GpuLinearLayout & w, int64_t r, int64_t c) {
    const uint32_t word = w.words[static_cast<size_t>(r * (w.n_cols / 16) + c / 16)];
    const int64_t  e    = c % 16;
    return static_cast<int>((word >> (8 * (e % 4) + 2 * (e / 4))) & 3u) - 1;
}

GpuTableLayout gpu_pack_table(const WeightSource & src) {
    if (src.type == DType::i2_s || src.type == DType::i8 || src.type == DType::i32) {
        fail(ErrorKind::unsupported, format("tensor '%s': a %s embedding table is not supported", src.name.c_str(),
                                            std::string(dtype_name(src.type)).c_str()));
    }
    GpuTableLayout t;
    const int64_t  n = src.n_elements();
    if (src.type == DType::f16 || src.type == DType::f32) {
        t.f16 = src.type == DType::f16;
        const size_t bytes = static_cast<size_t>(n) * (t.f16 ? 2 : 4);
        TERN_ASSERT(src.data.size() >= bytes, "table '%s' is shorter than its shape", src.name.c_str());
        t.words.assign((bytes + 3) / 4, 0u);
        std::memcpy(t.words.data(), src.data.data(), bytes);
        return t;
    }
    const int64_t k         = src.ne[0];
    const size_t  row_bytes = dtype_row_bytes(src.type, k);
    t.words.assign(static_cast<size_t>(n), 0u);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < n / k; ++r) {
        dequantize_row(src.type, src.data.data() + static_cast<size_t>(r) * row_bytes, row.data(), k);
        std::memcpy(t.words.data() + static_cast<size_t>(r * k), row.data(), static_cast<size_t>(k) * 4);
    }
    return t;
}

std::vector<float> gpu_pack_norm(const WeightSource & src) {
    std::vector<float> w(static_cast<size_t>(src.ne[0]));
    dequantize_row(src.type, src.data.data(), w.data(), src.ne[0]);
    return w;
}

}  // namespace tern
