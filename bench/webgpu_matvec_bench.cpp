// tern_webgpu_matvec_bench: how fast the families' one-token matvec kernels stream alone, by weight
// size (issue 54, step 1). Plain main, no Google Benchmark: it needs a WebGPU adapter, and one run
// prints one table.
//
// For each form and weight size S it loads enough distinct Q4_0 matrices of S bytes that their sum
// is at least --footprint MB (so that the GPU's L2 cannot serve a matrix from its last use; --copies
// sets their number instead, at least 1), then times --reps steps of ops cycling through them,
// recorded and submitted back to back with one synchronize() at the end (about --gb GB read in
// all), so that the device never waits for the host where the host records faster than the device
// runs (the device's clocks stay up too). Dawn turns a step into Vulkan commands at its submit, so
// where the host is slower the wall time is the host's: such rows say "host" (host time per op >=
// 90% of the wall time per op). One untimed step first (pipelines, first touch). --fresh makes a
// new backend per row, so that TERN_WEBGPU_PROFILE=gpu prints each row's per-kernel GPU times (each
// dispatch then costs ~6 us more, its own pass).
// Forms, through the public Backend calls that the family model makes (webgpu_family.cpp):
//   gateup     linear_glu with the norm: act_q8_0.wgsl (NORM) + matvec_q8_acts.wgsl GLU QOUT, K 2048
//              (--k: phi-3-mini's 3072); n_ff / 32 workgroups of 512 threads, so rows / 64
//   qkv        linear with the norm, no residual: matvec_q8_acts.wgsl PROLOGUE (NORM), K 2048 (--k);
//              rows / 32 workgroups up to 64 x compute units rows (8,448 on the H200), then the host's rule
//              (no rope_kv_append after it: the plain PROLOGUE epilogue, not ROPE's)
//   plain2048  linear without a norm, with the residual: act_q8_0.wgsl + matvec_q8_acts.wgsl (K: --k)
//   plain8192  ACCUMULATE, K 2048 (the o-projection's shape) and K 8192 (the down projection's)
//   down       a gateup of S (K 2048 or --k, 2 n_ff rows), then a linear of K n_ff, 2048 rows, reading its
//              Q8_0 blocks (no act_q8_0: the model's FFN pair; n_ff <= 16384); the pair's time
// Prints per (form, size): dispatches per op, us per op (wall / ops), host us per op, GB/s read and %
// of the measured copy / read rates, then a least-squares fit us = a + bytes / rate over the rows
// that the device bounds.
// Caution (H200, session 21): rows run slower, down to ~0.45-0.7 TB/s at any size, once the process
// holds or has held GB of matrices (75 x 32 MB: 455 GB/s against 1,862 with 5; later forms of a long
// run), for a reason not known yet; the tok/s of the models (phi-3-mini: 2.4 GB per token) show no
// such drop. Trust the first form of a fresh process with a footprint under ~1 GB.
// Waves (H200, session 21, gpu21b): two QOUT gate+up workgroups run per SM (132 SMs), so sizes past 264
// workgroups add a wave (+2.5 us at 265); at --k 3072 one per SM (a wave more from 133; gpu21c); compare forms at the models' workgroup counts, not by the
// marginal rate across such steps (docs/perf-log.md, "Waves, not streaming").
//
//   tern_webgpu_matvec_bench [--sizes 2,8,32,128,512] [--forms gateup,qkv,plain2048,plain8192,down]
//                            [--reps 8] [--gb 24] [--footprint 160] [--copies 0] [--fresh 1]
//                            [--tune key=value,...] [--k 2048]
#include "backend/backend.h"
#include "backend/webgpu/webgpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace tern;

std::vector<std::string> split(const std::string & s) {
    std::vector<std::string> out;
    std::stringstream        in(s);
    for (std::string item; std::getline(in, item, ',');) out.push_back(item);
    return out;
}

// Q4_0 blocks (18 bytes: f16 d, 16 bytes of nibbles) with random nibbles and scales in [2^-8, 2^-7),
// enough for `bytes` of file data; a weight of any K takes a prefix (whole rows of whole blocks).
std::vector<uint8_t> q4_0_pool(size_t bytes) {
    std::vector<uint8_t> pool((bytes + 17) / 18 * 18);
    std::mt19937_64      rng(54);
    for (size_t at = 0; at < pool.size(); at += 18) {
        const uint64_t r = rng(), s = rng();
        const uint16_t d = static_cast<uint16_t>(0x1c00u | (r & 0x3ffu));  // f16 2^-8 .. < 2^-7
        std::memcpy(&pool[at], &d, 2);
        std::memcpy(&pool[at + 2], &r, 8);
        std::memcpy(&pool[at + 10], &s, 8);
    }
    return pool;
}

struct Row {
    std::string form;
    double      mb = 0;       // weight bytes per op as the kernels read them (Weight::n_bytes), MB
    double      us = 0;       // wall us per op
    double      host_us = 0;  // host us per op (recording, end_step)
    double      disp = 0;     // dispatches per op
    bool        host = false; // bound by the host
};

}  // namespace

