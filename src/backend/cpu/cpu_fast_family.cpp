// The fast CPU backend's general linear path for the llama / qwen3 / phi3 families
// (docs/architecture.md, "Activation semantics"):
//   Q4_0 / Q8_0 (all parts of one type)  Q-block tiles (cpu_qtiles.cpp) x the input's Q8_0 blocks,
//                                        Kernels::qblock_gemm;
//   Q1_0                                 binary tiles (1 bit per weight) x Q8_0 blocks, Kernels::binary_q8_gemm;
//   Q2_0 / PQ2_0 (and Q1_0 on a set      2-bit ternary tiles x Q8_0 blocks, Kernels::lowbit_q8_gemm
//   without binary_q8_gemm)              (base-3 tiles or a set without it: the same sums in scalar code);
//   I2_S / TQ1_0 / TQ2_0                 per-token int8 (cpu::quantize_act_row) + bitlinear / gate_up;
//   other types (F32/F16/BF16, K-quants, mixed parts) and a set without qblock_gemm: the scalar
//   reference (cpu_matmul.h), which shares this backend's buffers.
// The input's Q8_0 blocks are the reference quantizer's, computed inside the product's pool job.
// rope_kv_append computes each token's angles once for all heads; the paged one runs on the
// reference. Every result is the reference's bits.
#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cpu/cpu_matmul.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tern {
namespace {

template <class T> void grow_vec(std::vector<T> & v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

bool is_matrix(const Weight & w) { return dynamic_cast<const CpuMatrix *>(&w) != nullptr; }
bool is_q8_lowbit(const Weight & w) { return w.type == DType::q1_0 || w.type == DType::q2_0 || w.type == DType::pq2_0; }

// cpu::dot_lowbit_q8_0 on a tiled row's values and the split activations (q, d as f32): the
// fallback of sets without lowbit_q8_gemm and of base-3 tiles.
float lowbit_q8_row(const int8_t * values, const float * scales, int64_t group, const int8_t * q, const float * d,
                    int64_t k) {
    float sumf = 0.0f;
    for (int64_t g = 0; g < k / group; ++g) {
        float s = 0.0f;
        for (int64_t b = g * group; b < (g + 1) * group; b += 32) {
            int sumi = 0;
            for (int j = 0; j < 32; ++j) sumi += values[b + j] * q[b + j];
            s += d[b / 32] * static_cast<float>(sumi);
        }
        sumf += scales[g] * s;
    }
    return sumf;
}

}  // namespace

std::unique_ptr<Weight> CpuFastBackend::load_binary_linear(std::span<const WeightSource> parts) {
    auto w = cpu_pack_binary_tiles(parts, pool_);
    for (auto & sc : scratch_) grow_vec(sc.f, w->n_cols);
    return w;
}

std::unique_ptr<Weight> CpuFastBackend::load_family_linear(std::span<const WeightSource> parts) {
    if (k_.qblock_gemm != nullptr && cpu_qtiles_fit(parts)) {
        auto w = cpu_pack_qtiles(parts, pool_);
        for (auto & sc : scratch_) grow_vec(sc.f, w->n_cols);
        return w;
    }
    return reference().load_linear(parts);  // a CpuMatrix
}

cpu::Q8BlockActs CpuFastBackend::q8_acts_in_job(int ti, const Tensor & x) {
    const int64_t k = x.ne[0], n_tok = x.ne[1], nb = k / 32;
    const float * xp = cpu_data<float>(x);
    int64_t       i0 = 0, i1 = 0;
    ThreadPool::chunk_range(n_tok * nb, 1, pool_.n_threads(), ti, i0, i1);
    if (k_.q8_0_blocks != nullptr) {  // the kernel, a token's run of blocks at a time; fp16 rounding of d here
        for (int64_t i = i0; i < i1;) {
            const int64_t t = i / nb, b = i % nb, n = std::min(i1 - i, nb - b);
            k_.q8_0_blocks(xp + t * k + b * 32, n, q8_q_.data() + t * k + b * 32, q8_d_.data() + i, q8_bsum_.data() + i);
            for (int64_t j = i; j < i + n; ++j) {
                float & d = q8_d_[static_cast<size_t>(j)];
                if (std::isfinite(d)) {
                    d = fp16_to_fp32(fp32_to_fp16(d));
                } else {
                    q8_block_reference(xp + t * k + (b + j - i) * 32, j, q8_q_.data() + t * k + (b + j - i) * 32);
                }
            }
            i += n;
        }
        pool_.barrier();
        return {q8_q_.data(), k, q8_d_.data(), q8_bsum_.data(), n_tok};
    }
    for (int64_t i = i0; i < i1; ++i) {
        const int64_t t = i / nb, b = i % nb;
        q8_block_reference(xp + t * k + b * 32, i, q8_q_.data() + t * k + b * 32);
    }
    pool_.barrier();
    return {q8_q_.data(), k, q8_d_.data(), q8_bsum_.data(), n_tok};
}

// Block i of the input (32 values at x) by the reference quantizer: codes into q, d and bsum into
// q8_d_[i] / q8_bsum_[i].
void CpuFastBackend::q8_block_reference(const float * x, int64_t i, int8_t * q) {
    uint8_t blk[cpu::k_q8_0_block_bytes];
    cpu::quantize_row_q8_0_acts(x, blk, 32);
    std::memcpy(q, blk + 2, 32);
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += q[j];
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    q8_d_[static_cast<size_t>(i)]    = fp16_to_fp32(dh);
    q8_bsum_[static_cast<size_t>(i)] = sum;
}

// Rows of tiles [tile0, tile1) of a Q-tiled or 2-bit-tiled family weight for every token.
void CpuFastBackend::family_gemm(int ti, const Weight & w, const cpu::Q8BlockActs & a, int64_t tile0, int64_t tile1,
                                 float * y, int64_t ldy, int64_t row0, bool accumulate) {
    if (const auto * qw = dynamic_cast<const CpuQTiledLinear *>(&w)) {
        k_.qblock_gemm(qw->view(), tile0, tile1, a, y, ldy, row0, accumulate);
        return;
    }
    if (const auto * bw = dynamic_cast<const CpuBinaryTiledLinear *>(&w)) {
        k_.binary_q8_gemm(bw->view(), tile0, tile1, a, y, ldy, row0, accumulate);
        return;
    }
    const cpu::TernaryTiles tiles = static_cast<const CpuTiledLinear &>(w).view();
    if (!tiles.base3 && k_.lowbit_q8_gemm != nullptr) {
        k_.lowbit_q8_gemm(tiles, tile0, tile1, a, y, ldy, row0, accumulate);
        return;
    }
    Scratch & sc = scratch_[static_cast<size_t>(ti)];
    grow_vec(sc.q, tiles.k);
    const int64_t n_groups = tiles.n_groups();
    for (int64_t r = tile0 * 16; r < std::min(tile1 * 16, tiles.n_rows); ++r) {
        cpu_tiles_unpack_row(tiles, r, sc.q.data());
        float sc_row[256];  // the row's group scales (k / group <= 256 for every Q1_0 / Q2_0 row tern takes)
        TERN_ASSERT(n_groups <= 256, "%lld scale groups in a row", static_cast<long long>(n_groups));
        for (int64_t g = 0; g < n_groups; ++g) sc_row[g] = tiles.scales[((r / 16) * n_groups + g) * 16 + r % 16];
        const float os = tiles.out_scales ? tiles.out_scales[r] : 1.0f;
        for (int64_t t = 0; t < a.n_tokens; ++t) {
            float   v   = lowbit_q8_row(sc.q.data(), sc_row, tiles.group, a.q + t * a.ld, a.d + t * (tiles.k / 32), tiles.k);
            float & dst = y[t * ldy + r - row0];
            v           = tiles.out_scales ? v * os : v;
            dst         = accumulate ? dst + v : v;
        }
    }
}

bool CpuFastBackend::family_kernel(const Weight & w) const {
    if (dynamic_cast<const CpuQTiledLinear *>(&w) != nullptr || dynamic_cast<const CpuBinaryTiledLinear *>(&w) != nullptr) {
        return true;
    }
    return is_q8_lowbit(w) && dynamic_cast<const CpuTiledLinear *>(&w) != nullptr && w.n_cols % 32 == 0 &&
           static_cast<const CpuTiledLinear &>(w).group % 32 == 0;
}

void CpuFastBackend::grow_q8_acts(const Tensor & x) {
    const int64_t k = x.ne[0], n_tok = x.ne[1];
    TERN_ASSERT(k % 32 == 0, "Q8_0 activations of %lld columns", static_cast<long long>(k));
    grow_vec(q8_q_, k * n_tok);
    grow_vec(q8_d_, k / 32 * n_tok);
    grow_vec(q8_bsum_, k / 32 * n_tok);
}

QuantizedActs CpuFastBackend::family_acts(const Tensor & x) {
    const int64_t k = x.ne[0], n_tok = x.ne[1];
    if (!family_q_.buffer || family_q_.tensor.n_elements() < k * n_tok) {
        family_q_ = alloc_tensor(*this, DType::i8, {k, n_tok, 1, 1}, "family int8 acts");
    }
    if (!family_scale_.buffer || family_scale_.tensor.n_elements() < n_tok) {
        family_scale_ = alloc_tensor(*this, DType::f32, {n_tok, 1, 1, 1}, "family act scales");
    }
    QuantizedActs a{family_q_.tensor, family_scale_.tensor};
    a.q.ne     = {k, n_tok, 1, 1};
    a.scale.ne = {n_tok, 1, 1, 1};
    const float * xp = cpu_data<float>(x);
    int8_t *      q  = cpu_data<int8_t>(a.q);
    float *       s  = cpu_data<float>(a.scale);
    for (int64_t t = 0; t < n_tok; ++t) s[t] = cpu::quantize_act_row(xp + t * k, q + t * k, k);
    return a;
}

void CpuFastBackend::matmul(const Tensor & y, const Weight & w, const Tensor & x, bool accumulate) {
    if (is_matrix(w)) return reference().matmul(y, w, x, accumulate);
    if (family_kernel(w)) {
        TERN_ASSERT(y.ne[0] == w.n_rows && x.ne[0] == w.n_cols && y.ne[1] == x.ne[1], "matmul shapes");
        grow_q8_acts(x);
        float *       out     = cpu_data<float>(y);
        const int64_t n_tiles = (w.n_rows + 15) / 16;
        pool_.run([&](int ti) {
            const cpu::Q8BlockActs a = q8_acts_in_job(ti, x);
            int64_t                t0 = 0, t1 = 0;
            ThreadPool::chunk_range(n_tiles, 1, pool_.n_threads(), ti, t0, t1);
            if (t0 < t1) family_gemm(ti, w, a, t0, t1, out, y.ne[0], 0, accumulate);
        });
        return;
    }
    if (is_q8_lowbit(w)) return reference_lowbit_unsupported(w);
    bitlinear(y, w, family_acts(x), accumulate);
}

// Gate rows [r0, r1) and the matching up rows n_ff + [r0, r1), per block of rows, into the thread's
// scratch (whole tiles: a tile may straddle the gate/up boundary), then f = act(gate) * up, as
// gate_up_in_job does for per-token activations.
void CpuFastBackend::matmul_glu(const Tensor & f, const Weight & w, const Tensor & x, FfnActivation act) {
    if (is_matrix(w)) return reference().matmul_glu(f, w, x, act);
    if (!family_kernel(w)) {
        if (is_q8_lowbit(w)) return reference_lowbit_unsupported(w);
        return gate_up(f, w, family_acts(x), act);
    }
    const int64_t n_ff = w.n_rows / 2, n_tok = x.ne[1];
    TERN_ASSERT(f.ne[0] == n_ff && x.ne[0] == w.n_cols && f.ne[1] == n_tok, "matmul_glu shapes");
    grow_q8_acts(x);
    float * out = cpu_data<float>(f);
    pool_.run([&](int ti) {
        const cpu::Q8BlockActs a  = q8_acts_in_job(ti, x);
        constexpr int64_t      kb = 256;  // rows per block
        Scratch &              sc = scratch_[static_cast<size_t>(ti)];
        grow_vec(sc.gate, n_tok * (kb + 32));
        grow_vec(sc.up, n_tok * (kb + 32));
        int64_t r0 = 0, r1 = 0;
        ThreadPool::chunk_range(n_ff, 16, pool_.n_threads(), ti, r0, r1);
        for (int64_t b0 = r0; b0 < r1; b0 += kb) {
            const int64_t b1  = std::min(b0 + kb, r1);
            const int64_t gt0 = b0 / 16, gt1 = (b1 + 15) / 16;
            const int64_t ut0 = (n_ff + b0) / 16, ut1 = (n_ff + b1 + 15) / 16;
            const int64_t ldg = (gt1 - gt0) * 16, ldu = (ut1 - ut0) * 16;
            family_gemm(ti, w, a, gt0, gt1, sc.gate.data(), ldg, gt0 * 16, false);
            family_gemm(ti, w, a, ut0, ut1, sc.up.data(), ldu, ut0 * 16, false);
            for (int64_t t = 0; t < n_tok; ++t) {
                k_.gate_act(sc.gate.data() + t * ldg + (b0 - gt0 * 16), sc.up.data() + t * ldu + (n_ff + b0 - ut0 * 16),
                            out + t * n_ff + b0, b1 - b0, act == FfnActivation::relu2);
            }
        }
    });
}

void CpuFastBackend::reference_lowbit_unsupported(const Weight & w) {
    fail(ErrorKind::unsupported,
         format("%s projections of %lld columns (scale group not a multiple of 32) outside a BitNet model take Q8_0-block "
                "activations, which the fast CPU kernels do not compute",
                std::string(dtype_name(w.type)).c_str(), static_cast<long long>(w.n_cols)),
         "run the scalar reference: TERN_CPU_ISA=ref");
}

// The reference's rope_kv_append (QK-norm by cpu::rms_norm_row, then cpu::rope_head on every q and k
// head, the cache in f16 or f32) with the angles' cos and sin computed once per token instead of once
// per head: rope_head's values depend only on the position, so every head gets the same bits.
// Tokens are split over the threads.
void CpuFastBackend::rope_kv_append(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & s,
                                    int64_t pos0) {
    const int64_t n_q = s.n_head * s.head_dim, n_kv = s.n_head_kv * s.head_dim, rows = n_q + 2 * n_kv;
    const int64_t n_tok = qkv.ne[1], half = s.n_rot / 2;
    TERN_ASSERT(qkv.ne[0] == rows && q.ne[0] == n_q && kv.k.ne[0] == n_kv, "rope_kv_append shapes");
    TERN_ASSERT(pos0 >= 0 && pos0 + n_tok <= kv.k.ne[1], "positions past the KV cache");
    const float * factors     = s.rope_freqs ? static_cast<const CpuNorm *>(s.rope_freqs)->w.data() : nullptr;
    const float * qn          = s.q_norm ? static_cast<const CpuNorm *>(s.q_norm)->w.data() : nullptr;
    const float * kn          = s.k_norm ? static_cast<const CpuNorm *>(s.k_norm)->w.data() : nullptr;
    const float   theta_scale = std::pow(s.rope_freq_base, -2.0f / static_cast<float>(s.n_rot));
    float *       cols        = cpu_data<float>(qkv);
    float *       q_out       = cpu_data<float>(q);
    pool_.parallel_for(n_tok, 1, [&](int64_t t0, int64_t t1, int ti) {
        Scratch & sc = scratch_[static_cast<size_t>(ti)];
        grow_vec(sc.att, 2 * half);
        float * cs = sc.att.data();
        float * sn = cs + half;
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t pos   = pos0 + t;
            float         theta = static_cast<float>(pos);
            for (int64_t i = 0; i < half; ++i) {
                const float a = s.rope_freq_scale * (factors ? theta / factors[i] : theta);
                cpu::cos_sin_fixed(a, &cs[i], &sn[i]);
                theta *= theta_scale;
            }
            float * col = cols + t * rows;
            for (int64_t h = 0; h < s.n_head + s.n_head_kv; ++h) {  // q heads, then k heads
                float *       x    = col + h * s.head_dim;
                const float * norm = h < s.n_head ? qn : kn;
                if (norm) cpu::rms_norm_row(x, norm, x, s.head_dim, s.qk_norm_eps);
                for (int64_t i = 0; i < half; ++i) {
                    const int64_t i0 = s.rope_mode == RopeMode::neox ? i : 2 * i;
                    const int64_t i1 = s.rope_mode == RopeMode::neox ? i + half : 2 * i + 1;
                    const float   x0 = x[i0], x1 = x[i1];
                    x[i0]            = x0 * cs[i] - x1 * sn[i];
                    x[i1]            = x0 * sn[i] + x1 * cs[i];
                }
            }
            std::memcpy(q_out + t * n_q, col, static_cast<size_t>(n_q) * sizeof(float));
            for (int which = 0; which < 2; ++which) {
                const Tensor & cache = which == 0 ? kv.k : kv.v;
                const float *  src   = col + n_q + which * n_kv;
                if (cache.type == DType::f16) {
                    k_.f32_to_f16(src, cpu_data<uint16_t>(cache) + pos * cache.ne[0], n_kv);
                } else {
                    std::memcpy(cpu_data<float>(cache) + pos * cache.ne[0], src, static_cast<size_t>(n_kv) * sizeof(float));
                }
            }
        }
    });
}

void CpuFastBackend::rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Tensor & qkv,
                                          const AttentionShape & s, const KvBatch & batch) {
    reference().rope_kv_append_paged(q, kv, qkv, s, batch);
}

}  // namespace tern
