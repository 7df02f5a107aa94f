// Backend helpers shared by every backend.
#include "backend/backend.h"

#include "core/error.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

namespace tern {

Tensor Tensor::columns(int64_t first, int64_t count) const {
    TERN_ASSERT(ne[2] == 1 && ne[3] == 1, "columns() needs a 2-D tensor");
    TERN_ASSERT(first >= 0 && count >= 0 && first + count <= ne[1], "columns [%lld, %lld) of %lld",
                static_cast<long long>(first), static_cast<long long>(first + count), static_cast<long long>(ne[1]));
    Tensor t = *this;
    t.offset += static_cast<size_t>(first) * row_bytes();
    t.ne[1] = count;
    return t;
}

double Backend::measure_copy_bandwidth(size_t n_bytes) {
    synchronize();
    n_bytes = std::max<size_t>(n_bytes, 4096);
    std::vector<uint8_t> src(n_bytes, 1), dst(n_bytes, 0);  // written once: pages are mapped before timing
    double best = 0;
    for (int rep = 0; rep < 6; ++rep) {  // rep 0 warms up
        const auto t0 = std::chrono::steady_clock::now();
        std::memcpy(dst.data(), src.data(), n_bytes);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rep > 0 && s > 0) best = std::max(best, 2.0 * static_cast<double>(n_bytes) / s);
        src[rep] = dst[n_bytes - 1 - static_cast<size_t>(rep)];  // keep the copies observable
    }
    return best;
}

int64_t check_linear_parts(std::span<const WeightSource> parts) {
    TERN_ASSERT(!parts.empty(), "load_linear with no parts");
    const int64_t k    = parts[0].ne[0];
    const DType   type = parts[0].type;
    int64_t       n    = 0;
    for (const auto & p : parts) {
        if (!dtype_is_lowbit(p.type)) {
            fail(ErrorKind::unsupported,
                 format("tensor '%s' has type %s; BitLinear weights must be a ternary/low-bit type", p.name.c_str(),
                        std::string(dtype_name(p.type)).c_str()),
                 "supported: i2_s tq1_0 tq2_0 q2_0 pq2_0 q1_0; re-quantize the model");
        }
        if (p.type != type) {
            fail(ErrorKind::unsupported,
                 format("tensor '%s' has type %s but '%s' has type %s; tensors that share an input must share a type",
                        p.name.c_str(), std::string(dtype_name(p.type)).c_str(), parts[0].name.c_str(),
                        std::string(dtype_name(type)).c_str()));
        }
        TERN_ASSERT(p.ne[0] == k, "parts disagree on K");
        if (p.type == DType::i2_s) {
            const float s = i2s_tensor_scale(p.data, p.n_elements());
            if (!std::isfinite(s)) {
                fail(ErrorKind::invalid_model, format("tensor '%s': i2_s scale is %g; expected a finite number",
                                                      p.name.c_str(), static_cast<double>(s)));
            }
        }
        n += p.ne[1];
    }
    return n;
}

OwnedTensor alloc_tensor(Backend & backend, DType type, std::array<int64_t, 4> ne, const char * label) {
    OwnedTensor out;
    out.tensor.type = type;
    out.tensor.ne   = ne;
    out.buffer      = backend.alloc(out.tensor.n_bytes(), label);
    out.tensor.buffer = out.buffer.get();
    return out;
}

}  // namespace tern
