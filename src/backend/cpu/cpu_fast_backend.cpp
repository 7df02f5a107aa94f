// The fast CPU backend: memory, weights, norms and the ternary linear products (the layout of the
// work: cpu_fast_backend.h).
#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cpu/cpu_matmul.h"
#include "quant/ternary_formats.h"

#include "core/error.h"
#include "core/fp16.h"
#include "quant/block_formats.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace tern {
namespace {

const cpu::Kernels & kernels_for(CpuIsa isa) {
    const cpu::Kernels * k = isa == CpuIsa::avx512 ? cpu::kernels_avx512()
                           : isa == CpuIsa::avx2   ? cpu::kernels_avx2()
                           : isa == CpuIsa::neon   ? cpu::kernels_neon()
                                                   : nullptr;
    TERN_ASSERT(k != nullptr, "no %s kernels in this build", std::string(cpu_isa_name(isa)).c_str());
    return *k;
}

template <class T> void grow(std::vector<T> & v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// The most tiles a thread takes at once from its own range in a one-token product (its units are
// single tiles, StealRanges::next): ~64 KB of codes (2B4T: 6 tiles of 2560 columns, 2 of 6912), so
// a product costs about as many kernel calls as with 64 KB units while its last takes shrink to one
// tile; at most a quarter of a thread's share where the product is small.
int64_t unit_tiles(const cpu::TernaryTiles & t, int n_threads) {
    const int64_t by_bytes = (int64_t{64} << 10) / t.tile_bytes(), by_count = t.n_tiles() / (4 * n_threads);
    return std::max<int64_t>(1, std::min(by_bytes, by_count));
}

// Group sums of the quantized activations of one token.
// Exact integer sums, so in any order: 8 bytes per step (SWAR, portable to every set: each byte
// offset by 128 into 0..255, byte pairs added into four 16-bit lanes, which hold 128 steps of at
// most 510 each), then the rest one by one. The plain byte loop was ~0.1 ms of a 2B4T token at one
// thread (perf: nearly all of norm_quant_token's samples).
int32_t sum_bytes(const int8_t * q, int64_t n) {
    constexpr uint64_t k_lo = 0x00FF00FF00FF00FFull, k_bias = 0x8080808080808080ull;
    int64_t            total = 0, i = 0;
    while (n - i >= 8) {
        const int64_t end = i + std::min<int64_t>((n - i) / 8, 128) * 8;
        uint64_t      acc = 0;
        for (; i < end; i += 8) {
            uint64_t w;
            std::memcpy(&w, q + i, 8);
            w ^= k_bias;
            acc += (w & k_lo) + ((w >> 8) & k_lo);
        }
        total += static_cast<int64_t>((acc & 0xFFFF) + ((acc >> 16) & 0xFFFF) + ((acc >> 32) & 0xFFFF) + (acc >> 48));
    }
    total -= 128 * i;  // every byte of the SWAR steps carried +128
    for (; i < n; ++i) total += q[i];
    return static_cast<int32_t>(total);
}

void group_sums(const int8_t * q, int64_t k, int64_t group, int32_t * out) {
    for (int64_t g = 0; g < k / group; ++g) out[g] = sum_bytes(q + g * group, group);
}

}  // namespace

CpuFastBackend::CpuFastBackend(const CpuOptions & o)
    : pool_(o.n_threads), isa_(o.isa), k_(kernels_for(o.isa)), head_i8_min_bytes_(o.head_i8_min_bytes) {
    scratch_.resize(static_cast<size_t>(pool_.n_threads()));
    base3_ = (o.base3 < 0 ? k_.base3 : o.base3 == 1) && k_.tile_to_base3 != nullptr;
    cpu::set_stream_ahead_from_env();
}

DeviceInfo CpuFastBackend::device_info() const {
    return {"cpu", format("%s kernels%s, %d threads", k_.name, base3_ ? " (base-3 tiles)" : "", pool_.n_threads())};
}

bool CpuFastBackend::supports_linear(DType type) const {
    switch (type) {
        case DType::i2_s: case DType::tq1_0: case DType::tq2_0: case DType::q2_0: case DType::pq2_0: case DType::q1_0:
            return true;
        default: return cpu_matrix_type(type);  // the other families' types, on the reference (cpu_fast_family.cpp)
    }
}
bool CpuFastBackend::supports_embedding(DType type) const {
    return type != DType::i2_s && type != DType::i8 && type != DType::i32;
}

Backend & CpuFastBackend::reference() {
    if (!ref_) ref_ = make_cpu_reference_backend(pool_.n_threads());
    return *ref_;
}

std::unique_ptr<Buffer> CpuFastBackend::alloc(size_t n_bytes, const char *) { return std::make_unique<CpuBuffer>(n_bytes); }
void CpuFastBackend::write(const Tensor & dst, const void * src, size_t n_bytes) {
    TERN_ASSERT(n_bytes <= dst.n_bytes(), "write of %zu bytes into a %zu-byte tensor", n_bytes, dst.n_bytes());
    std::memcpy(cpu_data<uint8_t>(dst), src, n_bytes);
}
void CpuFastBackend::read(const Tensor & src, void * dst, size_t n_bytes) {
    TERN_ASSERT(n_bytes <= src.n_bytes(), "read of %zu bytes from a %zu-byte tensor", n_bytes, src.n_bytes());
    std::memcpy(dst, cpu_data<uint8_t>(src), n_bytes);
}

std::unique_ptr<Weight> CpuFastBackend::load_norm(const WeightSource & src) {
    auto w     = cpu_pack_norm(src);
    w->n_bytes = w->w.size() * sizeof(float);
    for (auto & sc : scratch_) grow(sc.f, w->n_cols);
    return w;
}

std::unique_ptr<Weight> CpuFastBackend::load_linear(std::span<const WeightSource> parts) {
    if (!parts.empty() && !dtype_is_lowbit(parts[0].type)) return load_family_linear(parts);  // cpu_fast_family.cpp
    if (k_.binary_q8_gemm != nullptr && cpu_binary_tiles_fit(parts)) return load_binary_linear(parts);  // cpu_fast_family.cpp
    auto w = cpu_pack_tiles(parts, pool_, base3_ ? &k_ : nullptr);
    w->hint_id = static_cast<int64_t>(next_norm_.size());
    next_norm_.emplace_back();
    for (auto & sc : scratch_) {
        grow(sc.f, w->n_cols);
        grow(sc.q, w->n_cols + 64);
        grow(sc.gsum, w->n_cols / w->group);
        if (sc.tile_bytes.size() < static_cast<size_t>(272 * w->n_cols)) sc.tile_bytes = AlignedBytes(static_cast<size_t>(272 * w->n_cols));
    }
    return w;
}

std::unique_ptr<Weight> CpuFastBackend::load_embedding(const WeightSource & src) {
    if (src.type == DType::i2_s) {
        fail(ErrorKind::unsupported, format("tensor '%s': an i2_s embedding table is not supported", src.name.c_str()));
    }
    auto w       = std::make_unique<CpuFastEmbedding>();
    w->n_cols    = src.ne[0];
    w->n_rows    = src.ne[1];
    w->src       = src;
    w->row_bytes = dtype_row_bytes(src.type, src.ne[0]);
    w->n_bytes   = src.data.size();
    for (auto & sc : scratch_) grow(sc.f, 32 * w->n_cols);  // head_rows: 32 dequantized rows
    if (src.type == DType::f16 && src.data.size() >= head_i8_min_bytes_) build_head_i8(*w);
    if (src.type == DType::q6_k && k_.q6k_rows_dot_i8 != nullptr) build_head_norms(*w);
    w->n_bytes_ids = ids_head_bytes(*w);
    return w;
}

// A copy split into one contiguous slice per thread (read + written), best of 5 after a warm-up.
double CpuFastBackend::measure_copy_bandwidth(size_t n_bytes) {
    n_bytes = std::max<size_t>(n_bytes, 4096);
    AlignedBytes  src(n_bytes), dst(n_bytes);
    const int     n_threads = pool_.n_threads();
    auto          copy      = [&](bool first) {
        pool_.run([&](int t) {
            int64_t b = 0, e = 0;
            ThreadPool::chunk_range(static_cast<int64_t>(n_bytes), 4096, n_threads, t, b, e);
            if (first) std::memset(src.data() + b, 1, static_cast<size_t>(e - b));  // first touch per thread
            std::memcpy(dst.data() + b, src.data() + b, static_cast<size_t>(e - b));
        });
    };
    copy(true);
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
        const auto   t0 = std::chrono::steady_clock::now();
        copy(false);
        const double s  = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s > 0) best = std::max(best, 2.0 * static_cast<double>(n_bytes) / s);
    }
    return best;
}

