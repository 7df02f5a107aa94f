// Weight layouts of the CPU backend, repacked at load from any supported file type.
#pragma once

#include "backend/backend.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace tern {

// Zero-filled host memory from calloc: a large buffer (a KV cache for the whole context) gets
// fresh zero pages that cost nothing until they are first written.
class CpuBuffer : public Buffer {
public:
    explicit CpuBuffer(size_t n);
    size_t    size_bytes() const override { return size_; }
    uint8_t * data() { return data_.get(); }

private:
    struct Free {
        void operator()(uint8_t * p) const;
    };
    std::unique_ptr<uint8_t, Free> data_;
    size_t                         size_ = 0;
};

// Low-bit linear weight, rows of all parts stacked:
//   codes  [N][K/4]: element c of row r in bits 2(c%4)+1..2(c%4) of byte r*K/4 + c/4, code = value + 1
//          (value in {-1, 0, +1}, +2 only from Q2_0 code 3)
//   scales [N][K/group]: the scale of each group of `group` elements (group = K for I2_S, whose one
//          per-tensor scale is kept per row so the epilogue matches bitnet.cpp: (dot / act) * scale)
//   output_scales [N]: extra multiplier after the product (mainline `bitnet` .scale tensors), 1 otherwise
class CpuLinear : public Weight {
public:
    int64_t              group = 0;
    std::vector<uint8_t> codes;
    std::vector<float>   scales;
    std::vector<float>   output_scales;
};

class CpuNorm : public Weight {
public:
    std::vector<float> w;  // [n_cols]
};

// Embedding / LM head table kept in the file's layout (mmap'd), rows decoded on use.
class CpuEmbedding : public Weight {
public:
    WeightSource src;      // ne = [n_embd, n_vocab]
    size_t       row_bytes = 0;
};

// Repacking (exposed for tests).
std::unique_ptr<CpuLinear>    cpu_pack_linear(std::span<const WeightSource> parts);
std::unique_ptr<CpuNorm>      cpu_pack_norm(const WeightSource & src);
std::unique_ptr<CpuEmbedding> cpu_pack_embedding(const WeightSource & src);

}  // namespace tern
