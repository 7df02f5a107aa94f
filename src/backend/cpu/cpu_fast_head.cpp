// The fast CPU backend's LM head.
//
// Exact logits (lm_head, output_head with logits): each row's dot product summed in double from column 0, as
// cpu::dot_f32 does, 8 rows per vector of doubles (cpu_kernels.h: f16_rows_dot, f32_rows_dot).
//
// Greedy and top-k decoding with an F16 head of CpuOptions::head_i8_min_bytes or more read an int8 copy of
// the table instead (half the bytes; the idea of the WebGPU backend's greedy head, README "The
// greedy head reads an int8 copy") and recompute exactly only the rows that can win:
//   copy:  row e, s = max|e| / 127, q = round(e / s) in [-127, 127]; d = e - s q.
//   input: h (the head input, f16-rounded where the reference rounds it), S = max|h| / 32767,
//          H = round(h / S) (int16), eta = h - S H.
//   f = s S sum(q H) (an exact integer sum, then two double roundings), and for the exact logit X
//   = sum(e h) = s S sum(q H) + s sum(q eta) + sum(d h) (Cauchy-Schwarz):
//          |X - s S sum(q H)| <= s ||q|| ||eta|| + ||d|| ||h||.
//   The reference's value L = (float) of a double sum of X's exact products in order, so
//          |L - X| <= 2^-24 |L| + K 2^-53 ||e|| ||h||   (K <= 2^28: the second term <= 2^-25 ||e|| ||h||),
//   and B = (1 + 2^-20)(s ||q|| ||eta|| + ||d|| ||h||) + 2^-22 (|f| + ||e|| ||h||) bounds |L - f| with
//   room for the norms' and f's own double roundings (relative 2^-40 and less; the stored norms are
//   rounded up). [f - B, f + B] holds L; every row whose upper end reaches the largest lower end
//   (the k-th largest for top-k) is recomputed exactly, and only those can be the answer.
#include "backend/cpu/cpu_fast_backend.h"

#include "core/error.h"
#include "core/fp16.h"
#include "quant/block_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tern {
namespace {

template <class T> void grow(std::vector<T> & v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

constexpr double k_up = 1.0 + 0x1p-20;  // rounding room for norms computed in double

float round_up(double v) {
    float f = static_cast<float>(v);
    if (static_cast<double>(f) < v) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    return f;
}

// head_bounds' per-row bounds: v moved down (up) by 2^-22 |v| + 2^-140 before the conversion,
// so the nearest float is still below (above) v (its rounding error is at most 2^-24 |v| or half a
// subnormal step): a few ulps looser than round_up (and its mirror), without their branch and
// nextafter call on every row (5% of a 2B4T decode step's samples). Finite v only; a v beyond the
// float range gives +-FLT_MAX on the bound's side, as exact rounding would.
float pad_down(double v) {
    return std::min(static_cast<float>(v - std::fabs(v) * 0x1p-22 - 0x1p-140), std::numeric_limits<float>::max());
}
float pad_up(double v) {
    return std::max(static_cast<float>(v + std::fabs(v) * 0x1p-22 + 0x1p-140), -std::numeric_limits<float>::max());
}

}  // namespace

namespace cpu {
float i8_head_bounds_ref(const int64_t * dots, const float * s, const float * q_norm, const float * d_norm,
                         const float * e_norm, int64_t n, const HeadBoundGrid & g, float * lo, float * hi) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < n; ++r) {
        const double f = static_cast<double>(s[r]) * g.S * static_cast<double>(dots[r]);
        const double B = k_up * (static_cast<double>(q_norm[r]) * g.eta_norm + static_cast<double>(d_norm[r]) * g.h_norm) +
                         0x1p-22 * (std::fabs(f) + static_cast<double>(e_norm[r]) * g.h_norm);
        lo[r] = pad_down(f - B);
        hi[r] = pad_up(f + B);
        m     = std::max(m, lo[r]);
    }
    return m;
}
}  // namespace cpu

const float * CpuFastBackend::head_input(const Tensor & h, bool round_input_f16) {
    const int64_t n  = h.ne[0] * h.ne[1];
    const float * hp = cpu_data<float>(h);
    grow(hin_, n);
    for (int64_t i = 0; i < n; ++i) hin_[static_cast<size_t>(i)] = round_input_f16 ? round_to_fp16(hp[i]) : hp[i];
    return hin_.data();
}