// Every thread streams its own contiguous slice (as the linear kernels stream their rows), best of
// 7 after a warm-up; the kernels' own read loop.
double CpuFastBackend::measure_read_bandwidth(size_t n_bytes) {
    double best = 0;
    for (double bps : read_sweeps(n_bytes, 7)) best = std::max(best, bps);
    return best;
}

// Each sweep reads the next of `n_slices` slices of n_bytes, so that a slice is read again only after
// at least twice the last-level cache's size of other slices: decoding streams its weights from DRAM
// (860 MB a token for 2B4T), and on session 18's VM (an L3 of 300 MiB) sweeps of one 128 MiB buffer
// read partly from the L3 (one core 20.7 GB/s over 128 MiB vs 13.2-13.8 over 256 MiB to 1 GiB; two
// cores 64 MiB each 27 + 24 vs 15 + 15 over 512 MiB; a standalone copy of the loop, loaded VM).
std::vector<double> CpuFastBackend::read_sweeps(size_t n_bytes, int sweeps) {
    n_bytes = std::max<size_t>(n_bytes, 1 << 20);
    n_bytes = (n_bytes + 4095) & ~size_t{4095};
#ifdef _SC_LEVEL3_CACHE_SIZE  // (glibc's; the browser build's libc has no cache sizes: one slice there)
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#else
    const long llc = 0;
#endif
    const size_t llc_b    = llc > 0 ? static_cast<size_t>(llc) : 0;
    const size_t n_slices = std::min<size_t>(1 + (2 * llc_b + n_bytes - 1) / n_bytes, 16);
    const int    n_threads = pool_.n_threads();
    const bool   first     = read_buf_.size() != n_bytes * n_slices;
    if (first) {
        read_buf_   = AlignedBytes(n_bytes * n_slices, false);
        read_slice_ = 0;
    }
    std::vector<uint64_t> sink(static_cast<size_t>(n_threads) * 8);
    auto                  sweep = [&](size_t slice, bool touch) {
        uint8_t * base = read_buf_.data() + slice * n_bytes;
        pool_.run([&](int t) {
            int64_t b = 0, e = 0;
            ThreadPool::chunk_range(static_cast<int64_t>(n_bytes), 4096, n_threads, t, b, e);
            if (touch) std::memset(base + b, t + 1, static_cast<size_t>(e - b));  // first touch per thread
            sink[static_cast<size_t>(t) * 8] += k_.read_bytes(base + b, e - b);
        });
    };
    if (first) {
        for (size_t s = 0; s < n_slices; ++s) sweep(s, true);
    } else {
        sweep(read_slice_, false);  // untimed
        read_slice_ = (read_slice_ + 1) % n_slices;
    }
    std::vector<double> bps;
    for (int rep = 0; rep < sweeps; ++rep) {
        const auto   t0 = std::chrono::steady_clock::now();
        sweep(read_slice_, false);
        const double s  = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        read_slice_     = (read_slice_ + 1) % n_slices;
        bps.push_back(s > 0 ? static_cast<double>(n_bytes) / s : 0.0);
    }
    if (sink[0] == 0x5eed) std::fputc(' ', stderr);  // keeps the sums observable
    return bps;
}

