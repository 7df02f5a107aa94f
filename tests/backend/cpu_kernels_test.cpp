// The fast CPU kernels (cpu_kernels.h) of every instruction set this machine runs, each against the
// scalar reference (cpu_ops.h) on random data with awkward shapes, bit for bit. Sets the CPU or
// the build lacks report themselves as skipped. (Whole ops and models: backend_ops_test.cpp and
// tests/model run the fast backend against the reference backend.)
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_tiles.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace tern {
namespace {

struct IsaCase {
    CpuIsa isa;
};
void PrintTo(const IsaCase & c, std::ostream * os) { *os << cpu_isa_name(c.isa); }

const cpu::Kernels * kernels_of(CpuIsa isa) {
    return isa == CpuIsa::avx512 ? cpu::kernels_avx512() : isa == CpuIsa::avx2 ? cpu::kernels_avx2() : cpu::kernels_neon();
}

class CpuKernels : public ::testing::TestWithParam<IsaCase> {
protected:
    void SetUp() override {
        if (!cpu_isa_available(GetParam().isa)) {
            GTEST_SKIP() << "no " << cpu_isa_name(GetParam().isa) << " kernels here (" << cpu_feature_list() << ")";
        }
        k_ = kernels_of(GetParam().isa);
    }
    // The set and its variants (the same results by other instructions): AVX-512's base-3 decodes
    // (multiplies, VBMI lookups where the CPU has them), AVX2 without and with AVX-VNNI.
    std::vector<const cpu::Kernels *> variants() const {
        std::vector<const cpu::Kernels *> sets{k_};
        if (GetParam().isa == CpuIsa::avx512) sets = {cpu::kernels_avx512_multiply(), cpu::kernels_avx512_vbmi()};
        if (GetParam().isa == CpuIsa::avx2) sets = {cpu::kernels_avx2_plain(), cpu::kernels_avx2_vnni()};
        sets.erase(std::remove(sets.begin(), sets.end(), nullptr), sets.end());
        return sets;
    }
    const cpu::Kernels * k_ = nullptr;
    std::mt19937         rng_{1234};
    float                normal(float sd = 1.0f) { return std::normal_distribution<float>(0.0f, sd)(rng_); }
};

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// Under qemu (scripts/test_arm64.sh) the sweeps take fewer points.
bool emulated() { return std::getenv("TERN_TEST_EMULATED") != nullptr; }

// A random low-bit tensor [k, n] of `type` (ternary values, Q1_0 binary, Q2_0 with some +2).
std::vector<uint8_t> random_lowbit(DType type, int64_t k, int64_t n, std::mt19937 & rng) {
    std::vector<uint8_t> bytes(dtype_tensor_bytes(type, k, k * n));
    if (type == DType::i2_s) {
        std::vector<int8_t> v(static_cast<size_t>(k * n));
        for (auto & x : v) x = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
        i2s_pack(v.data(), k * n, 0.37f, bytes.data());
        for (int64_t i = 0; i < k * n / 4; i += 97) bytes[static_cast<size_t>(i)] |= 0xC0;  // some code-3 fields (read as 0)
        return bytes;
    }
    const int64_t      group = lowbit_scale_group(type, k);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < n; ++r) {
        for (int64_t g = 0; g < k / group; ++g) {
            const float d = round_to_fp16(0.1f + 0.01f * static_cast<float>(rng() % 50));
            for (int64_t e = 0; e < group; ++e) {
                int v = static_cast<int>(rng() % 3) - 1;
                if (type == DType::q1_0 && v == 0) v = 1;
                if (e == 0 && type != DType::q1_0) v = 1;
                if (type == DType::q2_0 && e == 1) v = 2;
                row[static_cast<size_t>(g * group + e)] = static_cast<float>(v) * d;
            }
        }
        quantize_row(type, row.data(), bytes.data() + r * dtype_row_bytes(type, k), k);
    }
    return bytes;
}

// TERN_CPU_PAGE_AHEAD / TERN_CPU_LINE_AHEAD: byte counts set cpu::page_ahead / cpu::line_ahead,
// anything else is an error that leaves both alone. (The kernels' results do not depend on them: the
// tests here run with their defaults, 8192 and, on Intel CPUs, 4096, and the products above cross
// pages.)
TEST(CpuStreamAhead, TheEnvironmentValuesAreChecked) {
    const int64_t saved_page = cpu::page_ahead, saved_line = cpu::line_ahead;
    for (const char * var : {"TERN_CPU_PAGE_AHEAD", "TERN_CPU_LINE_AHEAD"}) {
        for (const char * bad : {"12x", "-1", "4k"}) {
            setenv(var, bad, 1);
            EXPECT_THROW(cpu::set_stream_ahead_from_env(), Error) << var << "=" << bad;
            EXPECT_EQ(cpu::page_ahead, saved_page) << var << "=" << bad;
            EXPECT_EQ(cpu::line_ahead, saved_line) << var << "=" << bad;
            unsetenv(var);
        }
    }
    setenv("TERN_CPU_PAGE_AHEAD", "4096", 1);
    setenv("TERN_CPU_LINE_AHEAD", "1024", 1);
    cpu::set_stream_ahead_from_env();
    EXPECT_EQ(cpu::page_ahead, 4096);
    EXPECT_EQ(cpu::line_ahead, 1024);
    unsetenv("TERN_CPU_PAGE_AHEAD");
    unsetenv("TERN_CPU_LINE_AHEAD");
    cpu::set_stream_ahead_from_env();  // unset: both kept
    EXPECT_EQ(cpu::page_ahead, 4096);
    EXPECT_EQ(cpu::line_ahead, 1024);
    cpu::page_ahead = saved_page;
    cpu::line_ahead = saved_line;
}

// Ternary products: every type, row counts around a tile, token counts around each kernel's token
// blocks, with and without accumulation and output scales, into a strided, offset output, on every
// variant of the set (variants()).
TEST_P(CpuKernels, TernaryGemmMatchesBitlinearDot) {
    ThreadPool pool(1);
    for (const cpu::Kernels * ks : variants()) {
        for (const bool base3 : {false, true}) {
            if (base3 && !ks->tile_to_base3) continue;
            for (DType type : {DType::i2_s, DType::tq2_0, DType::tq1_0, DType::q2_0, DType::pq2_0, DType::q1_0}) {
                for (const int64_t k : {256, 768}) {
                    for (const int64_t n : {1, 17, 40}) {
                        SCOPED_TRACE(std::string(dtype_name(type)) + " k " + std::to_string(k) + " n " + std::to_string(n) +
                                     (base3 ? " base-3 " : " 2-bit ") + ks->name);
                        const auto   bytes = random_lowbit(type, k, n, rng_);
                        WeightSource src{"w", type, {k, n, 1, 1}, bytes};
                        src.output_scale = n == 17 ? 1.5f : 1.0f;
                        const auto   w     = cpu_pack_tiles({&src, 1}, pool, base3 ? ks : nullptr);
                        const auto   tiles = w->view();
                        const int64_t n_groups = k / w->group;
                        // the packing round-trips the file's values
                        std::vector<int8_t> vals(static_cast<size_t>(k)), want(static_cast<size_t>(k));
                        std::vector<float>  scales(static_cast<size_t>(n_groups));
                        for (int64_t r = 0; r < n; ++r) {
                            cpu_tiles_unpack_row(tiles, r, vals.data());
                            lowbit_decode_row(type, bytes, k * n, r, k, want.data(), scales.data());
                            ASSERT_EQ(vals, want) << "row " << r;
                        }
                        for (const int64_t T : emulated() ? std::vector<int64_t>{1, 3, 9, 17} : std::vector<int64_t>{1, 2, 3, 5, 8, 9, 17, 70}) {
                            std::vector<int8_t>  q(static_cast<size_t>(k * T));
                            std::vector<float>   s(static_cast<size_t>(T));
                            std::vector<int32_t> gs(static_cast<size_t>(T * n_groups));
                            for (auto & v : q) v = static_cast<int8_t>(static_cast<int>(rng_() % 256) - 128);
                            for (int64_t t = 0; t < T; ++t) {
                                s[static_cast<size_t>(t)] = 20.0f + static_cast<float>(rng_() % 1000) / 7.0f;
                                for (int64_t g = 0; g < n_groups; ++g) {
                                    int32_t sum = 0;
                                    for (int64_t i = g * w->group; i < (g + 1) * w->group; ++i) sum += q[static_cast<size_t>(t * k + i)];
                                    gs[static_cast<size_t>(t * n_groups + g)] = sum;
                                }
                            }
                            AlignedBytes       scratch(static_cast<size_t>(272 * k));  // base-3 tiles decoded for many tokens
                            cpu::ActView a{q.data(), k, s.data(), gs.data(), T, scratch.data()};
                            // With a K/V touch (cpu::Touch, a hint; one token): 2 x 7 rows of 200 bytes,
                            // 256 apart, more lines than some ranges have tiles.
                            std::vector<uint8_t> kv_rows(2 * 7 * 256, 1);
                            cpu::Touch           touch;
                            touch.base[0] = kv_rows.data();
                            touch.base[1] = kv_rows.data() + 7 * 256;
                            touch.stride = 256, touch.row_bytes = 200, touch.n_rows = 7;
                            // the tiles from 0 or from 1 (a thread's range, row0 its first row)
                            for (const bool touched : {false, true})
                            for (const int64_t tile0 : {int64_t{0}, int64_t{1}})
                            for (const bool acc : {false, true}) {
                                if (tile0 >= tiles.n_tiles() || (touched && T != 1)) continue;
                                SCOPED_TRACE("tile0 " + std::to_string(tile0) + (touched ? " touched" : ""));
                                a.touch = touched ? &touch : nullptr;
                                const int64_t      ldy = n + 5, row0 = 16 * tile0;
                                std::vector<float> y(static_cast<size_t>(ldy * T)), ref(y.size());
                                for (size_t i = 0; i < y.size(); ++i) y[i] = ref[i] = normal();
                                ks->ternary_gemm(tiles, tile0, tiles.n_tiles(), a, y.data(), ldy, row0, acc);
                                for (int64_t r = row0; r < n; ++r) {
                                    lowbit_decode_row(type, bytes, k * n, r, k, want.data(), scales.data());
                                    for (int64_t t = 0; t < T; ++t) {
                                        float v = cpu::bitlinear_dot(want.data(), scales.data(), w->group, q.data() + t * k,
                                                                     s[static_cast<size_t>(t)], k);
                                        if (src.output_scale != 1.0f) v *= src.output_scale;
                                        float & d = ref[static_cast<size_t>(t * ldy + r - row0)];
                                        d         = acc ? d + v : v;
                                    }
                                }
                                for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(bits(y[i]), bits(ref[i])) << "T " << T << " at " << i;
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_P(CpuKernels, NormAndQuantizationMatchTheReference) {
    for (const int64_t n : {1, 7, 31, 32, 33, 100, 2560, 6912, 40000}) {
        SCOPED_TRACE("n " + std::to_string(n));
        for (const float sd : {1.0f, 1e-8f, 300.0f}) {
            std::vector<float> x(static_cast<size_t>(n)), w(x.size()), y(x.size()), yr(x.size());
            for (auto & v : x) v = normal(sd);
            for (auto & v : w) v = 1.0f + normal(0.2f);
            ASSERT_EQ(bits(k_->sum_squares(x.data(), n)), bits(cpu::sum_squares(x.data(), n)));
            cpu::rms_norm_row(x.data(), w.data(), yr.data(), n, 1e-5f);
            const float scale = 1.0f / std::sqrt(cpu::sum_squares(x.data(), n) / static_cast<float>(n) + 1e-5f);
            const float max   = k_->norm_apply(x.data(), w.data(), scale, y.data(), n);
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits(y[static_cast<size_t>(i)]), bits(yr[static_cast<size_t>(i)])) << i;
            float mr = 0;
            for (float v : yr) mr = std::max(mr, std::fabs(v));
            ASSERT_EQ(bits(max), bits(mr));
            // quantization of x itself (raw magnitudes, ties, the 1e-5 clamp)
            std::vector<int8_t> q(x.size()), qr(x.size());
            float               mx = 0;
            for (float v : x) mx = std::max(mx, std::fabs(v));
            ASSERT_EQ(bits(k_->quantize_row(x.data(), mx, q.data(), n)), bits(cpu::quantize_act_row(x.data(), qr.data(), n)));
            ASSERT_EQ(q, qr);
        }
    }
    const float ties[6] = {2.5f, -3.5f, 0.5f, 1.5f, -0.5f, 127.0f};
    int8_t      q[6], qr[6];
    k_->quantize_row(ties, 127.0f, q, 6);
    cpu::quantize_act_row(ties, qr, 6);
    EXPECT_EQ(std::memcmp(q, qr, 6), 0);
}

TEST_P(CpuKernels, RopeAndF16MatchTheReference) {
    for (const auto & [hd, n_rot] : {std::pair<int64_t, int64_t>{128, 128}, {64, 32}, {80, 48}, {96, 20}}) {
        const int64_t      n_heads = 3, pos = 1234;
        std::vector<float> x(static_cast<size_t>(hd * n_heads)), xr;
        for (auto & v : x) v = normal();
        xr                = x;
        const float        ts = std::pow(10000.0f, -2.0f / static_cast<float>(n_rot));
        std::vector<float> cs(static_cast<size_t>(n_rot / 2)), sn(cs.size());
        float              theta = static_cast<float>(pos);
        for (size_t i = 0; i < cs.size(); ++i) {
            cpu::cos_sin_fixed(theta, &cs[i], &sn[i]);
            theta *= ts;
        }
        k_->rope(x.data(), n_heads, hd, n_rot, cs.data(), sn.data());
        for (int64_t h = 0; h < n_heads; ++h) cpu::rope_neox_head(xr.data() + h * hd, n_rot, pos, 10000.0f);
        for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(bits(x[i]), bits(xr[i])) << "hd " << hd << " at " << i;
    }
    std::vector<float> f = {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e-8f, 5.96e-8f, 2.98e-8f, -3e-5f, 0.1f,
                            std::numeric_limits<float>::infinity(), 1.00048828125f, 1.000732421875f, 3.0e-5f, 7.0f, -2.0f, 0.3333f};
    for (int i = 0; i < 300; ++i) f.push_back(normal(100.0f));
    std::vector<uint16_t> h(f.size());
    k_->f32_to_f16(f.data(), h.data(), static_cast<int64_t>(f.size()));
    for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(h[i], fp32_to_fp16(f[i])) << f[i];
}

// One query's attention over one KV head, as the fast backend calls it for a superblock (attention_cache
// where the set has it, else attention_prepare + attention), against the reference's operations
// (CpuBackend::attend on one superblock): dot_blocked16 scores, exp_fixed, sum_positions, probabilities
// rounded to f16 against an f16 V, P.V in the position order. Depths around the blocks of 16 and 32
// positions and the superblock's end, 1-5 query heads per KV head (the kernels take 4 at a time),
// head dims 16 / 48 / 128, each of K and V f16 or f32, the head at an offset in a row of three heads
// with and without the next head's prefetch hint (next_first), and scores large enough that exp_fixed
// meets its underflow; every output, maximum and sum bit for bit.
TEST_P(CpuKernels, AttentionMatchesTheReference) {
    const std::vector<int64_t> depths = emulated() ? std::vector<int64_t>{1, 17, 33, 100, 512}
                                                   : std::vector<int64_t>{1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 100, 128, 255, 511, 512};
    for (const int64_t hd : {128, 48, 16}) {
        const int64_t stride = 3 * hd, first = hd;
        for (const int64_t n : depths) {
            std::vector<float> kf(static_cast<size_t>(stride * n)), vf(kf.size());
            for (auto & x : kf) x = normal(hd == 16 ? 6.0f : 1.0f);
            for (auto & x : vf) x = normal();
            std::vector<uint16_t> kh(kf.size()), vh(vf.size());
            for (size_t i = 0; i < kf.size(); ++i) {
                kh[i] = fp32_to_fp16(kf[i]);
                vh[i] = fp32_to_fp16(vf[i]);
            }
            for (const int64_t G : {4, 1, 3, 5}) {
                std::vector<float> q(static_cast<size_t>(G * hd));
                for (auto & x : q) x = normal(0.7f);
                const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
                for (int f16 = 0; f16 < 4; ++f16) {
                    const bool k_f16 = (f16 & 1) != 0, v_f16 = (f16 & 2) != 0;
                    // The reference.
                    std::vector<float> want(q.size()), want_m(static_cast<size_t>(G)), want_l(want_m.size());
                    for (int64_t g = 0; g < G; ++g) {
                        std::vector<float> qh(static_cast<size_t>(hd)), row(qh.size()), sc(static_cast<size_t>(n));
                        for (int64_t d = 0; d < hd; ++d) qh[d] = k_f16 ? round_to_fp16(q[g * hd + d]) : q[g * hd + d];
                        float mx = -std::numeric_limits<float>::infinity();
                        for (int64_t p = 0; p < n; ++p) {
                            for (int64_t d = 0; d < hd; ++d) {
                                const size_t at = static_cast<size_t>(p * stride + first + d);
                                row[d]          = k_f16 ? fp16_to_fp32(kh[at]) : kf[at];
                            }
                            sc[p] = cpu::dot_blocked16(qh.data(), row.data(), hd) * scale;
                            mx    = std::max(mx, sc[p]);
                        }
                        for (auto & x : sc) x = cpu::exp_fixed(x - mx);
                        const float l = cpu::sum_positions(sc.data(), n), inv = 1.0f / l;
                        for (auto & x : sc) x = v_f16 ? round_to_fp16(x * inv) : x * inv;
                        cpu::PositionSum pv(static_cast<size_t>(hd));
                        for (int64_t p = 0; p < n; ++p) {
                            for (int64_t d = 0; d < hd; ++d) {
                                const size_t at = static_cast<size_t>(p * stride + first + d);
                                row[d]          = sc[p] * (v_f16 ? fp16_to_fp32(vh[at]) : vf[at]);
                            }
                            pv.add(p, row.data());
                        }
                        pv.finish(n, want.data() + g * hd);
                        want_m[g] = mx;
                        want_l[g] = l;
                    }
                    for (const int64_t next : {int64_t{-1}, 2 * hd}) {
                        std::vector<float> out(q.size(), -1.0f), m(static_cast<size_t>(G)), l(m.size());
                        std::vector<float> scratch(static_cast<size_t>(G * (n + 16) + G * hd));
                        const void *       kp = k_f16 ? static_cast<const void *>(kh.data()) : kf.data();
                        const void *       vp = v_f16 ? static_cast<const void *>(vh.data()) : vf.data();
                        const cpu::CacheView    c{kp, vp, k_f16, v_f16, stride, first, hd, next};
                        const cpu::AttentionJob job{q.data(), G, n, scale, out.data(), m.data(), l.data()};
                        if (k_->attention_cache != nullptr) {
                            k_->attention_cache(c, job, scratch.data());
                        } else {
                            std::vector<float> kt(static_cast<size_t>((n + 15) / 16 * 16 * hd)), v(static_cast<size_t>(n * hd));
                            k_->attention_prepare(c, n, kt.data(), v.data());
                            k_->attention({kt.data(), v.data(), hd, k_f16, v_f16}, job, scratch.data());
                        }
                        const std::string at = "hd " + std::to_string(hd) + " n " + std::to_string(n) + " G " + std::to_string(G) +
                                               (k_f16 ? " f16 K" : " f32 K") + (v_f16 ? " f16 V" : " f32 V") +
                                               (next >= 0 ? " next" : "");
                        for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(bits(out[i]), bits(want[i])) << at << " out " << i;
                        for (int64_t g = 0; g < G; ++g) {
                            ASSERT_EQ(bits(m[g]), bits(want_m[g])) << at << " max " << g;
                            ASSERT_EQ(bits(l[g]), bits(want_l[g])) << at << " sum " << g;
                        }
                    }
                }
            }
        }
    }
}

// Issue 52's block order (cpu_ops.h, "Attention over a row of positions"): the kernels in block mode
// (AttentionJob::blocks) on each superblock of a row longer than 512 positions, as the fast backend
// calls them, against the reference's superblock partials (M, L and the unnormalised O, bit for bit),
// and the row they join to against cpu::attention_row. Rows around the block (32), chunk (64) and
// superblock (512) ends, head dims 16-128, 1-5 query heads (in turn), each of K and V f16 or f32, both kernels
// where a set has both (attention_cache and attention_prepare + attention), and a huge score late in
// the row (early superblocks' and blocks' weights underflow to 0 in the joins).
TEST_P(CpuKernels, AttentionBlockOrderMatchesTheReference) {
    const std::vector<int64_t> rows = emulated() ? std::vector<int64_t>{513, 545, 1025, 1537}
                                                 : std::vector<int64_t>{513, 514, 515, 516, 517, 518, 519, 520, 544, 575,
                                                                        576, 1023, 1024, 1025, 1537, 2048, 4097};
    const std::vector<int64_t> dims = emulated() ? std::vector<int64_t>{128, 48, 16} : std::vector<int64_t>{128, 96, 64, 48, 16};
    int64_t combo = 0;
    for (const int64_t hd : dims) {
        const int64_t stride = 3 * hd, first = hd;
        for (const int64_t n : rows) {
            std::vector<float> kf(static_cast<size_t>(stride * n)), vf(kf.size());
            for (auto & x : kf) x = normal(hd == 16 ? 6.0f : 1.0f);
            for (auto & x : vf) x = normal();
            const int64_t G_all[] = {4, 1, 3, 5, 2};
            {  // one query-head count per (hd, n), in turn (the scalar oracle dominates the time)
                const int64_t      G = G_all[combo++ % 5];
                std::vector<float> q(static_cast<size_t>(G * hd));
                for (auto & x : q) x = normal(0.7f);
                // A huge score late in the row for head 0 (its K row along q's signs), moderate for the others.
                std::vector<float> kr = kf;
                const int64_t      late = n - 1 - static_cast<int64_t>(rng_() % 40);
                for (int64_t d = 0; d < hd; ++d) kr[static_cast<size_t>(late * stride + first + d)] = q[d] < 0 ? -24.0f : 24.0f;
                std::vector<uint16_t> kh(kr.size()), vh(vf.size());
                for (size_t i = 0; i < kr.size(); ++i) {
                    kh[i] = fp32_to_fp16(kr[i]);
                    vh[i] = fp32_to_fp16(vf[i]);
                }
                const float   scale   = 1.0f / std::sqrt(static_cast<float>(hd));
                const int64_t n_super = (n + 511) / 512;
                for (int f16 = 0; f16 < 4; ++f16) {
                    const bool k_f16 = (f16 & 1) != 0, v_f16 = (f16 & 2) != 0;
                    // The head's K and V rows as f32 values (an f16 cache's values exactly), contiguous.
                    std::vector<float> kv32(static_cast<size_t>(n * hd)), vv32(kv32.size());
                    for (int64_t p = 0; p < n; ++p) {
                        for (int64_t d = 0; d < hd; ++d) {
                            const size_t at = static_cast<size_t>(p * stride + first + d), to = static_cast<size_t>(p * hd + d);
                            kv32[to]        = k_f16 ? fp16_to_fp32(kh[at]) : kr[at];
                            vv32[to]        = v_f16 ? fp16_to_fp32(vh[at]) : vf[at];
                        }
                    }
                    // The reference: every head's scores, each superblock's partial, the row.
                    std::vector<float> want_o(static_cast<size_t>(n_super * G * hd)), want_m(static_cast<size_t>(n_super * G)),
                        want_l(want_m.size()), want_row(static_cast<size_t>(G * hd));
                    for (int64_t g = 0; g < G; ++g) {
                        std::vector<float> qh(static_cast<size_t>(hd)), sc(static_cast<size_t>(n));
                        for (int64_t d = 0; d < hd; ++d) qh[d] = k_f16 ? round_to_fp16(q[g * hd + d]) : q[g * hd + d];
                        for (int64_t p = 0; p < n; ++p) sc[p] = cpu::dot_blocked16(qh.data(), kv32.data() + p * hd, hd) * scale;
                        for (int64_t c = 0; c < n_super; ++c) {
                            const int64_t    s0 = c * 512;
                            cpu::AttnPartial part{0.0f, 0.0f, want_o.data() + (c * G + g) * hd};
                            cpu::superblock_partial(sc.data() + s0, std::min<int64_t>(512, n - s0), vv32.data() + s0 * hd, hd, hd,
                                                    v_f16, part);
                            want_m[c * G + g] = part.m;
                            want_l[c * G + g] = part.l;
                        }
                        cpu::attention_row(q.data() + g * hd, kv32.data(), hd, vv32.data(), hd, n, hd, scale, k_f16, v_f16,
                                           want_row.data() + g * hd);
                    }
                    const void * kp = k_f16 ? static_cast<const void *>(kh.data()) : kr.data();
                    const void * vp = v_f16 ? static_cast<const void *>(vh.data()) : vf.data();
                    for (int path = 0; path < 2; ++path) {  // 0: attention_cache, 1: attention_prepare + attention
                        if (path == 0 && k_->attention_cache == nullptr) continue;
                        std::vector<float> out(static_cast<size_t>(n_super * G * hd), -1.0f), m(static_cast<size_t>(n_super * G)),
                            l(m.size());
                        std::vector<float> scratch(static_cast<size_t>(cpu::attention_scratch(G, 512, hd)));
                        std::vector<float> kt(static_cast<size_t>(512 * hd)), v(kt.size());
                        for (int64_t c = 0; c < n_super; ++c) {
                            const int64_t s0 = c * 512, len = std::min<int64_t>(512, n - s0);
                            const size_t  ko = static_cast<size_t>(s0 * stride) * (k_f16 ? 2 : 4);
                            const size_t  vo = static_cast<size_t>(s0 * stride) * (v_f16 ? 2 : 4);
                            const cpu::CacheView c_view{static_cast<const uint8_t *>(kp) + ko, static_cast<const uint8_t *>(vp) + vo,
                                                        k_f16, v_f16, stride, first, hd, -1};
                            cpu::AttentionJob job{q.data(), G, len, scale, out.data() + c * G * hd, m.data() + c * G, l.data() + c * G};
                            job.blocks = true;
                            if (path == 0) {
                                k_->attention_cache(c_view, job, scratch.data());
                            } else {
                                k_->attention_prepare(c_view, len, kt.data(), v.data());
                                k_->attention({kt.data(), v.data(), hd, k_f16, v_f16}, job, scratch.data());
                            }
                        }
                        const std::string at = "hd " + std::to_string(hd) + " n " + std::to_string(n) + " G " + std::to_string(G) +
                                               (k_f16 ? " f16 K" : " f32 K") + (v_f16 ? " f16 V" : " f32 V") +
                                               (path == 0 ? " cache" : " prepared");
                        for (int64_t c = 0; c < n_super; ++c) {
                            for (int64_t g = 0; g < G; ++g) {
                                const size_t i = static_cast<size_t>(c * G + g);
                                ASSERT_EQ(bits(m[i]), bits(want_m[i])) << at << " superblock " << c << " max " << g;
                                ASSERT_EQ(bits(l[i]), bits(want_l[i])) << at << " superblock " << c << " sum " << g;
                                for (int64_t d = 0; d < hd; ++d) {
                                    ASSERT_EQ(bits(out[i * hd + d]), bits(want_o[i * hd + d]))
                                        << at << " superblock " << c << " head " << g << " o " << d;
                                }
                            }
                        }
                        // The row: the superblocks joined in order, then O * (1 / L).
                        for (int64_t g = 0; g < G; ++g) {
                            std::vector<cpu::AttnPartial> parts(static_cast<size_t>(n_super));
                            for (int64_t c = 0; c < n_super; ++c) parts[c] = {m[c * G + g], l[c * G + g], out.data() + (c * G + g) * hd};
                            std::vector<float> o(static_cast<size_t>(hd)), row(o.size());
                            cpu::AttnPartial   joined{0.0f, 0.0f, o.data()};
                            cpu::join_partials(parts.data(), n_super, hd, joined);
                            cpu::finish_partial(joined, hd, row.data());
                            for (int64_t d = 0; d < hd; ++d) {
                                ASSERT_EQ(bits(row[d]), bits(want_row[g * hd + d])) << at << " row head " << g << " dim " << d;
                            }
                        }
                    }
                }
            }
        }
    }
}

// The activation epilogue, SiLU's exp_fixed included: a sweep of every 4099th f32 (every 127069th
// under emulation) plus edges.
TEST_P(CpuKernels, GateActivationsMatchTheReference) {
    std::vector<float> g;
    const uint64_t     step = emulated() ? 4099 * 31 : 4099;
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += step) {
        const float v = std::bit_cast<float>(static_cast<uint32_t>(u));
        if (!std::isnan(v)) g.push_back(v);
    }
    for (float v : {0.0f, -0.0f, 88.8f, -88.8f, 89.0f, -89.0f, 86.99f, 87.5f, std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
        g.push_back(v);
    }
    std::vector<float> u(g.size());
    for (auto & v : u) v = normal();
    std::vector<float> f(g.size());
    for (const bool relu : {true, false}) {
        k_->gate_act(g.data(), u.data(), f.data(), static_cast<int64_t>(g.size()), relu);
        for (size_t i = 0; i < g.size(); ++i) {
            const float want = (relu ? cpu::relu2(g[i]) : cpu::silu(g[i])) * u[i];
            if (std::isnan(want)) {
                ASSERT_TRUE(std::isnan(f[i])) << g[i];
            } else {
                ASSERT_EQ(bits(f[i]), bits(want)) << (relu ? "relu2 " : "silu ") << g[i];
            }
        }
    }
}

TEST_P(CpuKernels, HeadRowsMatchDotF32) {
    for (const int64_t k : {1, 15, 16, 17, 264, 2560}) {
        for (const int64_t n : {1, 7, 8, 9, 33, 40}) {
            const int64_t         T = n == 9 ? 3 : 1;
            std::vector<float>    e(static_cast<size_t>(k * n)), h(static_cast<size_t>(k * T));
            std::vector<uint16_t> e16(e.size());
            for (size_t i = 0; i < e.size(); ++i) {
                e16[i] = fp32_to_fp16(normal(0.05f) * (i % 97 == 0 ? 1000.0f : 1.0f));
                e[i]   = fp16_to_fp32(e16[i]);
            }
            for (auto & v : h) v = round_to_fp16(normal(2.0f));
            if (k >= 2 && n >= 2) {
                // row 1 sums to 1 + 3 2^-24 exactly, a rounding midpoint (ties to even round it up): the checked
                // kernel cannot decide it from an unordered sum and must take the ordered one
                for (int64_t i = 0; i < k; ++i) e16[static_cast<size_t>(k + i)] = fp32_to_fp16(i < 2 ? 1.0f : 0.0f);
                for (int64_t i = 0; i < k; ++i) e[static_cast<size_t>(k + i)] = fp16_to_fp32(e16[static_cast<size_t>(k + i)]);
                h[0] = 1.0f, h[1] = 0x3p-24f;  // an f16 subnormal
            }
            const int64_t      r0 = n > 2 ? 1 : 0;
            std::vector<float> out(static_cast<size_t>((n - r0) * T)), out32(out.size()), outc(out.size());
            k_->f16_rows_dot(e16.data(), k, r0, n, k, h.data(), T, out.data(), n - r0);
            k_->f32_rows_dot(e.data(), k, r0, n, k, h.data(), T, out32.data(), n - r0);
            std::vector<float> e_abs(static_cast<size_t>(n), 0.0f), h_abs(static_cast<size_t>(T), 0.0f);
            for (int64_t r = 0; r < n; ++r) {
                for (int64_t i = 0; i < k; ++i) e_abs[static_cast<size_t>(r)] += std::fabs(e[static_cast<size_t>(r * k + i)]) * 1.001f;
            }
            for (int64_t t = 0; t < T; ++t) {
                for (int64_t i = 0; i < k; ++i) h_abs[static_cast<size_t>(t)] = std::max(h_abs[static_cast<size_t>(t)], std::fabs(h[static_cast<size_t>(t * k + i)]));
            }
            for (const bool h_f16 : {true, false}) {
                if (k_->f16_rows_dot_checked == nullptr) break;
                k_->f16_rows_dot_checked(e16.data(), k, r0, n, k, h.data(), T, outc.data(), n - r0, e_abs.data() + r0, h_abs.data(), h_f16);
                for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(bits(outc[i]), bits(out[i])) << "checked, k " << k << " at " << i;
            }
            if (k_->f32_rows_dot_checked != nullptr) {  // the same rows as f32 (a quantized head's, dequantized)
                k_->f32_rows_dot_checked(e.data(), k, r0, n, k, h.data(), T, outc.data(), n - r0, e_abs.data() + r0, h_abs.data());
                for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(bits(outc[i]), bits(out[i])) << "checked f32, k " << k << " at " << i;
            }
            for (int64_t t = 0; t < T; ++t) {
                for (int64_t r = r0; r < n; ++r) {
                    const float want = cpu::dot_f32(e.data() + r * k, h.data() + t * k, k);
                    ASSERT_EQ(bits(out[static_cast<size_t>(t * (n - r0) + r - r0)]), bits(want)) << "k " << k << " row " << r;
                    ASSERT_EQ(bits(out32[static_cast<size_t>(t * (n - r0) + r - r0)]), bits(want)) << "k " << k << " row " << r;
                }
            }
        }
    }
}

// Quantized head rows dequantized as quant/block_formats.cpp does: quantized random rows, and rows
// of random bytes (every code and scale pattern; scales that are not finite replaced).
TEST_P(CpuKernels, DequantizedRowsMatchTheReference) {
    for (DType type : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k, DType::bf16}) {
        const int64_t        k = 512, n = 5;
        const size_t         rb = dtype_row_bytes(type, k);
        std::vector<uint8_t> rows(rb * n);
        std::vector<float>   x(static_cast<size_t>(k));
        for (int64_t r = 0; r < n; ++r) {
            if (r < 2) {
                for (auto & v : x) v = normal(r == 0 ? 0.05f : 3.0f);
                quantize_row(type, x.data(), rows.data() + r * rb, k);
            } else {
                for (size_t i = 0; i < rb; ++i) rows[r * rb + i] = static_cast<uint8_t>(rng_());
            }
        }
        std::vector<float> want(static_cast<size_t>(k * n)), got(want.size());
        for (int64_t r = 0; r < n; ++r) dequantize_row(type, rows.data() + r * rb, want.data() + r * k, k);
        ASSERT_TRUE(k_->dequant_rows(static_cast<uint32_t>(type), rows.data(), static_cast<int64_t>(rb), n, k, got.data()));
        for (size_t i = 0; i < want.size(); ++i) {
            if (std::isnan(want[i])) {
                ASSERT_TRUE(std::isnan(got[i])) << dtype_name(type) << " at " << i;
            } else {
                ASSERT_EQ(bits(got[i]), bits(want[i])) << dtype_name(type) << " at " << i;
            }
        }
    }
    EXPECT_FALSE(k_->dequant_rows(static_cast<uint32_t>(DType::tq2_0), nullptr, 0, 0, 256, nullptr));
}

// The int8 head's bounds against cpu::i8_head_bounds_ref, bit for bit: row counts around the vector
// of 8, values over many binades, rows whose bounds leave the float range (the FLT_MAX clamps) and
// rows near zero (the 2^-140 pad lands in the subnormals).
TEST_P(CpuKernels, Int8HeadBoundsMatchTheReference) {
    if (k_->i8_head_bounds == nullptr) GTEST_SKIP() << k_->name << " has no i8_head_bounds (the backend uses the reference)";
    std::uniform_real_distribution<double> expo(-12.0, 12.0);
    for (const int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 32, 33, 100}) {
        std::vector<int64_t> dots(static_cast<size_t>(n));
        std::vector<float>   s(static_cast<size_t>(n)), qn(s), dn(s), en(s);
        for (int64_t r = 0; r < n; ++r) {
            const size_t i = static_cast<size_t>(r);
            dots[i] = r % 11 == 3 ? 0 : static_cast<int64_t>(rng_() % 2000001) * static_cast<int64_t>(rng_() % 1000001) - int64_t{1000000000000};
            s[i]    = static_cast<float>(std::pow(10.0, expo(rng_) / 4));
            qn[i]   = static_cast<float>(std::pow(10.0, expo(rng_) / 4));
            dn[i]   = static_cast<float>(std::pow(10.0, expo(rng_) / 4));
            en[i]   = r % 13 == 5 ? 0.0f : static_cast<float>(std::pow(10.0, expo(rng_) / 4));
            if (r % 17 == 6) s[i] = 1e30f;                                         // |f| past FLT_MAX
            if (r % 19 == 7) s[i] = 1e-30f, dots[i] = 1 - 2 * (r % 2), qn[i] = dn[i] = en[i] = 0.0f;  // near 0
        }
        for (const cpu::HeadBoundGrid g : {cpu::HeadBoundGrid{1e-4, 0.3, 20.0}, cpu::HeadBoundGrid{1e10, 1e-3, 1e3},
                                           cpu::HeadBoundGrid{1e-10, 0.0, 0.0}}) {
            std::vector<float> lo(static_cast<size_t>(n) + 1, 7.0f), hi(lo), want_lo(lo), want_hi(lo);
            const float        m    = k_->i8_head_bounds(dots.data(), s.data(), qn.data(), dn.data(), en.data(), n, g, lo.data(), hi.data());
            const float        want = cpu::i8_head_bounds_ref(dots.data(), s.data(), qn.data(), dn.data(), en.data(), n, g,
                                                              want_lo.data(), want_hi.data());
            EXPECT_EQ(m, want) << "n " << n << " S " << g.S;  // (== : a max of -0 and +0 may be either)
            for (size_t i = 0; i <= static_cast<size_t>(n); ++i) {  // [n]: untouched
                ASSERT_EQ(bits(lo[i]), bits(want_lo[i])) << "n " << n << " S " << g.S << " row " << i;
                ASSERT_EQ(bits(hi[i]), bits(want_hi[i])) << "n " << n << " S " << g.S << " row " << i;
            }
        }
    }
}

// Column counts around the kernels' 64- and 128-byte steps, rows a stride apart from r0 > 0.
TEST_P(CpuKernels, Int8HeadDotsAreExact) {
    for (const cpu::Kernels * ks : variants()) {
        SCOPED_TRACE(ks->name);
        for (const int64_t k : {1, 63, 64, 65, 127, 128, 129, 255, 256, 257, 383, 2560, 5000}) {
            const int64_t        n = 9, r0 = 1, pad = k % 3 == 0 ? 0 : 37, stride = k + pad;
            std::vector<int8_t>  q(static_cast<size_t>(stride * n));
            std::vector<int32_t> qs(static_cast<size_t>(n), 0);
            std::vector<uint8_t> hi(static_cast<size_t>(k)), lo(static_cast<size_t>(k));
            std::vector<int>     H(static_cast<size_t>(k));
            for (auto & v : q) v = static_cast<int8_t>(static_cast<int>(rng_() % 255) - 127);
            for (int64_t r = 0; r < n; ++r) {
                for (int64_t i = 0; i < k; ++i) qs[static_cast<size_t>(r)] += q[static_cast<size_t>(r * stride + i)];
            }
            for (int64_t i = 0; i < k; ++i) {
                H[static_cast<size_t>(i)]  = i % 5 == 0 ? (i % 2 ? 32767 : -32767) : static_cast<int>(rng_() % 65535) - 32767;
                hi[static_cast<size_t>(i)] = static_cast<uint8_t>((H[static_cast<size_t>(i)] >> 8) + 128);
                lo[static_cast<size_t>(i)] = static_cast<uint8_t>(H[static_cast<size_t>(i)] & 255);
            }
            std::vector<int64_t> dots(static_cast<size_t>(n), -1);
            ks->i8_rows_dot_i16(q.data(), stride, r0, n, k, hi.data(), lo.data(), qs.data(), dots.data());
            for (int64_t r = r0; r < n; ++r) {
                int64_t want = 0;
                for (int64_t i = 0; i < k; ++i) want += static_cast<int64_t>(q[static_cast<size_t>(r * stride + i)]) * H[static_cast<size_t>(i)];
                ASSERT_EQ(dots[static_cast<size_t>(r - r0)], want) << "k " << k << " row " << r;
            }
            ASSERT_EQ(dots[static_cast<size_t>(n - r0)], -1) << "k " << k;  // past the rows: untouched
        }
    }
    std::vector<uint8_t> b(1000 + 77);
    for (auto & v : b) v = static_cast<uint8_t>(rng_());
    uint64_t want = 0;
    for (size_t i = 0; i + 8 <= b.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, b.data() + i, 8);
        want += w;
    }
    for (size_t i = b.size() / 8 * 8; i < b.size(); ++i) want += b[i];
    EXPECT_EQ(k_->read_bytes(b.data(), static_cast<int64_t>(b.size())), want);
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuKernels,
                         ::testing::Values(IsaCase{CpuIsa::avx512}, IsaCase{CpuIsa::avx2}, IsaCase{CpuIsa::neon}),
                         [](const auto & param_info) { return std::string(cpu_isa_name(param_info.param.isa)); });

}  // namespace
}  // namespace tern