// out[t * ld + r] for rows [r0, r1) (out: the logits of row 0).
void CpuFastBackend::head_rows(const CpuEmbedding & e, const float * hin, int64_t n_tok, int64_t r0, int64_t r1,
                               float * out, int64_t ld, Scratch & sc) {
    const int64_t   k   = e.n_cols;
    const uint8_t * tab = e.src.data.data();
    if (e.src.type == DType::f16) {
        k_.f16_rows_dot(reinterpret_cast<const uint16_t *>(tab), k, r0, r1, k, hin, n_tok, out + r0, ld);
    } else if (e.src.type == DType::f32) {
        k_.f32_rows_dot(reinterpret_cast<const float *>(tab), k, r0, r1, k, hin, n_tok, out + r0, ld);
    } else {
        // 32 rows at a time through the thread's scratch, dequantized exactly as the reference does.
        for (int64_t r = r0; r < r1; r += 32) {
            const int64_t nb = std::min<int64_t>(32, r1 - r);
            k_.f32_rows_dot(dequant_head_rows(e, r, nb, sc), k, 0, nb, k, hin, n_tok, out + r, ld);
        }
    }
}

const float * CpuFastBackend::dequant_head_rows(const CpuEmbedding & e, int64_t r, int64_t nb, Scratch & sc) {
    const int64_t   k   = e.n_cols;
    const uint8_t * src = e.src.data.data() + static_cast<size_t>(r) * e.row_bytes;
    grow(sc.f, 32 * k);
    if (!k_.dequant_rows(static_cast<uint32_t>(e.src.type), src, static_cast<int64_t>(e.row_bytes), nb, k, sc.f.data())) {
        for (int64_t j = 0; j < nb; ++j) dequantize_row(e.src.type, src + static_cast<size_t>(j) * e.row_bytes, sc.f.data() + j * k, k);
    }
    return sc.f.data();
}

void CpuFastBackend::lm_head(const Tensor & logits, const Weight & head, const Tensor & h, bool round_input_f16) {
    const auto &  e     = static_cast<const CpuEmbedding &>(head);
    const int64_t n_tok = h.ne[1];
    TERN_ASSERT(h.ne[0] == e.n_cols && logits.ne[0] == e.n_rows && logits.ne[1] == n_tok, "lm_head shapes");
    const float * hin = head_input(h, round_input_f16);
    float *       out = cpu_data<float>(logits);
    // An F16 head with its int8 copy has its rows' sum |e|: the checked any-order sums apply.
    const auto * fe = dynamic_cast<const CpuFastEmbedding *>(&e);
    if (fe != nullptr && !fe->e_abs.empty() && e.src.type == DType::f16 && k_.f16_rows_dot_checked != nullptr) {
        head_max_abs(hin, n_tok, e.n_cols);
        const auto * table = reinterpret_cast<const uint16_t *>(e.src.data.data());
        pool_.parallel_for(e.n_rows, 64, [&](int64_t r0, int64_t r1, int) {
            k_.f16_rows_dot_checked(table, e.n_cols, r0, r1, e.n_cols, hin, n_tok, out + r0, e.n_rows, fe->e_abs.data() + r0,
                                    habs_.data(), round_input_f16);
        });
        return;
    }
    // A quantized head with its rows' sum |e| (build_head_norms): the same check on the dequantized rows.
    if (fe != nullptr && !fe->e_abs.empty() && e.src.type != DType::f16 && e.src.type != DType::f32 &&
        k_.f32_rows_dot_checked != nullptr) {
        head_max_abs(hin, n_tok, e.n_cols);
        pool_.parallel_for(e.n_rows, 32, [&](int64_t r0, int64_t r1, int ti) {
            Scratch & sc = scratch_[static_cast<size_t>(ti)];
            for (int64_t r = r0; r < r1; r += 32) {
                const int64_t nb = std::min<int64_t>(32, r1 - r);
                k_.f32_rows_dot_checked(dequant_head_rows(e, r, nb, sc), e.n_cols, 0, nb, e.n_cols, hin, n_tok, out + r,
                                        e.n_rows, fe->e_abs.data() + r, habs_.data());
            }
        });
        return;
    }
    pool_.parallel_for(e.n_rows, 64, [&](int64_t r0, int64_t r1, int ti) {
        head_rows(e, hin, n_tok, r0, r1, out, e.n_rows, scratch_[static_cast<size_t>(ti)]);
    });
}