void CpuFastBackend::embed(const Tensor & x, const Weight & token_embd, const Tensor & tokens) {
    const auto &    e   = static_cast<const CpuEmbedding &>(token_embd);
    const int32_t * ids = cpu_data<int32_t>(tokens);
    float *         out = cpu_data<float>(x);
    for (int64_t t = 0; t < tokens.ne[0]; ++t) {
        const int32_t id = ids[t];
        if (id < 0 || id >= e.n_rows) {
            fail(ErrorKind::invalid_argument,
                 format("token id %d is outside the vocabulary (0..%lld)", id, static_cast<long long>(e.n_rows - 1)));
        }
        dequantize_row(e.src.type, e.src.data.data() + static_cast<size_t>(id) * e.row_bytes, out + t * x.ne[0], e.n_cols);
    }
}

void CpuFastBackend::norm_quant_token(const float * x, const float * w, int64_t k, float eps, float * tmp, int8_t * q,
                                      float * scale, int32_t * gsum, int64_t group) {
    const float mean  = k_.sum_squares(x, k) / static_cast<float>(k);
    const float inv   = 1.0f / std::sqrt(mean + eps);
    const float max   = k_.norm_apply(x, w, inv, tmp, k);
    *scale            = k_.quantize_row(tmp, max, q, k);
    if (gsum) group_sums(q, k, group, gsum);
}

