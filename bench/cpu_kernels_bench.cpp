// Micro-benchmarks of the fast CPU kernels (one thread, Google Benchmark; configure with
// -DTERN_BUILD_BENCH=ON): the ternary products at decode and prompt shapes, the heads, attention
// and the read loop, each against the kernel set named by TERN_CPU_ISA (default: the best here).
// CPU time, not wall time, is what to compare on a shared machine.
//   build/bin/tern_cpu_kernels_bench --benchmark_filter=Ternary --benchmark_min_time=0.5
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_tiles.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <ctime>
#include <cstring>
#include <random>
#include <vector>

namespace tern {
namespace {

// Looked up once: kernels_avx2() asks CPUID on each call, which traps in a VM (the AVX2 attention
// benches, one lookup per KV head, had spent half their samples there).
const cpu::Kernels & kernels() {
    static const cpu::Kernels & set = [] () -> const cpu::Kernels & {
        const CpuIsa isa = cpu_isa_resolve(CpuIsa::automatic);
        const cpu::Kernels * k = isa == CpuIsa::avx512 ? cpu::kernels_avx512() : isa == CpuIsa::avx2 ? cpu::kernels_avx2()
                                                                                                     : cpu::kernels_neon();
        if (!k) throw std::runtime_error("no fast kernels on this machine");
        cpu::set_stream_ahead_from_env();  // TERN_CPU_PAGE_AHEAD / _LINE_AHEAD, as the fast backend reads them
        return *k;
    }();
    return set;
}

struct Linear {
    std::vector<uint8_t>            bytes;
    std::unique_ptr<CpuTiledLinear> w;
};

Linear make_linear(int64_t k, int64_t n, bool base3) {
    std::mt19937        rng(1);
    std::vector<int8_t> v(static_cast<size_t>(k * n));
    for (auto & x : v) x = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
    Linear l;
    l.bytes.resize(static_cast<size_t>(k * n / 4 + 32));
    i2s_pack(v.data(), k * n, 0.5f, l.bytes.data());
    ThreadPool         pool(1);
    const WeightSource src{"w", DType::i2_s, {k, n, 1, 1}, l.bytes};
    l.w = cpu_pack_tiles({&src, 1}, pool, base3 ? &kernels() : nullptr);
    return l;
}

// The set that runs tiles variant v: 0 2-bit tiles, 1 base-3 decoded with multiplies, 2 base-3
// looked up (AVX-512 VBMI), 3 2-bit tiles on AVX2 without AVX-VNNI (TERN_CPU_ISA=avx2); other sets
// run their own for every v.
const cpu::Kernels * tiles_kernels(int64_t v) {
    if (&kernels() == cpu::kernels_avx512() || &kernels() == cpu::kernels_avx512_multiply()) {
        return v == 1 ? cpu::kernels_avx512_multiply() : v == 2 ? cpu::kernels_avx512_vbmi() : &kernels();
    }
    if (v == 3 && cpu::kernels_avx2_plain() != nullptr && &kernels() == cpu::kernels_avx2()) return cpu::kernels_avx2_plain();
    return &kernels();
}

// args: K, N, tokens, tiles (tiles_kernels)
void BM_TernaryGemm(benchmark::State & st) {
    const int64_t k = st.range(0), n = st.range(1), T = st.range(2);
    const cpu::Kernels * ks = tiles_kernels(st.range(3));
    if (!ks) {
        st.SkipWithError("no VBMI here");
        return;
    }
    const auto    l = make_linear(k, n, st.range(3) == 1 || st.range(3) == 2);
    AlignedBytes  scratch(static_cast<size_t>(272 * k));
    std::vector<int8_t>  q(static_cast<size_t>(k * T), 3);
    std::vector<float>   s(static_cast<size_t>(T), 40.0f), y(static_cast<size_t>(n * T));
    std::vector<int32_t> gs(static_cast<size_t>(T), 3 * static_cast<int32_t>(k));
    const cpu::ActView   a{q.data(), k, s.data(), gs.data(), T, scratch.data()};
    const auto           tiles = l.w->view();
    for (auto _ : st) {
        ks->ternary_gemm(tiles, 0, tiles.n_tiles(), a, y.data(), n, 0, false);
        benchmark::DoNotOptimize(y.data());
    }
    st.counters["GMAC/s"]  = benchmark::Counter(static_cast<double>(k * n * T) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    st.counters["weights GB/s"] = benchmark::Counter(static_cast<double>(l.w->codes.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TernaryGemm)->ArgsProduct({{2560}, {110592, 13824}, {1, 64}, {0, 1, 2}})->Args({6912, 2560, 1, 1})
    ->Args({6912, 2560, 1, 2})->Args({6912, 2560, 64, 1})->Args({2560, 13824, 128, 1})->Args({2560, 13824, 128, 2})
    ->Args({2560, 110592, 1, 3})->Args({2560, 442368, 1, 0})->Args({2560, 13824, 1, 3})->Args({2560, 13824, 64, 3});

// One token through the ternary products of the 2B4T shapes, 30 layers in order (qkv 3840 x 2560,
// o 2560 x 2560, gate+up 13824 x 2560, down 2560 x 6912: 521 MB of tiles, so each layer's weights
// come from DRAM as in decoding). Arg: 0 every product whole, 1 gate+up in blocks of 256 gate rows
// then 256 up rows (CpuFastBackend::gate_up_in_job's order).
struct DecodeLayers {
    std::vector<Linear>            shapes;  // qkv, o, gate+up, down
    std::vector<AlignedBytes>      codes;   // [layer][shape]: a copy of the shape's codes
    std::vector<cpu::TernaryTiles> views;
};
const DecodeLayers & decode_layers() {
    static const DecodeLayers d = [] {
        DecodeLayers l;
        for (auto [k, n] : {std::pair<int64_t, int64_t>{2560, 3840}, {2560, 2560}, {2560, 13824}, {6912, 2560}}) l.shapes.push_back(make_linear(k, n, false));
        for (int layer = 0; layer < 30; ++layer) {
            for (const auto & s : l.shapes) {
                AlignedBytes c(s.w->codes.size(), false);
                std::memcpy(c.data(), s.w->codes.data(), c.size());
                cpu::TernaryTiles v = s.w->view();
                v.codes             = c.data();
                l.views.push_back(v);
                l.codes.push_back(std::move(c));
            }
        }
        return l;
    }();
    return d;
}
void BM_TernaryDecodeLayers(benchmark::State & st) {
    const DecodeLayers & d = decode_layers();
    const int64_t        k_max = 6912;
    AlignedBytes         scratch(static_cast<size_t>(272 * k_max));
    std::vector<int8_t>  q(static_cast<size_t>(k_max), 3);
    std::vector<float>   s(1, 40.0f), y(13824);
    std::vector<int32_t> gs(1);
    double               bytes = 0;
    for (const auto & l : d.codes) bytes += static_cast<double>(l.size());
    for (auto _ : st) {
        for (const auto & v : d.views) {
            gs[0] = 3 * static_cast<int32_t>(v.k);
            const cpu::ActView a{q.data(), v.k, s.data(), gs.data(), 1, scratch.data()};
            if (st.range(0) == 1 && v.n_rows == 13824) {
                for (int64_t b = 0; b < 6912; b += 256) {
                    kernels().ternary_gemm(v, b / 16, (b + 256) / 16, a, y.data(), 256, b, false);
                    kernels().ternary_gemm(v, (6912 + b) / 16, (6912 + b + 256) / 16, a, y.data() + 6912, 256, 6912 + b, false);
                }
            } else {
                kernels().ternary_gemm(v, 0, v.n_tiles(), a, y.data(), v.n_rows, 0, false);
            }
        }
        benchmark::DoNotOptimize(y.data());
    }
    st.counters["weights GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TernaryDecodeLayers)->Arg(0)->Arg(1);

// args: rows, 1 for AVX2 without AVX-VNNI (TERN_CPU_ISA=avx2)
void BM_Int8Head(benchmark::State & st) {
    const int64_t        k = 2560, n = st.range(0);
    const cpu::Kernels & ks = st.range(1) == 1 && cpu::kernels_avx2_plain() && &kernels() == cpu::kernels_avx2() ? *cpu::kernels_avx2_plain()
                                                                                                                   : kernels();
    AlignedBytes         q(static_cast<size_t>(k * n)), hl(static_cast<size_t>(2 * k));
    std::memset(q.data(), 5, q.size());
    std::memset(hl.data(), 130, hl.size());
    std::vector<int32_t> qs(static_cast<size_t>(n), 0);
    std::vector<int64_t> dots(static_cast<size_t>(n));
    for (auto _ : st) {
        ks.i8_rows_dot_i16(q.as<int8_t>(), k, 0, n, k, hl.data(), hl.data() + k, qs.data(), dots.data());
        benchmark::DoNotOptimize(dots.data());
    }
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(k * n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Int8Head)->Args({131072, 0})->Args({4096, 0})->Args({65536, 0})->Args({4096, 1})->Args({65536, 1});

// The int8 head's bounds of a 2B4T head's 128256 rows, 32 rows per call as the backend makes them;
// arg: 0 the scalar reference (cpu::i8_head_bounds_ref), 1 the set's kernel.
void BM_Int8HeadBounds(benchmark::State & st) {
    const int64_t        n = 128256;
    std::vector<int64_t> dots(static_cast<size_t>(n));
    std::vector<float>   s(static_cast<size_t>(n), 0.01f), qn(s), dn(s), en(s), lo(s), hi(s);
    std::mt19937         rng(1);
    for (auto & d : dots) d = static_cast<int64_t>(rng() % 2000000) - 1000000;
    auto * fn = st.range(0) == 1 && kernels().i8_head_bounds != nullptr ? kernels().i8_head_bounds : cpu::i8_head_bounds_ref;
    const cpu::HeadBoundGrid g{1e-4, 0.3, 20.0};
    for (auto _ : st) {
        float m = 0;
        for (int64_t b = 0; b < n; b += 32) {
            const size_t o = static_cast<size_t>(b);
            m = std::max(m, fn(dots.data() + o, s.data() + o, qn.data() + o, dn.data() + o, en.data() + o, std::min<int64_t>(32, n - b),
                               g, lo.data() + o, hi.data() + o));
        }
        benchmark::DoNotOptimize(m);
    }
}
BENCHMARK(BM_Int8HeadBounds)->Arg(0)->Arg(1);

// The int8 head's pass as head_bounds runs it (2B4T: 128256 rows of 2560, 32-row dot calls, each
// followed by its rows' bounds), or (bare) one dot call over every row and no bounds.
struct HeadPass {
    static constexpr int64_t k = 2560, n = 128256;
    AlignedBytes             q{static_cast<size_t>(k * n)}, hl{static_cast<size_t>(2 * k)};
    std::vector<int32_t>     qs = std::vector<int32_t>(static_cast<size_t>(n), 0);
    std::vector<int64_t>     dots = std::vector<int64_t>(static_cast<size_t>(n));
    std::vector<float>       s = std::vector<float>(static_cast<size_t>(n), 0.01f), qn = s, dn = s, en = s, lo = s, hi = s;
    HeadPass() {
        std::memset(q.data(), 5, q.size());
        std::memset(hl.data(), 130, hl.size());
    }
    float run(bool bare) {
        const cpu::HeadBoundGrid g{1e-4, 0.3, 20.0};
        auto * fn = kernels().i8_head_bounds != nullptr ? kernels().i8_head_bounds : cpu::i8_head_bounds_ref;
        float  m  = 0;
        if (bare) {
            kernels().i8_rows_dot_i16(q.as<int8_t>(), k, 0, n, k, hl.data(), hl.data() + k, qs.data(), dots.data());
            return m;
        }
        for (int64_t b = 0; b < n; b += 32) {
            const int64_t be = std::min<int64_t>(n, b + 32);
            kernels().i8_rows_dot_i16(q.as<int8_t>(), k, b, be, k, hl.data(), hl.data() + k, qs.data(), dots.data());
            const size_t o = static_cast<size_t>(b);
            m = std::max(m, fn(dots.data(), s.data() + o, qn.data() + o, dn.data() + o, en.data() + o, be - b, g, lo.data() + o,
                               hi.data() + o));
        }
        return m;
    }
};
HeadPass & head_pass() {
    static HeadPass h;
    return h;
}

// arg 1: the bare stream (HeadPass).
void BM_Int8HeadPass(benchmark::State & st) {
    HeadPass & h = head_pass();
    for (auto _ : st) {
        benchmark::DoNotOptimize(h.run(st.range(0) == 1));
        benchmark::DoNotOptimize(h.dots.data());
    }
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(h.k * h.n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Int8HeadPass)->Arg(0)->Arg(1);

void BM_Q6kHead(benchmark::State & st) {
    const int64_t        k = 2560, n = st.range(0);
    const size_t         rb = dtype_row_bytes(DType::q6_k, k);
    AlignedBytes         t(rb * static_cast<size_t>(n) + 64);
    std::vector<float>   row(static_cast<size_t>(k), 0.01f);
    uint8_t *            t0 = t.data() + st.range(1);  // offset from a cache line: 32 as in a GGUF file
    for (int64_t r = 0; r < n; ++r) quantize_row(DType::q6_k, row.data(), t0 + r * rb, k);
    std::vector<int8_t>  h8(static_cast<size_t>(k), 3);
    std::vector<int32_t> hs(static_cast<size_t>(k / 4), 12);
    std::vector<double>  f(static_cast<size_t>(n));
    for (auto _ : st) {
        kernels().q6k_rows_dot_i8(t0, static_cast<int64_t>(rb), 0, n, k, h8.data(), hs.data(), f.data());
        benchmark::DoNotOptimize(f.data());
    }
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(rb * n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Q6kHead)->Args({4096, 0})->Args({65536, 0})->Args({65536, 32});

void BM_F16RowsExact(benchmark::State & st) {
    const int64_t         k = 2560, n = st.range(0);
    std::vector<uint16_t> t(static_cast<size_t>(k * n), 0x2c00);
    std::vector<float>    h(static_cast<size_t>(k), 0.5f), out(static_cast<size_t>(n));
    for (auto _ : st) {
        kernels().f16_rows_dot(t.data(), k, 0, n, k, h.data(), 1, out.data(), n);
        benchmark::DoNotOptimize(out.data());
    }
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(2 * k * n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_F16RowsExact)->Arg(4096);

void BM_F16RowsChecked(benchmark::State & st) {
    const int64_t         k = 2560, n = st.range(0);
    std::vector<uint16_t> t(static_cast<size_t>(k * n), 0x2c00);
    std::vector<float>    h(static_cast<size_t>(k), 0.5f), out(static_cast<size_t>(n)), ea(static_cast<size_t>(n), 0.0625f * k), hm(1, 0.5f);
    if (!kernels().f16_rows_dot_checked) {
        st.SkipWithError("no checked kernel in this set");
        return;
    }
    for (auto _ : st) {
        kernels().f16_rows_dot_checked(t.data(), k, 0, n, k, h.data(), 1, out.data(), n, ea.data(), hm.data(), true);
        benchmark::DoNotOptimize(out.data());
    }
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(2 * k * n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_F16RowsChecked)->Arg(4096)->Arg(65536);

// args: positions, query heads per KV head (one token)
void BM_Attention(benchmark::State & st) {
    const int64_t         n = st.range(0), g = st.range(1), hd = 128, stride = 640;
    std::vector<uint16_t> kc(static_cast<size_t>(stride * n), 0x3000), vc(kc.size(), 0x3400);
    std::vector<float>    kt(static_cast<size_t>((n + 15) / 16 * 16 * hd)), v(static_cast<size_t>(n * hd));
    std::vector<float>    q(static_cast<size_t>(g * hd), 0.1f), out(q.size()), scratch(static_cast<size_t>(g * (n + 16) + g * hd));
    cpu::CacheView        c{kc.data(), vc.data(), true, true, stride, 0, hd};
    for (auto _ : st) {
        kernels().attention_prepare(c, n, kt.data(), v.data());
        kernels().attention({kt.data(), v.data(), hd, true, true}, {q.data(), g, n, 0.088f, out.data()}, scratch.data());
        benchmark::DoNotOptimize(out.data());
    }
}
BENCHMARK(BM_Attention)->Args({128, 4})->Args({512, 4})->Args({4096, 4});

// The same from the cache itself (attention_cache), where the set has it.
void BM_AttentionCache(benchmark::State & st) {
    if (kernels().attention_cache == nullptr) {
        st.SkipWithError("no attention_cache in this set");
        return;
    }
    const int64_t         n = st.range(0), g = st.range(1), hd = 128, stride = 640;
    std::vector<uint16_t> kc(static_cast<size_t>(stride * n), 0x3000), vc(kc.size(), 0x3400);
    std::vector<float>    q(static_cast<size_t>(g * hd), 0.1f), out(q.size()), scratch(static_cast<size_t>(g * (n + 16) + g * hd));
    cpu::CacheView        c{kc.data(), vc.data(), true, true, stride, 0, hd};
    for (auto _ : st) {
        kernels().attention_cache(c, {q.data(), g, n, 0.088f, out.data()}, scratch.data());
        benchmark::DoNotOptimize(out.data());
    }
}
BENCHMARK(BM_AttentionCache)->Args({128, 4})->Args({512, 4})->Args({4096, 4});

// 64 MiB streamed through the caches outside the timed region, so that the next timed pass finds
// its data in DRAM, as decoding finds a layer's K/V after streaming the other layers' weights.
struct CacheEvictor {
    AlignedBytes buf{64 << 20};
    uint64_t     sink = 0;
    void         operator()(benchmark::State & st) {
        st.PauseTiming();
        sink += kernels().read_bytes(buf.data(), static_cast<int64_t>(buf.size()));
        st.ResumeTiming();
    }
};

// One layer of 2B4T decoding: 5 KV heads x 4 query heads over n positions; args: n, 1 to evict the
// cache from every level first (as decoding finds it, after streaming the other layers' weights).
void BM_AttentionLayer(benchmark::State & st) {
    const int64_t         n = st.range(0), g = 4, hd = 128, stride = 640;
    std::vector<uint16_t> kc(static_cast<size_t>(stride * n), 0x3000), vc(kc.size(), 0x3400);
    std::vector<float>    q(static_cast<size_t>(5 * g * hd), 0.1f), out(q.size()), scratch(static_cast<size_t>(g * (n + 16) + g * hd));
    CacheEvictor          evict;
    for (auto _ : st) {
        if (st.range(1)) evict(st);
        for (int64_t h = 0; h < 5; ++h) {
            // next_first: the next KV head, as the backend's one-token job names it (a prefetch hint)
            cpu::CacheView c{kc.data(), vc.data(), true, true, stride, h * hd, hd, h + 1 < 5 ? (h + 1) * hd : -1};
            kernels().attention_cache(c, {q.data() + h * g * hd, g, n, 0.088f, out.data() + h * g * hd}, scratch.data());
        }
        benchmark::DoNotOptimize(out.data());
    }
    benchmark::DoNotOptimize(evict.sink);
}
BENCHMARK(BM_AttentionLayer)->ArgsProduct({{64, 128, 512}, {0, 1}});

// One 2B4T layer's attention over a row longer than one superblock, as the fast backend runs it
// (a blocks job per superblock of 512 positions, AttentionJob::blocks, then each query head's
// cpu::join_partials + finish_partial): args n, 1 to evict the cache first. Random f16 K and V
// (5 KV heads x 4 query heads, hd 128).
void BM_AttentionRow(benchmark::State & st) {
    const int64_t n = st.range(0), g = 4, hd = 128, stride = 640, n_super = (n + 511) / 512;
    std::mt19937  rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<uint16_t> kc(static_cast<size_t>(stride * n)), vc(kc.size());
    for (size_t i = 0; i < kc.size(); ++i) {
        kc[i] = fp32_to_fp16(nd(rng));
        vc[i] = fp32_to_fp16(nd(rng));
    }
    std::vector<float> q(static_cast<size_t>(5 * g * hd)), out(q.size()), scratch(static_cast<size_t>(cpu::attention_scratch(g, 512, hd)));
    for (auto & x : q) x = 0.7f * nd(rng);
    std::vector<float> o(static_cast<size_t>(n_super * g * hd)), m(static_cast<size_t>(n_super * g)), l(m.size()), joined(hd);
    CacheEvictor          evict;
    for (auto _ : st) {
        if (st.range(1)) evict(st);
        for (int64_t h = 0; h < 5; ++h) {
            for (int64_t c = 0; c < n_super; ++c) {
                const int64_t        s0 = c * 512;
                const cpu::CacheView cv{kc.data() + s0 * stride, vc.data() + s0 * stride, true, true, stride, h * hd, hd, -1};
                cpu::AttentionJob    job{q.data() + h * g * hd, g, std::min<int64_t>(512, n - s0), 0.088f, o.data() + c * g * hd,
                                      m.data() + c * g, l.data() + c * g};
                job.blocks = true;
                kernels().attention_cache(cv, job, scratch.data());
            }
            for (int64_t j = 0; j < g; ++j) {
                float * dst = out.data() + (h * g + j) * hd;
                cpu::AttnPartial parts[16];
                for (int64_t c = 0; c < n_super; ++c) parts[c] = {m[c * g + j], l[c * g + j], o.data() + (c * g + j) * hd};
                cpu::AttnPartial row{0.0f, 0.0f, joined.data()};
                cpu::join_partials(parts, n_super, hd, row);
                cpu::finish_partial(row, hd, dst);
            }
        }
        benchmark::DoNotOptimize(out.data());
    }
    benchmark::DoNotOptimize(evict.sink);
}
BENCHMARK(BM_AttentionRow)->ArgsProduct({{1024, 4096}, {0, 1}});

// One token through 30 layers of 2B4T products with each layer's attention after its [q; k; v]
// (its own f16 cache of n positions, which the other layers' weights evict by the time it comes
// round, as in decoding). args: n, 1 for the [q; k; v] product touching the layer's K/V (cpu::Touch),
// 1 for a whole token: the int8 head's pass (HeadPass) after the layers. Counters: attention us per
// layer and the [q; k; v] product's GB/s (thread CPU time around each call), the weights' GB/s
// (CPU time; with the head, its int8 copy's bytes too: compare with BM_ReadBytes).
void BM_DecodeLayersAttention(benchmark::State & st) {
    const DecodeLayers &  d = decode_layers();
    const int64_t         n = st.range(0), g = 4, hd = 128, stride = 640, k_max = 6912;
    std::vector<std::vector<uint16_t>> kc(30), vc(30);
    for (int l = 0; l < 30; ++l) {
        kc[l].assign(static_cast<size_t>(stride * (n + 1)), 0x3000);
        vc[l].assign(kc[l].size(), 0x3400);
    }
    std::vector<float>   q(static_cast<size_t>(5 * g * hd), 0.1f), out(q.size()), sc(static_cast<size_t>(g * (n + 32) + g * hd));
    AlignedBytes         scratch(static_cast<size_t>(272 * k_max));
    std::vector<int8_t>  qa(static_cast<size_t>(k_max), 3);
    std::vector<float>   s(1, 40.0f), y(13824);
    std::vector<int32_t> gs(1);
    double               bytes = 0, qkv_bytes = 0, attn_s = 0, qkv_s = 0;
    int64_t              tokens = 0;
    for (const auto & l : d.codes) bytes += static_cast<double>(l.size());
    if (st.range(2) == 1) bytes += static_cast<double>(HeadPass::k * HeadPass::n);
    auto cpu_now = [] {  // this thread's CPU time (the VM preempts: wall clock counts other guests)
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    };
    for (auto _ : st) {
        for (size_t i = 0; i < d.views.size(); ++i) {
            const auto &  v = d.views[i];
            const int64_t l = static_cast<int64_t>(i / 4);
            gs[0]           = 3 * static_cast<int32_t>(v.k);
            cpu::ActView a{qa.data(), v.k, s.data(), gs.data(), 1, scratch.data()};
            cpu::Touch   t;
            if (i % 4 == 0 && st.range(1) != 0) {
                t.base[0]   = reinterpret_cast<const uint8_t *>(kc[l].data());
                t.base[1]   = reinterpret_cast<const uint8_t *>(vc[l].data());
                t.stride    = stride * 2;
                t.row_bytes = stride * 2;
                t.n_rows    = n;
                a.touch     = &t;
            }
            const double t0 = cpu_now();
            kernels().ternary_gemm(v, 0, v.n_tiles(), a, y.data(), v.n_rows, 0, false);
            if (i % 4 != 0) continue;
            const double t1 = cpu_now();
            for (int64_t h = 0; h < 5; ++h) {
                cpu::CacheView c{kc[l].data(), vc[l].data(), true, true, stride, h * hd, hd, h + 1 < 5 ? (h + 1) * hd : -1};
                kernels().attention_cache(c, {q.data() + h * g * hd, g, n + 1, 0.088f, out.data() + h * g * hd}, sc.data());
            }
            const double t2 = cpu_now();
            qkv_s += t1 - t0;
            attn_s += t2 - t1;
            qkv_bytes += static_cast<double>(d.codes[i].size());
        }
        if (st.range(2) == 1) benchmark::DoNotOptimize(head_pass().run(false));
        ++tokens;
        benchmark::DoNotOptimize(y.data());
        benchmark::DoNotOptimize(out.data());
    }
    st.counters["weights GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    st.counters["attn us/layer"] = attn_s * 1e6 / static_cast<double>(std::max<int64_t>(tokens, 1) * 30);
    st.counters["qkv GB/s"]      = qkv_s > 0 ? qkv_bytes * 1e-9 / qkv_s : 0;
}
BENCHMARK(BM_DecodeLayersAttention)->ArgsProduct({{64, 128, 512, 2048}, {0, 1}, {0}})->Args({64, 0, 1})->Args({64, 1, 1})
    ->Args({512, 0, 1})->Args({512, 1, 1});

void BM_ReadBytes(benchmark::State & st) {
    AlignedBytes b(static_cast<size_t>(st.range(0)));
    for (auto _ : st) benchmark::DoNotOptimize(kernels().read_bytes(b.data(), static_cast<int64_t>(b.size())));
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(b.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ReadBytes)->Arg(256 << 20)->Arg(1 << 30);

}  // namespace
}  // namespace tern

BENCHMARK_MAIN();