void CpuFastBackend::head_max_abs(const float * hin, int64_t n_tok, int64_t k) {
    grow(habs_, n_tok);
    for (int64_t t = 0; t < n_tok; ++t) {
        float m = 0.0f;
        for (int64_t i = 0; i < k; ++i) m = std::max(m, std::fabs(hin[t * k + i]));
        habs_[static_cast<size_t>(t)] = m;
    }
}

void CpuFastBackend::build_head_i8(CpuFastEmbedding & e) {
    const int64_t k = e.n_cols, n = e.n_rows;
    e.i8 = AlignedBytes(static_cast<size_t>(n * k), /*zero=*/false);  // the kernel writes every byte
    e.s.assign(static_cast<size_t>(n), 0.0f);
    e.d_norm = e.q_norm = e.e_norm = e.s;
    e.q_sum.assign(static_cast<size_t>(n), 0);
    e.e_abs.assign(static_cast<size_t>(n), 0.0f);
    const auto * table = reinterpret_cast<const uint16_t *>(e.src.data.data());
    int8_t *     q     = e.i8.as<int8_t>();
    pool_.parallel_for(n, 64, [&](int64_t r0, int64_t r1, int) {
        cpu::HeadI8Row rows[64];
        for (int64_t b = r0; b < r1; b += 64) {
            const int64_t be = std::min(r1, b + 64);
            k_.head_i8_rows(table, b, be, k, q, rows);
            for (int64_t r = b; r < be; ++r) {
                const cpu::HeadI8Row & row = rows[r - b];
                const size_t           ri  = static_cast<size_t>(r);
                e.s[ri]      = row.s;
                e.q_sum[ri]  = row.q_sum;
                e.d_norm[ri] = round_up(std::sqrt(row.dd) * k_up);
                e.q_norm[ri] = round_up(static_cast<double>(row.s) * std::sqrt(row.qq) * k_up);
                e.e_norm[ri] = round_up(std::sqrt(row.ee) * k_up);
                e.e_abs[ri]  = round_up(row.ea * k_up);
            }
        }
    });
    // A table with infinities or NaNs has no useful bound: such a head stays exact-only.
    for (int64_t r = 0; r < n; ++r) {
        if (!std::isfinite(e.e_norm[static_cast<size_t>(r)]) || !std::isfinite(e.s[static_cast<size_t>(r)])) {
            e.i8 = AlignedBytes();
            return;
        }
    }
    e.bound = CpuFastEmbedding::Bound::i8_copy;
}

// A Q6_K head's row norms, from its rows dequantized exactly.
void CpuFastBackend::build_head_norms(CpuFastEmbedding & e) {
    const int64_t k = e.n_cols, n = e.n_rows;
    e.e_norm.assign(static_cast<size_t>(n), 0.0f);
    e.e_abs.assign(static_cast<size_t>(n), 0.0f);
    pool_.parallel_for(n, 32, [&](int64_t r0, int64_t r1, int ti) {
        Scratch & sc = scratch_[static_cast<size_t>(ti)];
        grow(sc.f, 32 * k);
        double ss[32];
        for (int64_t r = r0; r < r1; r += 32) {
            const int64_t nb = std::min<int64_t>(32, r1 - r);
            k_.dequant_rows(static_cast<uint32_t>(e.src.type), e.src.data.data() + static_cast<size_t>(r) * e.row_bytes,
                            static_cast<int64_t>(e.row_bytes), nb, k, sc.f.data());
            k_.row_sumsq(sc.f.data(), nb, k, ss);
            for (int64_t j = 0; j < nb; ++j) {
                e.e_norm[static_cast<size_t>(r + j)] = round_up(std::sqrt(ss[j]) * k_up);
                double        ea  = 0;  // sum |e| (k terms of at most 2^-53 relative error each: k_up covers them)
                const float * row = sc.f.data() + j * k;
                for (int64_t i = 0; i < k; ++i) ea += std::fabs(static_cast<double>(row[i]));
                e.e_abs[static_cast<size_t>(r + j)] = round_up(ea * k_up);
            }
        }
    });
    for (float v : e.e_norm) {
        if (!std::isfinite(v)) return;  // a scale that is not finite: exact only
    }
    e.bound = CpuFastEmbedding::Bound::q6_k;
}