int main(int argc, char ** argv) {
    std::string sizes_arg = "2,4,8,16,32,128,512", forms_arg = "gateup,qkv,plain2048,plain8192,down", tune;
    int         reps = 8;
    bool        fresh = false;
    int         copies = 0;
    int64_t     k_in   = 2048;  // K of every form but plain8192
    double      gb = 24, footprint_mb = 160;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--sizes") sizes_arg = v;
        else if (k == "--forms") forms_arg = v;
        else if (k == "--reps") reps = std::atoi(v.c_str());
        else if (k == "--gb") gb = std::atof(v.c_str());
        else if (k == "--footprint") footprint_mb = std::atof(v.c_str());
        else if (k == "--tune") tune = v;
        else if (k == "--fresh") fresh = v == "1";
        else if (k == "--copies") copies = std::atoi(v.c_str());
        else if (k == "--k") k_in = std::atoll(v.c_str());
        else {
            std::fprintf(stderr, "unknown flag %s (see the header of bench/webgpu_matvec_bench.cpp)\n", k.c_str());
            return 2;
        }
    }
    if (k_in < 32 || k_in > 8192 || k_in % 32 != 0) {
        std::fprintf(stderr, "--k: a multiple of 32 from 32 to 8192\n");
        return 2;
    }
    WebGpuOptions o;
    if (!tune.empty()) o.tune = tune;
    std::unique_ptr<Backend> be = make_webgpu_backend(o);
    const double copy_bw = be->measure_copy_bandwidth();
    const double read_bw = be->measure_read_bandwidth();
    const auto   dc      = be->measure_dispatch_cost();
    std::printf("device: %s\ncopy %.1f GB/s (read + write), read %.1f GB/s; dependent dispatch %.2f us (1 wg), %.2f us (%u wg), "
                "host %.2f us\n",
                be->device_info().name.c_str(), copy_bw / 1e9, read_bw / 1e9, dc.gpu_s_one * 1e6, dc.gpu_s_wide * 1e6,
                dc.wide_groups, dc.host_s * 1e6);

    std::vector<double> sizes;
    for (const auto & s : split(sizes_arg)) sizes.push_back(std::atof(s.c_str()));
    const double               max_mb = *std::max_element(sizes.begin(), sizes.end());
    const std::vector<uint8_t> pool   = q4_0_pool(static_cast<size_t>(max_mb * 1.1 * 1e6 * 18 / 20) + (size_t{1} << 20));

    // The input x (K 8192 at most) and the norm weights.
    std::mt19937                    rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t                   k_max = 8192;
    std::vector<float>              xv(k_max), nwv(k_max);
    for (float & v : xv) v = nd(rng);
    for (float & v : nwv) v = 1.0f + 0.1f * nd(rng);
    const WeightSource nsrc{"nw", DType::f32, {k_in, 1, 1, 1}, {reinterpret_cast<const uint8_t *>(nwv.data()), static_cast<size_t>(k_in) * 4}};

    std::vector<Row> rows;
    for (const std::string & form : split(forms_arg)) {
        const bool    glu   = form == "gateup" || form == "down";
        const int64_t k     = form == "plain8192" ? 8192 : k_in;
        const int64_t bpr   = k / 32 * 20;  // repacked Q4_0: 16 bytes of nibbles + an f32 scale per block
        for (double mb : sizes) {
            // Rows: a multiple of 64 (gate+up: n_ff a multiple of 32; qkv: even workgroup splits).
            // (At most 262,080 rows: 65,535 workgroups of the plain form's 4 rows.)
            const int64_t n = std::min<int64_t>(262080, std::max<int64_t>(64, static_cast<int64_t>(mb * 1e6 / bpr) / 64 * 64));
            const int64_t n_w = copies > 0 ? copies : std::max<int64_t>(2, static_cast<int64_t>(std::ceil(footprint_mb / mb)));
            // down: the gate+up is 2 n_ff x K rows of this size, the down 2048 x n_ff (about half).
            const int64_t n_ff = glu ? n / 2 : 0;
            if (form == "down" && n_ff > 16384) continue;  // (the down's K past what its workgroup memory holds)
            if (fresh) {  // (the old one's profile is printed as it goes)
                be.reset();
                be = make_webgpu_backend(o);
            }
            Backend & gpu = *be;
            auto      nw  = gpu.load_norm(nsrc);
            std::vector<std::unique_ptr<Weight>> ws, downs;
            double wbytes = 0, dbytes = 0;
            for (int64_t i = 0; i < n_w; ++i) {
                const WeightSource src{"w", DType::q4_0, {k, n, 1, 1}, {pool.data(), static_cast<size_t>(n * k / 32 * 18)}};
                ws.push_back(gpu.load_linear({&src, 1}));
                wbytes = static_cast<double>(ws.back()->n_bytes);
                if (form == "down") {
                    const WeightSource d{"d", DType::q4_0, {n_ff, 2048, 1, 1}, {pool.data(), static_cast<size_t>(2048 * n_ff / 32 * 18)}};
                    downs.push_back(gpu.load_linear({&d, 1}));
                    dbytes = static_cast<double>(downs.back()->n_bytes);
                }
            }
            OwnedTensor x = alloc_tensor(gpu, DType::f32, {k, 1, 1, 1}, "x");
            OwnedTensor y = alloc_tensor(gpu, DType::f32, {std::max<int64_t>(n, 2048), 1, 1, 1}, "y");
            gpu.write(x.tensor, xv.data(), static_cast<size_t>(k) * 4);
            OwnedTensor xr = alloc_tensor(gpu, DType::f32, {2048, 1, 1, 1}, "xr");  // down's residual
            gpu.write(xr.tensor, xv.data(), 2048 * 4);
            Tensor yv = y.tensor;
            yv.ne     = {glu ? n_ff : n, 1, 1, 1};
            const double per_op = wbytes + dbytes;
            // Ops per step: at least one per matrix, --gb over the steps, at most 4,000 (the step's host memory)
            const int n_ops = static_cast<int>(std::min<double>(
                4000.0, std::max<double>(static_cast<double>(n_w), std::ceil(gb * 1e9 / per_op / reps))));
            auto record = [&](int i) {
                const Weight & w = *ws[static_cast<size_t>(i % n_w)];
                if (form == "gateup" || form == "down") {
                    gpu.linear_glu(yv, w, {x.tensor, nw.get(), 1e-5f, {}, {}}, FfnActivation::silu);
                    if (form == "down") gpu.linear(xr.tensor, *downs[static_cast<size_t>(i % n_w)], {yv, nullptr, 0.0f, {}, {}}, true);
                } else if (form == "qkv") {
                    gpu.linear(yv, w, {x.tensor, nw.get(), 1e-5f, {}, {}}, false);
                } else {
                    gpu.linear(yv, w, {x.tensor, nullptr, 0.0f, {}, {}}, true);
                }
            };
            using clock = std::chrono::steady_clock;
            auto step = [&] {
                gpu.begin_step();
                for (int i = 0; i < n_ops; ++i) record(i);
                gpu.end_step();
            };
            step();  // (pipelines, first touch)
            gpu.synchronize();
            gpu.take_dispatch_count();
            double     host_s = 0;
            const auto t0     = clock::now();
            for (int r = 0; r < reps; ++r) {
                const auto h0 = clock::now();
                step();
                host_s += std::chrono::duration<double>(clock::now() - h0).count();
            }
            gpu.synchronize();
            const double wall_s = std::chrono::duration<double>(clock::now() - t0).count();
            const double ops    = static_cast<double>(n_ops) * reps;
            Row row{form, per_op / 1e6, wall_s / ops * 1e6, host_s / ops * 1e6,
                    static_cast<double>(gpu.take_dispatch_count()) / ops, host_s >= 0.9 * wall_s};
            rows.push_back(row);
            const double gbs = per_op / (row.us * 1e-6) / 1e9;
            std::printf("%-10s %8.2f MB  rows %7lld  x%-3lld ops %5d x %d  disp/op %.2f  %9.2f us  host %8.2f us%s  %7.1f GB/s  "
                        "%5.1f%% copy  %5.1f%% read\n",
                        form.c_str(), row.mb, static_cast<long long>(n), static_cast<long long>(n_w), n_ops, reps, row.disp,
                        row.us, row.host_us, row.host ? " (host)" : "       ", gbs, 100 * gbs * 1e9 / copy_bw,
                        100 * gbs * 1e9 / read_bw);
            std::fflush(stdout);
        }
    }
    // us = a + MB / rate per form (least squares over its sizes).
    std::printf("\nfit us = a + bytes / rate (the rows the device bounds; and the two largest alone)\n");
    for (const std::string & form : split(forms_arg)) {
        std::vector<const Row *> f;
        for (const Row & r : rows) if (r.form == form && !r.host) f.push_back(&r);
        if (f.size() < 2) continue;
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (const Row * r : f) sx += r->mb, sy += r->us, sxx += r->mb * r->mb, sxy += r->mb * r->us;
        const double m = static_cast<double>(f.size());
        const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx), a = (sy - slope * sx) / m;
        const Row *  p = f[f.size() - 2], *q = f.back();
        const double slope2 = (q->us - p->us) / (q->mb - p->mb);
        std::printf("%-10s a %6.2f us  rate %7.1f GB/s (%5.1f%% copy)   large: rate %7.1f GB/s (%5.1f%% copy), a %6.2f us\n",
                    form.c_str(), a, 1e3 / slope, 100 * 1e12 / slope / copy_bw, 1e3 / slope2, 100 * 1e12 / slope2 / copy_bw,
                    q->us - q->mb * slope2);
    }
    return 0;
}