cpu::ActView CpuFastBackend::norm_quant_in_job(int ti, const QuantizedActs & a, const Tensor & x, const CpuNorm & norm,
                                               float eps, int64_t group) {
    const int64_t k     = x.ne[0];
    const int64_t n_tok = x.ne[1];
    TERN_ASSERT(norm.n_cols == k && a.q.ne[0] == k && a.q.ne[1] == n_tok, "norm + quantization shapes");
    Scratch &     sc = scratch_[static_cast<size_t>(ti)];
    const float * in = cpu_data<float>(x);
    if (n_tok == 1) {
        norm_quant_token(in, norm.w.data(), k, eps, sc.f.data(), sc.q.data(), &sc.act_scale, sc.gsum.data(), group);
        return {sc.q.data(), k, &sc.act_scale, sc.gsum.data(), 1, sc.tile_bytes.data()};
    }
    int64_t t0 = 0, t1 = 0;
    ThreadPool::chunk_range(n_tok, 1, pool_.n_threads(), ti, t0, t1);
    int8_t * q     = cpu_data<int8_t>(a.q);
    float *  scale = cpu_data<float>(a.scale);
    const int64_t n_groups = k / group;
    for (int64_t t = t0; t < t1; ++t) {
        norm_quant_token(in + t * k, norm.w.data(), k, eps, sc.f.data(), q + t * k, scale + t, gsum_.data() + t * n_groups,
                         group);
    }
    pool_.barrier();
    return {q, k, scale, gsum_.data(), n_tok, sc.tile_bytes.data()};
}

cpu::ActView CpuFastBackend::acts_in_job(int ti, const QuantizedActs & a, int64_t group) {
    const int64_t k = a.q.ne[0], n_tok = a.q.ne[1], n_groups = k / group;
    const int8_t * q = cpu_data<int8_t>(a.q);
    int64_t       t0 = 0, t1 = 0;
    ThreadPool::chunk_range(n_tok, 1, pool_.n_threads(), ti, t0, t1);
    for (int64_t t = t0; t < t1; ++t) group_sums(q + t * k, k, group, gsum_.data() + t * n_groups);
    pool_.barrier();
    return {q, k, cpu_data<float>(a.scale), gsum_.data(), n_tok, scratch_[static_cast<size_t>(ti)].tile_bytes.data()};
}

void CpuFastBackend::linear_in_job(int ti, const CpuTiledLinear & w, const cpu::ActView & a, float * y, int64_t ldy,
                                   bool accumulate, bool steal, const cpu::Touch * touch) {
    const cpu::TernaryTiles tiles = w.view();
    if (steal) {
        const int     n_threads = pool_.n_threads();
        const int64_t per = unit_tiles(tiles, n_threads);
        cpu::ActView  au = a;
        cpu::Touch    slice;
        for (int64_t u = 0, c = 0; steal_.next(ti, u, c, per);) {
            if (touch != nullptr) {
                int64_t   b = 0, e = 0;
                const int o = StealRanges::owner(n_threads, tiles.n_tiles(), u, b, e);
                slice       = touch[o];
                const int64_t r0 = slice.n_rows * (u - b) / (e - b), r1 = slice.n_rows * (u + c - b) / (e - b);
                slice.base[0] += r0 * slice.stride;
                slice.base[1] += r0 * slice.stride;
                slice.n_rows = r1 - r0;
                au.touch     = &slice;
            }
            k_.ternary_gemm(tiles, u, u + c, au, y, ldy, 0, accumulate);
        }
        next_norm_touch();
        return;
    }
    int64_t t0 = 0, t1 = 0;
    ThreadPool::chunk_range(tiles.n_tiles(), 1, pool_.n_threads(), ti, t0, t1);
    if (t0 < t1) k_.ternary_gemm(tiles, t0, t1, a, y, ldy, 0, accumulate);
    if (a.n_tokens == 1) next_norm_touch();
}