size_t CpuFastBackend::ids_head_bytes(const CpuFastEmbedding & e) {
    if (e.bound == CpuFastEmbedding::Bound::none) return e.n_bytes;
    const size_t rows = static_cast<size_t>(e.n_rows);
    if (e.bound == CpuFastEmbedding::Bound::q6_k) return e.n_bytes + sizeof(float) * rows;  // + e_norm
    return e.i8.size() + 5 * sizeof(float) * rows;  // + s, the norms, q_sum
}

// Lower and upper bounds of rows [r0, r1) for the current head input (grid_, hgrid_ / h8_).
float CpuFastBackend::head_bounds(const CpuFastEmbedding & e, const float *, int64_t r0, int64_t r1, Scratch & sc) {
    const int64_t  k = e.n_cols;
    const HeadGrid g = grid_;
    float          m = -std::numeric_limits<float>::infinity();
    grow(sc.dots, 256);
    std::vector<double> & fd = sc.fd;
    grow(fd, 256);
    // Rows per kernel call: the int8 head's bound epilogue for 32 rows is short enough to overlap
    // the rows' loads still in flight (256 left the stream idle while it ran: head 10.1 -> 9.8 ms
    // per 2B4T token at 1 thread).
    const int64_t rows_per_call = e.bound == CpuFastEmbedding::Bound::i8_copy ? 32 : 256;
    for (int64_t b = r0; b < r1; b += rows_per_call) {
        const int64_t be = std::min(r1, b + rows_per_call);
        if (e.bound == CpuFastEmbedding::Bound::i8_copy) {
            const uint8_t * g_hi = hgrid_.data();
            k_.i8_rows_dot_i16(e.i8.as<int8_t>(), k, b, be, k, g_hi, g_hi + k, e.q_sum.data(), sc.dots.data());
            const size_t             o  = static_cast<size_t>(b);
            const cpu::HeadBoundGrid hg = {g.S, g.eta_norm, g.h_norm};
            auto *                   fn = k_.i8_head_bounds != nullptr ? k_.i8_head_bounds : cpu::i8_head_bounds_ref;
            m = std::max(m, fn(sc.dots.data(), e.s.data() + o, e.q_norm.data() + o, e.d_norm.data() + o, e.e_norm.data() + o,
                               be - b, hg, lo_.data() + o, hi_.data() + o));
        } else {
            // Q6_K: the table's own codes against h on an 8-bit grid; B adds the f32 accumulation's
            // rounding (cpu_kernels.h: q6k_rows_dot_i8), sum |dsc D| <= ||e|| ||h8|| (1 + 2^-24).
            k_.q6k_rows_dot_i8(e.src.data.data(), static_cast<int64_t>(e.row_bytes), b, be, k, h8_.as<int8_t>(), h8_sum4_.data(),
                               fd.data());
            const double acc_err = g.S * (static_cast<double>(k) / 16.0 + 2.0) * 0x1p-23 * k_up * g.h8_norm;
            for (int64_t r = b; r < be; ++r) {
                const size_t ri = static_cast<size_t>(r);
                const double en = static_cast<double>(e.e_norm[ri]);
                const double f  = g.S * fd[static_cast<size_t>(r - b)];
                const double B  = k_up * en * g.eta_norm + acc_err * en + 0x1p-22 * (std::fabs(f) + en * g.h_norm);
                lo_[ri] = pad_down(f - B);
                hi_[ri] = pad_up(f + B);
                m       = std::max(m, lo_[ri]);
            }
        }
    }
    return m;
}

