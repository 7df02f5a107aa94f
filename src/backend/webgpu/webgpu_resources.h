// The device-side objects the WebGPU backend hands out as Buffer / Weight: buffers, linear weights in
// each layout, norms, tables, and the RoPE table. Internal to src/backend/webgpu.
#pragma once

#include "backend/backend.h"
#include "backend/webgpu/webgpu_step.h"
#include "backend/webgpu/webgpu_weights.h"

#include <memory>
#include <vector>

namespace tern {

// A device buffer (storage | copy src | copy dst), padded to whole 16-byte units. It may outlive
// its backend (then only the handle is released).
class GpuBuffer : public Buffer {
public:
    GpuBuffer(std::weak_ptr<StepEncoder> step, WgpuHandle<WGPUBuffer> buffer, size_t size)
        : step_(std::move(step)), buffer_(std::move(buffer)), size_(size) {}
    ~GpuBuffer() override;
    size_t     size_bytes() const override { return size_; }
    WGPUBuffer get() const { return buffer_.get(); }

private:
    std::weak_ptr<StepEncoder> step_;  // drops cached bind groups that use this buffer
    WgpuHandle<WGPUBuffer>     buffer_;
    size_t                     size_;
};

// Linear weight in the layout of webgpu_weights.h.
class GpuLinear : public Weight {
public:
    std::unique_ptr<GpuBuffer> buffer;
    int64_t                    group    = 0;
    int64_t                    n_groups = 0;
    uint32_t                   scales_offset  = 0;  // u32 index
    uint32_t                   oscales_offset = 0;  // u32 index
};

class GpuNorm : public Weight {
public:
    std::unique_ptr<GpuBuffer> buffer;  // [n_cols] f32
    std::vector<float>         host;    // the same values on the host (rope_freqs divisors for the rope table)
};

// A non-ternary linear weight (webgpu_family.cpp, matmul.wgsl): the stacked parts (q/k/v, gate/up),
// each of its own type (Q4_K_M files keep some attn_v as Q6_K), multiplied by one dispatch each.
//   words: f32 [n][K] | f16 / bf16 [n][K/2] | Q8_0 [n][K/32][8] codes | Q4_0 [n][K/32][4] nibbles |
//          Q4_K [n][K/256][36] (the file's 144-byte blocks) | Q6_K [n][K/256][52] (ql, qh, scales)
//   scales: [n][K/32] (Q8_0, Q4_0) or [n][K/256] (Q6_K) f32, the blocks' f16 d; a placeholder otherwise
class GpuMatrix : public Weight {
public:
    struct Part {
        DType                      type = DType::f32;
        int64_t                    first_row = 0, n_rows = 0;
        std::unique_ptr<GpuBuffer> words, scales;
    };
    std::vector<Part> parts;
};

class GpuTable : public Weight {
public:
    std::unique_ptr<GpuBuffer> buffer;  // [n_cols, n_rows] f16 (two per word) or f32
    bool                       f16 = false;
    // Greedy decoding's int8 copy of an F16 head, or of a Q-block head's f32 rows (head_i8_pack.wgsl,
    // TABLE_F32), made on first use:
    // q8 [n_rows][n_cols] int8, info [n_rows] (scale, bound coefficient, scale x ||codes||, 0) f32.
    mutable std::unique_ptr<GpuBuffer> q8, q8_info;
    mutable bool                       q8_failed = false;  // could not be allocated: the exact path
    // A Q8_0 / Q4_0 / Q6_K table's own blocks as a GpuMatrix (webgpu_family.cpp): the LM head reads
    // them (lm_head_q.wgsl) instead of the f32 copy, which serves the embedding rows.
    std::unique_ptr<Weight> blocks;
};

// cos/sin of ggml's NeoX theta recurrence for positions [0, n_pos), computed on the host exactly as
// cpu::rope_neox_head does, uploaded once and grown by doubling.
struct RopeTable {
    int64_t                    n_rot = 0;
    float                      freq_base = 0;
    int64_t                    n_pos = 0;
    std::unique_ptr<GpuBuffer> buffer;  // [n_pos][n_rot / 2] (cos, sin) f32
};
}  // namespace tern