void CpuFastBackend::next_norm_learn(const CpuTiledLinear * product, const Weight * norm) {
    if (last_product_ >= 0) {
        const auto * n                                    = static_cast<const CpuNorm *>(norm);
        next_norm_[static_cast<size_t>(last_product_)] = n != nullptr ? NormHint{n->w.data(), static_cast<int64_t>(n->w.size())}
                                                                      : NormHint{};
    }
    const bool ours = product != nullptr && product->hint_id >= 0 && product->hint_id < static_cast<int64_t>(next_norm_.size());
    last_product_ = cur_product_ = ours ? product->hint_id : -1;  // (a weight another backend loaded: no hint)
    // Read by the job's threads as they finish (next_norm_touch): asked for now, off the critical path.
    if (cur_product_ >= 0) __builtin_prefetch(&next_norm_[static_cast<size_t>(cur_product_)]);
}

void CpuFastBackend::next_norm_touch() const {
    if (cur_product_ < 0) return;
    const NormHint h = next_norm_[static_cast<size_t>(cur_product_)];
    for (int64_t i = 0; i < h.n; i += 16) __builtin_prefetch(h.w + i, 0, 3);
}

bool CpuFastBackend::steal_units(const CpuTiledLinear & w, int64_t n_tok) {
    if (n_tok != 1 || pool_.n_threads() == 1) return false;
    steal_.reset(pool_.n_threads(), w.view().n_tiles());
    return true;
}

void CpuFastBackend::rms_norm_quant(const QuantizedActs & a, const Tensor & x, const Weight & w, float eps) {
    const auto &  nw = static_cast<const CpuNorm &>(w);
    const int64_t k = x.ne[0], n_tok = x.ne[1];
    TERN_ASSERT(nw.n_cols == k && a.q.ne[0] == k, "rms_norm_quant shapes");
    const float * in    = cpu_data<float>(x);
    int8_t *      q     = cpu_data<int8_t>(a.q);
    float *       scale = cpu_data<float>(a.scale);
    pool_.parallel_for(n_tok, 1, [&](int64_t t0, int64_t t1, int ti) {
        Scratch & sc = scratch_[static_cast<size_t>(ti)];
        for (int64_t t = t0; t < t1; ++t) norm_quant_token(in + t * k, nw.w.data(), k, eps, sc.f.data(), q + t * k, scale + t, nullptr, 1);
    });
}

void CpuFastBackend::rms_norm(const Tensor & y, const Tensor & x, const Weight & w, float eps) {
    const auto &  nw = static_cast<const CpuNorm &>(w);
    const int64_t k  = x.ne[0];
    TERN_ASSERT(nw.n_cols == k, "norm of %lld over %lld", static_cast<long long>(nw.n_cols), static_cast<long long>(k));
    const float * in  = cpu_data<float>(x);
    float *       out = cpu_data<float>(y);
    for (int64_t t = 0; t < x.ne[1]; ++t) {
        const float mean = k_.sum_squares(in + t * k, k) / static_cast<float>(k);
        k_.norm_apply(in + t * k, nw.w.data(), 1.0f / std::sqrt(mean + eps), out + t * k, k);
    }
}

void CpuFastBackend::bitlinear(const Tensor & y, const Weight & w, const QuantizedActs & a, bool accumulate) {
    const auto & lw = static_cast<const CpuTiledLinear &>(w);
    TERN_ASSERT(y.ne[0] == lw.n_rows && a.q.ne[0] == lw.n_cols && y.ne[1] == a.q.ne[1], "bitlinear shapes");
    grow(gsum_, a.q.ne[1] * (lw.n_cols / lw.group));
    float *    out   = cpu_data<float>(y);
    const bool steal = steal_units(lw, a.q.ne[1]);
    next_norm_learn(a.q.ne[1] == 1 ? &lw : nullptr, nullptr);
    pool_.run([&](int ti) { linear_in_job(ti, lw, acts_in_job(ti, a, lw.group), out, y.ne[0], accumulate, steal); });
}