bool CpuFastBackend::head_bounded_top(const CpuFastEmbedding & e, const float * hin, int64_t top_k, float * logits,
                                      int32_t * best_out) {
    const int64_t k = e.n_cols, n = e.n_rows;
    double        maxh = 0;
    for (int64_t i = 0; i < k; ++i) {
        if (!std::isfinite(hin[i])) return false;
        maxh = std::max(maxh, std::fabs(static_cast<double>(hin[i])));
    }
    // The input on the copy's grid: 16-bit (H as its two bytes) for the int8 copy, 8-bit for Q6_K.
    const bool   i8   = e.bound == CpuFastEmbedding::Bound::i8_copy;
    const double top  = i8 ? 32767.0 : 127.0;
    const double S    = maxh > 0 ? maxh / top : 1.0;
    double       hh = 0, ee = 0, h8h8 = 0;
    if (hgrid_.size() < static_cast<size_t>(2 * k)) hgrid_ = AlignedBytes(static_cast<size_t>(2 * k));
    if (h8_.size() < static_cast<size_t>(k)) h8_ = AlignedBytes(static_cast<size_t>(k));
    grow(h8_sum4_, k / 4 + 1);
    uint8_t * grid = hgrid_.data();
    int8_t *  h8   = h8_.as<int8_t>();
    for (int64_t i = 0; i < k; ++i) {
        const double v = std::clamp(std::nearbyint(static_cast<double>(hin[i]) / S), -top, top);
        const int    H = static_cast<int>(v);
        if (i8) {
            grid[i]     = static_cast<uint8_t>((H >> 8) + 128);  // arithmetic shift: floor(H / 256)
            grid[k + i] = static_cast<uint8_t>(H & 255);
        } else {
            h8[i] = static_cast<int8_t>(H);
            if (i % 4 == 0) h8_sum4_[static_cast<size_t>(i / 4)] = 0;
            h8_sum4_[static_cast<size_t>(i / 4)] += H;
            h8h8 += v * v;
        }
        const double eta = static_cast<double>(hin[i]) - S * v;
        hh += static_cast<double>(hin[i]) * hin[i];
        ee += eta * eta;
    }
    grid_ = {S, std::sqrt(hh) * k_up, std::sqrt(ee) * k_up, std::sqrt(h8h8) * k_up};
    grow(lo_, n);
    grow(hi_, n);
    const int n_threads = pool_.n_threads();
    // Pass 1: bounds of every row, each thread's largest lower bound, and for top-k its k largest
    // lower bounds (the k largest of all rows are among the threads' k largest: the merge below
    // selects the same k-th value a selection over every row would, without a serial pass over them).
    const int64_t kk = std::min(top_k, n);
    grow(top_lo_, n_threads * kk);
    std::fill(top_lo_.begin(), top_lo_.begin() + n_threads * kk, -std::numeric_limits<float>::infinity());
    // Units of 16 rows (one unit of all rows on one thread), each thread's own from the front up to 4
    // at a time, then the others' from their backs one at a time (StealRanges: the halves of a
    // 2-thread pass rarely end together); a thread's candidates are the rows it bounded, whichever
    // they were.
    const int64_t k_unit = n_threads > 1 ? 16 : std::max<int64_t>(n, 1);
    steal_.reset(n_threads, (n + k_unit - 1) / k_unit);
    pool_.run([&](int ti) {
        Scratch & sc    = scratch_[static_cast<size_t>(ti)];
        float     m     = -std::numeric_limits<float>::infinity();
        int64_t   n_own = 0;  // rows bounded by this thread (candidates in sc.cand when kk > 1)
        if (kk > 1) grow(sc.cand, n);
        for (int64_t u = 0, c = 0; steal_.next(ti, u, c, 4);) {
            const int64_t r0 = u * k_unit, r1 = std::min(n, (u + c) * k_unit);
            m = std::max(m, head_bounds(e, hin, r0, r1, sc));
            if (kk > 1) std::copy(lo_.begin() + r0, lo_.begin() + r1, sc.cand.begin() + n_own);
            n_own += r1 - r0;
        }
        float * mine = top_lo_.data() + ti * kk;
        if (kk <= 1) {
            mine[0] = m;
            return;
        }
        const int64_t nk = std::min(kk, n_own);
        if (nk == 0) return;
        std::nth_element(sc.cand.begin(), sc.cand.begin() + (nk - 1), sc.cand.begin() + n_own, std::greater<float>());
        std::copy(sc.cand.begin(), sc.cand.begin() + nk, mine);
    });
    std::nth_element(top_lo_.begin(), top_lo_.begin() + (kk - 1), top_lo_.begin() + n_threads * kk, std::greater<float>());
    const float thresh = top_lo_[static_cast<size_t>(kk - 1)];
    // Pass 2: the rows whose upper bound reaches the threshold, exactly: gathered 8 at a time into
    // the thread's scratch for the exact kernel (f16 rows copied, Q6_K rows dequantized).
    std::vector<std::pair<float, int64_t>> best(static_cast<size_t>(n_threads), {-std::numeric_limits<float>::infinity(), -1});
    pool_.parallel_for(n, 64, [&](int64_t r0, int64_t r1, int ti) {
        Scratch & sc = scratch_[static_cast<size_t>(ti)];
        auto &    bt = best[static_cast<size_t>(ti)];
        grow(sc.f, 8 * k);
        int64_t cand[8];
        float   vals[8];
        int64_t nc    = 0;
        auto    flush = [&] {
            if (i8) {
                k_.f16_rows_dot(reinterpret_cast<const uint16_t *>(sc.f.data()), k, 0, nc, k, hin, 1, vals, nc);
            } else {
                k_.f32_rows_dot(sc.f.data(), k, 0, nc, k, hin, 1, vals, nc);
            }
            for (int64_t j = 0; j < nc; ++j) {
                if (logits) logits[cand[j]] = vals[j];
                if (bt.second < 0 || vals[j] > bt.first) bt = {vals[j], cand[j]};
            }
            nc = 0;
        };
        for (int64_t r = r0; r < r1; ++r) {
            if (hi_[static_cast<size_t>(r)] < thresh) {
                if (logits) logits[r] = -std::numeric_limits<float>::infinity();
                continue;
            }
            const uint8_t * src = e.src.data.data() + static_cast<size_t>(r) * e.row_bytes;
            if (i8) {
                std::memcpy(reinterpret_cast<uint16_t *>(sc.f.data()) + nc * k, src, static_cast<size_t>(k) * sizeof(uint16_t));
            } else {
                k_.dequant_rows(static_cast<uint32_t>(e.src.type), src, static_cast<int64_t>(e.row_bytes), 1, k, sc.f.data() + nc * k);
            }
            cand[nc++] = r;
            if (nc == 8) flush();
        }
        if (nc > 0) flush();
    });
    if (best_out) {
        std::pair<float, int64_t> b{-std::numeric_limits<float>::infinity(), -1};
        for (const auto & t : best) {  // threads' ranges are in row order: ">" keeps the lowest index
            if (t.second >= 0 && (b.second < 0 || t.first > b.first)) b = t;
        }
        *best_out = static_cast<int32_t>(b.second);
    }
    return true;
}

