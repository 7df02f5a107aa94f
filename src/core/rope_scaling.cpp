// llama3_rope_freq_factors; see rope_scaling.h.
#include "core/rope_scaling.h"

#include <cmath>

namespace tern {

std::vector<float> llama3_rope_freq_factors(double base, int64_t n_rot, const Llama3RopeScaling & s) {
    const double       pi = 3.14159265358979323846;
    const double       low_wavelen = static_cast<double>(s.original_context) / s.low_freq_factor;
    const double       high_wavelen = static_cast<double>(s.original_context) / s.high_freq_factor;
    std::vector<float> out;
    for (int64_t i = 0; i < n_rot / 2; ++i) {
        const double freq    = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(n_rot));
        const double wavelen = 2.0 * pi / freq;
        double       f       = 1.0;
        if (wavelen > low_wavelen) {
            f = s.factor;
        } else if (wavelen >= high_wavelen) {
            const double smooth = (static_cast<double>(s.original_context) / wavelen - s.low_freq_factor) /
                                  (s.high_freq_factor - s.low_freq_factor);
            f = 1.0 / ((1.0 - smooth) / s.factor + smooth);
        }
        out.push_back(static_cast<float>(f));
    }
    return out;
}

}  // namespace tern