void CpuFastBackend::linear(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate) {
    if (in.x.buffer != nullptr && (!dtype_is_lowbit(w.type) || in.norm == nullptr || in.q.q.buffer == nullptr)) {
        Backend::linear(y, w, in, accumulate);  // the other families: matmul (cpu_fast_family.cpp)
        return;
    }
    if (in.x.buffer == nullptr) {
        bitlinear(y, w, in.q, accumulate);
        return;
    }
    TERN_ASSERT(in.norm != nullptr, "a linear input without a norm is not supported yet (issue 54)");
    const QuantizedActs & a  = in.q;
    const auto &          lw = static_cast<const CpuTiledLinear &>(w);
    TERN_ASSERT(y.ne[0] == lw.n_rows && a.q.ne[0] == lw.n_cols && y.ne[1] == a.q.ne[1], "bitlinear shapes");
    grow(gsum_, a.q.ne[1] * (lw.n_cols / lw.group));
    float *    out   = cpu_data<float>(y);
    const bool steal = steal_units(lw, a.q.ne[1]);
    next_norm_learn(a.q.ne[1] == 1 ? &lw : nullptr, in.norm);
    pool_.run([&](int ti) {
        const cpu::ActView av = norm_quant_in_job(ti, a, in.x, static_cast<const CpuNorm &>(*in.norm), in.eps, lw.group);
        linear_in_job(ti, lw, av, out, y.ne[0], accumulate, steal);
    });
}

// Gate rows [r0, r1) and the matching up rows n_ff + [r0, r1), per block of rows, into the thread's
// scratch (whole tiles: a tile may straddle the gate/up boundary), then f = act(gate) * up. With
// steal (one token, steal_glu): every gate tile in stolen units, then every up tile, into shared
// rows; after a barrier each thread's rows of f.
void CpuFastBackend::gate_up_in_job(int ti, const CpuTiledLinear & w, const cpu::ActView & a, float * f,
                                    FfnActivation act, bool steal) {
    const cpu::TernaryTiles tiles = w.view();
    const int64_t           n_ff  = w.n_rows / 2, n_tok = a.n_tokens;
    if (steal) {
        const int64_t per = unit_tiles(tiles, pool_.n_threads()), n_tiles = tiles.n_tiles();
        const int64_t g_end = (n_ff + 15) / 16, u_begin = n_ff / 16;  // gate tiles [0, g_end), up [u_begin, n_tiles)
        for (int64_t u = 0, c = 0; steal_.next(ti, u, c, per);) {
            k_.ternary_gemm(tiles, u, u + c, a, glu_gate_.data(), g_end * 16, 0, false);
        }
        for (int64_t u = 0, c = 0; steal_up_.next(ti, u, c, per);) {
            k_.ternary_gemm(tiles, u_begin + u, u_begin + u + c, a, glu_up_.data(), (n_tiles - u_begin) * 16, u_begin * 16,
                            false);
        }
        next_norm_touch();
        pool_.barrier();
        int64_t r0 = 0, r1 = 0;
        ThreadPool::chunk_range(n_ff, cpu::k_tile_rows, pool_.n_threads(), ti, r0, r1);
        if (r0 < r1) {
            k_.gate_act(glu_gate_.data() + r0, glu_up_.data() + (n_ff + r0 - u_begin * 16), f + r0, r1 - r0,
                        act == FfnActivation::relu2);
        }
        return;
    }
    Scratch &               sc      = scratch_[static_cast<size_t>(ti)];
    int64_t r0 = 0, r1 = 0;
    ThreadPool::chunk_range(n_ff, cpu::k_tile_rows, pool_.n_threads(), ti, r0, r1);
    // Rows per block: many tokens keep a block's gate and up rows in cache for the activation; one
    // token streams the thread's gate rows, then its up rows (two streams switched every 256 rows
    // read 7% slower: bench/cpu_kernels_bench BM_TernaryDecodeLayers).
    const int64_t k_block = n_tok == 1 ? std::max<int64_t>(r1 - r0, 1) : 256;
    grow(sc.gate, n_tok * (k_block + 32));
    grow(sc.up, n_tok * (k_block + 32));
    for (int64_t b0 = r0; b0 < r1; b0 += k_block) {
        const int64_t b1  = std::min(b0 + k_block, r1);
        const int64_t gt0 = b0 / 16, gt1 = (b1 + 15) / 16;
        const int64_t ut0 = (n_ff + b0) / 16, ut1 = (n_ff + b1 + 15) / 16;
        const int64_t ldg = (gt1 - gt0) * 16, ldu = (ut1 - ut0) * 16;
        k_.ternary_gemm(tiles, gt0, gt1, a, sc.gate.data(), ldg, gt0 * 16, false);
        k_.ternary_gemm(tiles, ut0, ut1, a, sc.up.data(), ldu, ut0 * 16, false);
        for (int64_t t = 0; t < n_tok; ++t) {
            k_.gate_act(sc.gate.data() + t * ldg + (b0 - gt0 * 16), sc.up.data() + t * ldu + (n_ff + b0 - ut0 * 16),
                        f + t * n_ff + b0, b1 - b0, act == FfnActivation::relu2);
        }
    }
    if (n_tok == 1) next_norm_touch();
}

