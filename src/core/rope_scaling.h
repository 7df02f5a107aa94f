// Llama-3 rope scaling ("rope_type": "llama3" in a Hugging Face config), as the per-pair frequency
// divisors that llama.cpp stores in the `rope_freqs.weight` tensor: rotation angle i of position p is
// p * base^(-2i/n_rot) / factor_i. With wavelength w_i = 2 pi base^(2i/n_rot) and the original
// context L:
//   w_i < L / high_freq_factor  -> factor_i = 1           (high frequencies kept)
//   w_i > L / low_freq_factor   -> factor_i = factor      (low frequencies stretched)
//   otherwise                   -> factor_i = 1 / ((1 - s) / factor + s),
//                                  s = (L / w_i - low_freq_factor) / (high_freq_factor - low_freq_factor)
// This is transformers' _compute_llama3_parameters written as divisors.
#pragma once

#include <cstdint>
#include <vector>

namespace tern {

struct Llama3RopeScaling {
    double  factor           = 8.0;
    double  low_freq_factor  = 1.0;
    double  high_freq_factor = 4.0;
    int64_t original_context = 8192;
};

// n_rot / 2 divisors, in f32 as the tensor stores them.
std::vector<float> llama3_rope_freq_factors(double base, int64_t n_rot, const Llama3RopeScaling & s);

}  // namespace tern