void CpuFastBackend::output_head(const HeadOutput & out, const Weight & head, const LinearInput & in,
                                 bool round_input_f16) {
    const auto * e       = dynamic_cast<const CpuFastEmbedding *>(&head);
    const bool   ids     = out.ids.buffer != nullptr;
    const bool   bounded = e != nullptr && e->bound != CpuFastEmbedding::Bound::none && in.x.ne[1] == 1 &&
                         (ids || (out.top_k >= 1 && out.top_k < e->n_rows));
    if (!bounded) {
        Backend::output_head(out, head, in, round_input_f16);
        return;
    }
    next_norm_learn(nullptr, in.norm);
    Tensor h = in.x;
    if (in.norm != nullptr) {
        rms_norm(in.h, in.x, *in.norm, in.eps);
        h = in.h;
    }
    const float * hin = head_input(h, round_input_f16);
    if (ids) {
        int32_t best = -1;
        if (head_bounded_top(*e, hin, 1, nullptr, &best)) {
            *cpu_data<int32_t>(out.ids) = best;
            return;
        }
    } else if (head_bounded_top(*e, hin, out.top_k, cpu_data<float>(out.logits), nullptr)) {
        return;
    }
    lm_head(out.logits, head, h, round_input_f16);  // a non-finite input: the exact head
    if (ids) argmax(out.ids, out.logits);
}

}  // namespace tern