void CpuFastBackend::gate_up(const Tensor & f, const Weight & w_gate_up, const QuantizedActs & a, FfnActivation act) {
    const auto & lw = static_cast<const CpuTiledLinear &>(w_gate_up);
    TERN_ASSERT(f.ne[0] == lw.n_rows / 2 && f.ne[1] == a.q.ne[1] && a.q.ne[0] == lw.n_cols, "gate_up shapes");
    grow(gsum_, a.q.ne[1] * (lw.n_cols / lw.group));
    float *    out   = cpu_data<float>(f);
    const bool steal = steal_glu(lw, a.q.ne[1]);
    next_norm_learn(a.q.ne[1] == 1 ? &lw : nullptr, nullptr);
    pool_.run([&](int ti) { gate_up_in_job(ti, lw, acts_in_job(ti, a, lw.group), out, act, steal); });
}

bool CpuFastBackend::steal_glu(const CpuTiledLinear & w, int64_t n_tok) {
    if (n_tok != 1 || pool_.n_threads() == 1) return false;
    const cpu::TernaryTiles tiles = w.view();
    const int64_t n_ff = w.n_rows / 2;
    const int64_t g_end = (n_ff + 15) / 16, u_begin = n_ff / 16;
    grow(glu_gate_, g_end * 16);
    grow(glu_up_, (tiles.n_tiles() - u_begin) * 16);
    steal_.reset(pool_.n_threads(), g_end);
    steal_up_.reset(pool_.n_threads(), tiles.n_tiles() - u_begin);
    return true;
}

void CpuFastBackend::linear_glu(const Tensor & f, const Weight & w_gate_up, const LinearInput & in, FfnActivation act) {
    if (in.x.buffer != nullptr && (!dtype_is_lowbit(w_gate_up.type) || in.norm == nullptr || in.q.q.buffer == nullptr)) {
        Backend::linear_glu(f, w_gate_up, in, act);  // the other families: matmul_glu (cpu_fast_family.cpp)
        return;
    }
    if (in.x.buffer == nullptr) {
        gate_up(f, w_gate_up, in.q, act);
        return;
    }
    TERN_ASSERT(in.norm != nullptr, "a linear input without a norm is not supported yet (issue 54)");
    const QuantizedActs & a  = in.q;
    const auto &          lw = static_cast<const CpuTiledLinear &>(w_gate_up);
    TERN_ASSERT(f.ne[0] == lw.n_rows / 2 && f.ne[1] == a.q.ne[1] && a.q.ne[0] == lw.n_cols, "gate_up shapes");
    grow(gsum_, a.q.ne[1] * (lw.n_cols / lw.group));
    float *    out   = cpu_data<float>(f);
    const bool steal = steal_glu(lw, a.q.ne[1]);
    next_norm_learn(a.q.ne[1] == 1 ? &lw : nullptr, in.norm);
    pool_.run([&](int ti) {
        gate_up_in_job(ti, lw, norm_quant_in_job(ti, a, in.x, static_cast<const CpuNorm &>(*in.norm), in.eps, lw.group), out,
                       act, steal);
    });
}

void CpuFastBackend::argmax(const Tensor & ids, const Tensor & logits) {
    const float * l   = cpu_data<float>(logits);
    int32_t *     out = cpu_data<int32_t>(ids);
    const int64_t n   = logits.ne[0];
    for (int64_t t = 0; t < logits.ne[1]; ++t) {
        const float * row  = l + t * n;
        int64_t       best = 0;
        for (int64_t i = 1; i < n; ++i) {
            if (row[i] > row[best]) best = i;
        }
        out[t] = static_cast<int32_t>(best);
    }
}

}  // namespace tern

namespace tern {
std::unique_ptr<Backend> make_cpu_fast_backend(const CpuOptions & o) {
    TERN_ASSERT(o.isa != CpuIsa::ref && o.isa != CpuIsa::automatic && cpu_isa_available(o.isa), "CPU kernels %s unavailable",
                std::string(cpu_isa_name(o.isa)).c_str());
    return std::make_unique<CpuFastBackend>(o);
}
}  // namespace tern
