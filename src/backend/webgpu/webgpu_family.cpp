// The general linear path of the llama / qwen3 / phi3 families on WebGPU (backend.h's matmul,
// matmul_glu, rope_kv_append), bit-identical to the CPU reference (src/backend/cpu/cpu_matmul.h):
//   matmul       quantize_q8_0.wgsl (Q4_0 / Q8_0 weights: the input as Q8_0 blocks) + matmul.wgsl;
//   matmul_glu   matmul into scratch (gate rows, then up rows) + glu.wgsl;
//   rope_kv_append(_paged)  rope_kv_family.wgsl with a host (cos, sin) table of cpu::rope_head's angles.
//   linear / linear_glu of one token with Q4_0 / Q8_0 (Q4_K / Q6_K) weights: act_q8_0.wgsl (the norm
//                and the Q8_0 blocks, once per token; none where the kernel before made them:
//                a gate+up's QOUT, one query's attention.wgsl Q8_OUT; a normed one-part matvec, the
//                [q; k; v], makes them in its own prologue, PROLOGUE) + matvec_q8_acts.wgsl (glu's
//                gate in its epilogue), or with family_acts=0 matvec_q8.wgsl alone (that prologue in every
//                workgroup); matvec_q8k.wgsl alone (the Q8_K blocks in its prologue); Q1_0 / Q2_0 /
//                PQ2_0 through matvec_q8.wgsl for any tokens. A [q; k; v] matvec_q8_acts.wgsl is
//                recorded late (StepEncoder::defer): the rope_kv_append right after it takes it as its
//                ROPE variant, the RoPE and the cache stores in its epilogue.
//   (lm_head of a Q8_0 / Q4_0 / Q6_K table: webgpu_family_head.cpp.)
//   linear / linear_glu of a ternary weight (I2_S, TQ1_0, TQ2_0): per-token int8 input
//                (rms_norm_quant.wgsl) + BitNet's bitlinear / gate_up.
// Weight types: F32, F16, BF16, Q8_0, Q4_0 (Q8_0-block input), Q4_K, Q6_K (Q8_K-block input,
// quantize_q8_k.wgsl); one matmul per run of parts of one type in a stacked weight.
#include "backend/cpu/cpu_ops.h"
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"
#include "core/fp16.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

namespace tern {
namespace {

// matmul.wgsl's WTYPE.
uint32_t matmul_wtype(DType t) {
    switch (t) {
        case DType::f32: return 0;
        case DType::f16: return 1;
        case DType::bf16: return 2;
        case DType::q8_0: return 3;
        case DType::q4_0: return 4;
        case DType::q4_k: return 5;
        case DType::q6_k: return 6;
        default: return 99;
    }
}

bool takes_q8_0(DType t) { return t == DType::q8_0 || t == DType::q4_0; }
bool takes_q8_k(DType t) { return t == DType::q4_k || t == DType::q6_k; }
// The low-bit types whose activations are Q8_0 blocks (the others take per-token int8).
bool takes_q8_0_blocks_lowbit(DType t) { return t == DType::q1_0 || t == DType::q2_0 || t == DType::pq2_0; }

const GpuMatrix & as_matrix(const Weight & w) {
    const auto * m = dynamic_cast<const GpuMatrix *>(&w);
    if (m == nullptr && dtype_is_lowbit(w.type)) {  // (a ternary weight reaches matmul only from the families)
        fail(ErrorKind::unsupported,
             format("webgpu: %s projections outside a BitNet model are not supported yet",
                    std::string(dtype_name(w.type)).c_str()),
             "use --backend cpu for this model");
    }
    TERN_ASSERT(m != nullptr, "weight was not loaded by the WebGPU backend as a matrix");
    return *m;
}

uint16_t load_u16(const uint8_t * p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

// One row of a part in matmul.wgsl's layout (GpuMatrix): words appended to `words`, block scales to
// `scales`.
void pack_row(DType type, const uint8_t * row, int64_t k, std::vector<uint32_t> & words, std::vector<float> & scales) {
    auto append = [&](const uint8_t * bytes, size_t n) {
        const size_t at = words.size();
        words.resize(at + n / 4);
        std::memcpy(words.data() + at, bytes, n);
    };
    switch (type) {
        case DType::q8_0:
        case DType::q4_0: {
            const size_t block_bytes = type == DType::q8_0 ? 34 : 18;
            for (int64_t b = 0; b < k / 32; ++b) {
                const uint8_t * blk = row + static_cast<size_t>(b) * block_bytes;
                scales.push_back(fp16_to_fp32(load_u16(blk)));
                append(blk + 2, block_bytes - 2);
            }
            break;
        }
        case DType::q4_k: append(row, static_cast<size_t>(k / 256) * 144); break;
        case DType::q6_k:
            for (int64_t b = 0; b < k / 256; ++b) {
                const uint8_t * blk = row + static_cast<size_t>(b) * 210;
                append(blk, 208);  // ql[128] qh[64] scales[16]
                scales.push_back(fp16_to_fp32(load_u16(blk + 208)));
            }
            break;
        default: append(row, dtype_row_bytes(type, k)); break;  // f32, f16, bf16 as they are
    }
}

}  // namespace

bool WebGpuBackend::fa_follows(const FamilyActs & a, const Tensor & x) const {
    return a.buffer != nullptr && a.serial == step_->serial() && a.buffer == gpu_buffer(x) &&
           a.offset == gpu_offset(x, 4) && a.k == x.ne[0] && a.T == x.ne[1];
}

size_t family_act_bytes(int64_t blocks, int64_t T) {
    return static_cast<size_t>(T * (8 * blocks + (blocks + 3) / 4 * 4) * 4);
}

std::unique_ptr<Weight> WebGpuBackend::load_matrix(std::span<const WeightSource> parts) {
    const int64_t k = parts[0].ne[0];
    auto          m = std::make_unique<GpuMatrix>();
    m->type         = parts[0].type;
    m->n_cols       = k;
    // Consecutive parts of one type share a GpuMatrix::Part (one dispatch for q, k and v alike).
    std::vector<uint32_t> words;
    std::vector<float>    scales;
    GpuMatrix::Part       run;
    auto                  close_run = [&] {
        if (run.n_rows == 0) return;
        run.words  = make_buffer(words.size() * 4, words.data(), parts[0].name.c_str());
        run.scales = make_buffer(std::max<size_t>(scales.size(), 4) * 4, scales.empty() ? nullptr : scales.data(),
                                 "matrix scales");
        m->n_bytes += words.size() * 4 + scales.size() * 4;
        m->parts.push_back(std::move(run));
        run = {};
        words.clear();
        scales.clear();
    };
    for (const WeightSource & p : parts) {
        if (matmul_wtype(p.type) == 99) {
            fail(ErrorKind::unsupported,
                 format("tensor '%s' has type %s, which the WebGPU backend cannot multiply yet%s", p.name.c_str(),
                        std::string(dtype_name(p.type)).c_str(),
                        dtype_is_lowbit(p.type) ? " (next to a float or Q-type tensor)" : ""),
                 "use --backend cpu, or re-quantize (tern quantize) to f16, q8_0, q4_0, q4_k or q6_k");
        }
        TERN_ASSERT(p.ne[0] == k, "parts disagree on K");
        if (k % 32 != 0) {
            fail(ErrorKind::unsupported, format("tensor '%s': %lld columns; the WebGPU matmul needs a multiple of 32",
                                                p.name.c_str(), static_cast<long long>(k)));
        }
        if (run.n_rows != 0 && run.type != p.type) close_run();
        if (run.n_rows == 0) {
            run.type      = p.type;
            run.first_row = m->n_rows;
        }
        const size_t rb = dtype_row_bytes(p.type, k);
        for (int64_t r = 0; r < p.ne[1]; ++r) pack_row(p.type, p.data.data() + static_cast<size_t>(r) * rb, k, words, scales);
        run.n_rows += p.ne[1];
        m->n_rows += p.ne[1];
    }
    close_run();
    return m;
}

void WebGpuBackend::matmul(const Tensor & y, const Weight & w, const Tensor & x, bool accumulate) {
    const GpuMatrix & m = as_matrix(w);
    const int64_t     k = m.n_cols;
    const int64_t     T = x.ne[1];
    TERN_ASSERT(x.ne[0] == k && y.ne[0] == m.n_rows && y.ne[1] == T, "matmul shapes");
    bool need_q8_0 = false, need_q8_k = false;
    for (const auto & part : m.parts) {
        need_q8_0 |= takes_q8_0(part.type);
        need_q8_k |= takes_q8_k(part.type);
    }
    // The input in the forms the parts' types multiply (quantize_q8_0.wgsl, quantize_q8_k.wgsl).
    WGPUBuffer codes = nullptr, dq = nullptr, kcodes = nullptr, kd = nullptr;
    if (need_q8_0) {
        const int64_t nb = k / 32;
        codes = grown(mm_codes_, static_cast<size_t>(T * nb * 32), "matmul q8_0 codes");
        dq    = grown(mm_dq_, static_cast<size_t>(T * nb * 4), "matmul q8_0 scales");
        struct {
            uint32_t n_blocks, x_offset, x_stride;
        } qp{u32(nb), gpu_offset(x, 4), u32(x.ne[0])};
        const PipelineKey qkey{"quantize_q8_0", "rwwu", {{{"WG", 64}}}};
        const WGPUBuffer  qbufs[] = {gpu_buffer(x), codes, dq};
        step_->dispatch(qkey, qbufs, &qp, sizeof qp, ceil_div(nb, 64), u32(T));
    }
    if (need_q8_k) {
        if (k % 256 != 0) fail(ErrorKind::invalid_model, format("a K-quant matrix of %lld columns", static_cast<long long>(k)));
        const int64_t nb = k / 256;
        kcodes = grown(mm_kcodes_, static_cast<size_t>(T * nb * 256), "matmul q8_k codes");
        kd     = grown(mm_kd_, static_cast<size_t>(T * nb * 4), "matmul q8_k scales");
        struct {
            uint32_t n_blocks, x_offset, x_stride;
        } qp{u32(nb), gpu_offset(x, 4), u32(x.ne[0])};
        const PipelineKey qkey{"quantize_q8_k", "rwwu", {{{"WG", 64}}}};
        const WGPUBuffer  qbufs[] = {gpu_buffer(x), kcodes, kd};
        step_->dispatch(qkey, qbufs, &qp, sizeof qp, ceil_div(nb, 64), u32(T));
    }
    const uint64_t storage = ctx_.limits().maxComputeWorkgroupStorageSize;
    for (const auto & part : m.parts) {
        const bool    kq  = takes_q8_k(part.type);
        const int64_t nb  = kq ? k / 256 : k / 32;
        const int64_t per = kq ? 9 : 1;  // f32 terms per (row, block)
        uint32_t      rows = 4;
        while (rows > 1 && uint64_t{rows} * static_cast<uint64_t>(nb * per) * 4 > storage) rows /= 2;
        if (static_cast<uint64_t>(nb * per) * 4 > storage) {
            fail(ErrorKind::unsupported,
                 format("webgpu: a matmul over %lld columns needs %lld bytes of workgroup memory; this adapter has %llu",
                        static_cast<long long>(k), static_cast<long long>(nb * per * 4), static_cast<unsigned long long>(storage)),
                 "use --backend cpu for this model");
        }
        struct {
            uint32_t n_rows, x_offset, x_stride, y_offset, y_stride;
        } p{u32(part.n_rows), gpu_offset(x, 4), u32(x.ne[0]), gpu_offset(y, 4) + u32(part.first_row), u32(y.ne[0])};
        const PipelineKey key{"matmul",
                              "rrrrrrrwu",
                              {{{"WG", 64},
                                {"ROWS", static_cast<double>(rows)},
                                {"NB", static_cast<double>(nb)},
                                {"WTYPE", static_cast<double>(matmul_wtype(part.type))},
                                {"PER", static_cast<double>(per)},
                                {"ACCUMULATE", accumulate ? 1.0 : 0.0}}}};
        const WGPUBuffer wb = part.words->get(), sb = part.scales->get();
        // Bindings a type does not read get any buffer (the part's own).
        const WGPUBuffer bufs[] = {wb, sb, gpu_buffer(x), codes ? codes : wb, dq ? dq : sb, kcodes ? kcodes : wb,
                                   kd ? kd : sb, gpu_buffer(y)};
        step_->dispatch(key, bufs, &p, sizeof p, ceil_div(part.n_rows, rows), u32(T));
    }
}

// matvec_q8_acts.wgsl as `mv` says; with `rope` its ROPE variant (the [q; k; v] rows rotated into
// q_out and the KV cache instead of y; webgpu_backend_impl.h: FamilyRope).
void WebGpuBackend::encode_family_matvec(const FamilyMatvec & mv, const FamilyRope * rope) {
    if (!mm_dummy_kv_[0]) {
        mm_dummy_kv_[0] = make_buffer(16, nullptr, "no k cache");
        mm_dummy_kv_[1] = make_buffer(16, nullptr, "no v cache");
    }
    struct {
        uint32_t n_rows, y_offset, y_stride, up_row, activation;
        uint32_t head_dim, n_q, n_kv, pos, k_offset, v_offset;
        uint32_t k;
        float    eps;
        uint32_t x_offset, nw_offset;
    } p{mv.n_rows, mv.y_offset, mv.y_stride, mv.up_row, mv.activation, 0, 0, 0, 0, 0, 0,
        mv.k, mv.eps, mv.x_offset, 0};
    if (rope) {
        p.y_offset = rope->q_offset;
        p.head_dim = rope->head_dim;
        p.n_q      = rope->n_q;
        p.n_kv     = rope->n_kv;
        p.pos      = rope->pos;
        p.k_offset = rope->k_offset;
        p.v_offset = rope->v_offset;
    }
    const PipelineKey key{dot4_native_ ? "matvec_q8_acts" : "matvec_q8_acts_nodp4",
                          "rrrrwwwwrru",
                          {{{"WG", static_cast<double>(mv.wg)},
                            {"ROWS", static_cast<double>(mv.rows)},
                            {"MROWS", static_cast<double>(mv.mrows)},
                            {"NB", static_cast<double>(mv.nb)},
                            {"WTYPE", static_cast<double>(mv.wtype)},
                            {"GLU", mv.glu ? 1.0 : 0.0},
                            {"ACCUMULATE", mv.accumulate ? 1.0 : 0.0},
                            {"QOUT", mv.qout ? 1.0 : 0.0},
                            {"NBO", static_cast<double>(mv.nbo)},
                            {"LOADS", static_cast<double>(mv.loads)},
                            {"ROPE", rope ? 1.0 : 0.0},
                            {"NORM_MODE", rope && !rope->norm_mode ? 0.0 : 1.0},
                            {"K_F16", rope && !rope->k_f16 ? 0.0 : 1.0},
                            {"V_F16", rope && !rope->v_f16 ? 0.0 : 1.0},
                            {"PROLOGUE", mv.prologue ? 1.0 : 0.0},
                            {"NORM", mv.norm ? 1.0 : 0.0},
                            {"QPT", static_cast<double>(mv.qpt)},
                            // (the prologue's norm total by subgroup shuffles where they are 32 wide:
                            // lib/quarters_q8_0.wgsl; as act_q8_0.wgsl's)
                            {"Q8_TOTAL_SG", mv.prologue ? 1.0 : 0.0}}}};
    const WGPUBuffer bufs[] = {mv.words,
                               mv.scales,
                               mv.acts,
                               rope ? rope->table : mv.scales,
                               rope ? rope->q : mv.y,
                               mv.oacts,
                               rope ? rope->k_cache : mm_dummy_kv_[0]->get(),
                               rope ? rope->v_cache : mm_dummy_kv_[1]->get(),
                               mv.prologue ? mv.x : mv.scales,
                               mv.prologue && mv.norm ? mv.nw : mv.scales};
    step_->dispatch(key, bufs, &p, sizeof p, ceil_div(mv.n_rows, mv.rows), 1);
}

// act_q8_0.wgsl (the input's norm and Q8_0 blocks, once) + matvec_q8_acts.wgsl (glu's gate in its
// epilogue, glu_act) per part; with family_acts=0 matvec_q8.wgsl alone, that prologue in each
// workgroup: instead of rms_norm + quantize_q8_0 + matmul (+ glu). Q4_0 / Q8_0
// (GpuMatrix) for one token; Q1_0 / Q2_0 / PQ2_0 (GpuLinear's codes, their only WebGPU path with
// Q8_0-block inputs) for any number. False (nothing recorded) where it does not apply: several
// tokens of a Q4_0 / Q8_0 weight, a part of another type, a stacked gate/up of two parts, K past
// what the prologue stages, y sharing the input's buffer.
bool WebGpuBackend::try_family_decode(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate,
                                      const FfnActivation * glu_act) {
    const int64_t k = w.n_cols;
    const int64_t T = in.x.ne[1];
    if (in.x.buffer == nullptr || in.x.ne[0] != k || in.x.type != DType::f32) return false;
    if (gpu_buffer(y) == gpu_buffer(in.x)) return false;
    // The parts: (type, first row, rows, words, scales, scales offset, group, rows per workgroup).
    struct Part {
        DType      type;
        int64_t    first_row, n_rows;
        WGPUBuffer words, scales;
        uint32_t   scales_offset;
        int64_t    group;
        uint32_t   rows = 0;
    };
    std::vector<Part> parts;
    if (const auto * m = dynamic_cast<const GpuMatrix *>(&w)) {
        if (T != 1 || (glu_act && m->parts.size() != 1)) return false;
        for (const auto & part : m->parts) {
            if (!takes_q8_0(part.type) && !takes_q8_k(part.type)) return false;
            parts.push_back({part.type, part.first_row, part.n_rows, part.words->get(), part.scales->get(), 0,
                             takes_q8_k(part.type) ? 256 : 32});
        }
    } else if (const auto * l = dynamic_cast<const GpuLinear *>(&w)) {
        if (!takes_q8_0_blocks_lowbit(l->type) || l->group % 64 != 0) return false;
        parts.push_back({l->type, 0, l->n_rows, l->buffer->get(), l->buffer->get(), l->scales_offset, l->group});
    } else {
        return false;
    }
    // (WebGpuTuning::family_wg, within the adapter's limit)
    const uint32_t wg = std::min<uint32_t>(tune_.family_wg, ctx_.limits().maxComputeInvocationsPerWorkgroup);
    const int64_t  nb = k / 32;
    if (in.norm != nullptr && k > int64_t{32} * wg) return false;  // the norms' bound (NB <= WG)
    // Workgroup memory: matvec_q8: the staged blocks (60 bytes per 32 values; lib/quarters_q8_0.wgsl's
    // exchanges and the norm's reduction, 2 WG f32), the terms (a row every NT + 1); matvec_q8k: 328 bytes per 256 values, a row of 9 terms per block + 1; both the norm's
    // reduction (WG f32). Every part must fit before any is recorded.
    // With WebGpuTuning::family_acts the Q4_0 / Q8_0 parts' Q8_0 blocks are made once (act_q8_0.wgsl:
    // an invocation per 8 values where the adapter has the threads, up to 4 quarters each; 4 bytes
    // per block and two f32 per invocation of workgroup memory) and matvec_q8_acts.wgsl keeps only the terms
    // (and with QOUT a few bytes per row), family_acts_rows rows per workgroup; family_acts=2: a
    // gate+up of one such part writes its outputs' blocks too (QOUT, 32 rows or more per
    // workgroup), and the down projection right after it reads them instead of running act_q8_0.
    // (Q1_0 / Q2_0 / PQ2_0 keep matvec_q8.wgsl's prologue: their matvecs are short, and the added
    // dispatches cost more, H200 qwen3-1.7b Q1_0 tg64 556.9 vs 606.7 tok/s.)
    const uint64_t storage = ctx_.limits().maxComputeWorkgroupStorageSize;
    const uint32_t max_wg  = ctx_.limits().maxComputeInvocationsPerWorkgroup;
    const uint32_t act_wg  = static_cast<uint32_t>(std::min<uint64_t>(std::bit_ceil(static_cast<uint64_t>(4 * nb)), max_wg));
    const uint32_t act_qpt = ceil_div(4 * nb, act_wg);  // quarters per invocation
    const bool     acts    = tune_.family_acts != 0 && act_qpt <= 4 && act_wg >= nb &&
                      static_cast<uint64_t>(nb) * 4 + uint64_t{act_wg} * 8 <= storage;
    const uint32_t per     = glu_act ? 2u : 1u;  // weight rows per output row
    const int64_t  n_out   = glu_act ? w.n_rows / 2 : w.n_rows;
    const bool     want_qout = acts && glu_act && tune_.family_acts >= 2 && parts.size() == 1 &&
                           takes_q8_0(parts[0].type) && n_out % 32 == 0;
    bool           qout      = false;
    const uint32_t qout_wg   = std::max<uint32_t>(wg, std::min<uint32_t>(512, ctx_.limits().maxComputeInvocationsPerWorkgroup));
    // Blocks a matvec_q8_acts.wgsl lane loads at once: all of its blocks, up to 12 (Q8_0, twice the
    // words: 8), so a QOUT gate+up's 8 lanes per row wait for memory once (WebGpuTuning::family_acts_loads).
    auto lane_loads = [&](DType type, uint32_t lanes) {
        return tune_.family_acts_loads != 0 ? tune_.family_acts_loads
                                            : std::clamp<uint32_t>(ceil_div(nb, lanes), 1, type == DType::q8_0 ? 8 : 12);
    };
    // matvec_q8_acts.wgsl's workgroup memory besides the terms, with `threads` threads: a few bytes
    // per row (QOUT) and the prologue's arrays, which every variant declares: h's blocks (36 bytes
    // each), the norm's block sums (4 NB), its exchanges and lib/wg_reduce(_sg).wgsl's and
    // lib/sum_squares.wgsl's trees (24 WG).
    auto acts_fixed = [&](uint32_t threads) { return 512 + static_cast<uint64_t>(nb) * 40 + uint64_t{threads} * 24; };
    // A one-token matvec_q8_acts.wgsl that makes its input's blocks in each workgroup's prologue
    // (PROLOGUE: lib/quarters_q8_0.wgsl, one quarter or a few per invocation, NB <= WG) after its
    // lanes issued the loads of all their blocks, instead of act_q8_0.wgsl before it: one dispatch
    // fewer. qout_wg threads, `rows` rows.
    auto prologue_fits = [&](DType type, uint32_t rows) {
        const uint32_t lanes = qout_wg / rows;
        return T == 1 && lanes >= 1 && nb <= int64_t{qout_wg} && ceil_div(4 * nb, qout_wg) <= 4 &&
               uint64_t{lane_loads(type, lanes)} * lanes >= static_cast<uint64_t>(nb) &&
               acts_fixed(qout_wg) + uint64_t{rows} * static_cast<uint64_t>(nb + 1) * 4 <= storage;
    };
    // A normed one-part matvec (the [q; k; v]) that way, 32 rows per workgroup (the prologue's cost is
    // per workgroup: H200 llama-3.2-1b Q4_0 tg64 1,458.0 tok/s with 32 rows, 1,433.7 with 64, 1,329.3
    // with 16 (and the gate+up's prologue) against 1,411.9 with act_q8_0; perf-log).
    // (H200 session 14: 64 rows 1,435.7 / 501.1 tok/s on llama-3.2-1b / phi-3-mini, 16 rows 1,424.0 /
    // 503.4, against 1,460.1 / 528.5 with 32.)
    // More rows where 32 would make more than two workgroups per compute unit (a second wave of a few
    // workgroups, each repeating the whole prologue chain): the fewest from 32 on, a multiple of 4 that
    // divides the rows (the RoPE epilogue's), for at most 2 x compute_units workgroups (H200 tg64
    // phi-3-mini Q4_0: 9,216 rows at 36, 256 workgroups, 557-562 vs 538-540 tok/s at 32, 288; perf-log), or
    // WebGpuTuning::family_qkv_rows where that is such a number.
    uint32_t k_prologue_rows = 32;
    if (parts.size() == 1 && takes_q8_0(parts[0].type)) {
        const int64_t  n_rows = parts[0].n_rows;
        auto           fits   = [&](uint32_t r) {
            return r % 4 == 0 && r <= qout_wg && n_rows % r == 0 && prologue_fits(parts[0].type, r);
        };
        const uint32_t tuned = tune_.family_qkv_rows;
        if (tuned != 0) {
            if (fits(tuned)) k_prologue_rows = tuned;
        } else if (n_rows > int64_t{64} * tune_.compute_units) {
            for (uint32_t r = 36; r <= 64; r += 4) {
                if (fits(r) && n_rows / r <= int64_t{2} * tune_.compute_units) {
                    k_prologue_rows = r;
                    break;
                }
            }
        }
    }
    const bool qkv_prologue = acts && !glu_act && parts.size() == 1 && takes_q8_0(parts[0].type) &&
                              in.norm != nullptr && k_prologue_rows <= qout_wg &&
                              prologue_fits(parts[0].type, k_prologue_rows);
    for (Part & part : parts) {
        const bool     kq    = takes_q8_k(part.type);
        const int64_t  nt    = kq ? 9 * (k / 256) : k / part.group;
        const bool     pa    = acts && takes_q8_0(part.type);  // (matvec_q8_acts.wgsl)
        uint64_t       fixed = kq   ? static_cast<uint64_t>(k / 256) * 328 + uint64_t{wg} * 4
                               : pa ? acts_fixed(qkv_prologue ? qout_wg : wg)
                                    : static_cast<uint64_t>(nb) * 60 + uint64_t{wg} * 8;
        if (kq && (k % 256 != 0 || k / 256 * 8 > wg * 4)) return false;
        if (!kq && !pa && ceil_div(4 * nb, wg) > 8) return false;  // matvec_q8's prologue: 8 quarters per invocation
        // (WebGpuTuning::family_acts_rows; else family_rows, family_rows_long for rows of 4096 or
        // more values without the gate: the down projection, few rows with long prologues)
        const uint32_t want = qkv_prologue ? k_prologue_rows
                              : pa         ? tune_.family_acts_rows
                              : !glu_act && k >= 4096 && tune_.family_rows_long != 0 ? tune_.family_rows_long
                                                                                     : tune_.family_rows;
        part.rows = std::max<uint32_t>(1, std::min<uint32_t>(want, (qkv_prologue ? qout_wg : wg) / per));
        auto need = [&] { return fixed + uint64_t{part.rows} * per * static_cast<uint64_t>(nt + 1) * 4; };
        // (QOUT: at least 32 rows, and 512 threads where the adapter has them, so that a gate+up
        // row keeps 8 lanes)
        if (want_qout && !kq && qout_wg / per >= 32) {
            const uint32_t keep = part.rows;
            const uint64_t keep_fixed = fixed;
            part.rows           = std::max<uint32_t>(part.rows, 32);
            fixed               = acts_fixed(qout_wg);
            qout                = need() <= storage;
            if (!qout) part.rows = keep, fixed = keep_fixed;
        }
        while (!qout && !qkv_prologue && part.rows > 1 && need() > storage) part.rows /= 2;
        if (need() > storage) return false;
    }
    TERN_ASSERT(y.ne[0] == n_out && y.ne[1] == T, "family decode shapes");
    if (!mm_zero_norm_) mm_zero_norm_ = make_buffer(16, nullptr, "no qk norm");
    const WGPUBuffer nw = in.norm ? as_norm(*in.norm).buffer->get() : mm_zero_norm_->get();
    // (Not the QOUT gate+up: its 8 lanes per row, 8-12 loads each, lost, H200 llama-3.2-1b Q4_0 tg64
    // 1,213.7 vs 1,407.8 tok/s; again with Q8_TOTAL_SG, session 19: 1,409-1,413 vs 1,460-1,468, phi-3-mini
    // 542-543 vs 559-561; perf-log.)
    const bool prologue = qkv_prologue;
    // The input's blocks (lib/acts_q8_0.wgsl): made by the command right before (a gate+up's QOUT,
    // one query's attention.wgsl Q8_OUT), else by act_q8_0.wgsl now.
    auto       act_bytes = [&](int64_t blocks) { return family_act_bytes(blocks, T); };
    WGPUBuffer a_in      = nullptr;
    if (acts && std::any_of(parts.begin(), parts.end(), [](const Part & q) { return takes_q8_0(q.type); })) {
        if (prologue) {
            a_in = parts[0].scales;  // (read by nothing)
        } else if (in.norm == nullptr && fa_follows(fa_ready_, in.x)) {
            a_in = fa_ready_.acts;
        } else {
            // (an attention output: from the next token on, the attention makes the blocks)
            if (in.norm == nullptr && tune_.family_acts >= 3 && fa_follows(attn_out_, in.x)) attn_q8_out_ = true;
            a_in = grown(fa_acts_[0], act_bytes(nb), "family q8_0 activations");
            struct {
                uint32_t k;
                float    eps;
                uint32_t x_offset, x_stride, nw_offset;
            } ap{u32(k), in.eps, gpu_offset(in.x, 4), u32(in.x.ne[0]), 0};
            const PipelineKey akey{"act_q8_0",
                                   "rrwu",
                                   {{{"WG", static_cast<double>(act_wg)},
                                     {"NB", static_cast<double>(nb)},
                                     {"QPT", static_cast<double>(act_qpt)},
                                     {"NORM", in.norm ? 1.0 : 0.0},
                                     // The norm's total by subgroup shuffles where they are 32 wide (one
                                     // barrier instead of the workgroup tree's log2 WG + 1; same bits; H200
                                     // tg64 llama-3.2-1b Q4_0 1,478.4 vs 1,460.1 tok/s, phi-3-mini 543.5 vs
                                     // 528.5 with the [q; k; v] prologue's alike; lib/quarters_q8_0.wgsl)
                                     {"Q8_TOTAL_SG", 1.0}}}};
            const WGPUBuffer abufs[] = {gpu_buffer(in.x), nw, a_in};
            step_->dispatch(akey, abufs, &ap, sizeof ap, 1, u32(T));
        }
    }
    fa_ready_ = {};
    for (const Part & part : parts) {
        const uint32_t rows = part.rows;
        const WGPUBuffer bufs[] = {part.words, part.scales, gpu_buffer(in.x), nw, gpu_buffer(y)};
        const uint32_t   y0   = gpu_offset(y, 4) + (glu_act ? 0u : u32(part.first_row));
        const uint32_t   n    = u32(glu_act ? n_out : part.n_rows);
        const uint32_t   act  = glu_act && *glu_act == FfnActivation::relu2 ? 0u : 1u;
        if (takes_q8_k(part.type)) {  // matvec_q8k.wgsl
            struct {
                uint32_t n_rows, k;
                float    eps;
                uint32_t x_offset, x_stride, nw_offset, y_offset, y_stride, up_row, activation;
            } p{n, u32(k), in.eps, gpu_offset(in.x, 4), u32(in.x.ne[0]), 0, y0, u32(y.ne[0]), u32(n_out), act};
            const PipelineKey key{"matvec_q8k",
                                  "rrrrwu",
                                  {{{"WG", static_cast<double>(wg)},
                                    {"ROWS", static_cast<double>(rows)},
                                    {"MROWS", static_cast<double>(rows * per)},
                                    {"NB", static_cast<double>(k / 256)},
                                    {"WTYPE", static_cast<double>(matmul_wtype(part.type))},
                                    {"NORM", in.norm ? 1.0 : 0.0},
                                    {"GLU", glu_act ? 1.0 : 0.0},
                                    {"ACCUMULATE", accumulate ? 1.0 : 0.0}}}};
            step_->dispatch(key, bufs, &p, sizeof p, ceil_div(n, rows), u32(T));
            continue;
        }
        const int64_t nt = k / part.group;
        const double  wtype = takes_q8_0(part.type) ? static_cast<double>(matmul_wtype(part.type)) : 7.0;
        if (a_in != nullptr && takes_q8_0(part.type)) {  // matvec_q8_acts.wgsl
            const uint32_t lanes = (qout || prologue ? qout_wg : wg) / (rows * per);
            const uint32_t loads = lane_loads(part.type, lanes);
            FamilyMatvec mv;
            mv.words = part.words;
            mv.scales = part.scales;
            mv.acts = a_in;
            mv.y = gpu_buffer(y);
            // (oacts without QOUT: a buffer no other binding has; nothing is written to it)
            mv.oacts = qout ? grown(fa_acts_[1], act_bytes(n_out / 32), "family q8_0 gate outputs") : mm_zero_norm_->get();
            mv.wg = qout || prologue ? qout_wg : wg;
            mv.rows = rows;
            mv.mrows = rows * per;
            mv.nb = u32(nb);
            mv.wtype = static_cast<uint32_t>(wtype);
            mv.glu = glu_act != nullptr;
            mv.accumulate = accumulate;
            mv.qout = qout;
            mv.nbo = qout ? u32(n_out / 32) : 1u;
            mv.loads = loads;
            mv.n_rows = n;
            mv.y_offset = y0;
            mv.y_stride = u32(y.ne[0]);
            mv.up_row = u32(n_out);
            mv.activation = act;
            if (prologue) {
                mv.prologue = true;
                mv.norm     = in.norm != nullptr;
                mv.x        = gpu_buffer(in.x);
                mv.nw       = nw;
                mv.k        = u32(k);
                mv.x_offset = gpu_offset(in.x, 4);
                mv.qpt      = ceil_div(4 * nb, mv.wg);
                mv.eps      = in.eps;
            }
            // A [q; k; v] candidate (one token, one part, no gate, no residual): recorded late, so that a
            // rope_kv_append right after it can take it with the RoPE in its epilogue
            // (encode_family_rope_kv; H200 tg64 llama-3.2-1b Q4_0 1,396.1 vs 1,322.5 tok/s without).
            if (!glu_act && !accumulate && T == 1 && parts.size() == 1) {
                fa_q1_  = {};
                fa_qkv_ = mv;
                step_->defer(mv.y, y0, [this, mv] { encode_family_matvec(mv, nullptr); });
                continue;
            }
            encode_family_matvec(mv, nullptr);
            if (qout) fa_ready_ = {gpu_buffer(y), gpu_offset(y, 4), n_out, T, step_->serial(), mv.oacts};
            continue;
        }
        // Weights loaded ahead of the prologue: the lane's blocks, at most family_prefetch (Q8_0: 4).
        const uint32_t lanes = wg / (rows * per);
        const uint32_t pf    = takes_q8_0(part.type)
                                   ? std::min<uint32_t>({tune_.family_prefetch, part.type == DType::q8_0 ? 4u : 8u,
                                                         static_cast<uint32_t>(ceil_div(nb, lanes))})
                                   : 0u;
        struct {
            uint32_t n_rows, k;
            float    eps;
            uint32_t x_offset, x_stride, nw_offset, y_offset, y_stride, scales_offset, up_row, activation;
        } p{n, u32(k), in.eps, gpu_offset(in.x, 4), u32(in.x.ne[0]), 0, y0, u32(y.ne[0]), part.scales_offset,
            u32(n_out), act};
        const PipelineKey key{dot4_native_ ? "matvec_q8" : "matvec_q8_nodp4",
                              "rrrrwu",
                              {{{"WG", static_cast<double>(wg)},
                                {"ROWS", static_cast<double>(rows)},
                                {"MROWS", static_cast<double>(rows * per)},
                                {"NB", static_cast<double>(nb)},
                                {"WTYPE", wtype},
                                {"GROUP", static_cast<double>(part.group)},
                                {"QPT", static_cast<double>(ceil_div(4 * nb, wg))},
                                {"NT", static_cast<double>(nt)},
                                {"PF", static_cast<double>(pf)},
                                {"NORM", in.norm ? 1.0 : 0.0},
                                {"GLU", glu_act ? 1.0 : 0.0},
                                {"ACCUMULATE", accumulate ? 1.0 : 0.0},
                                // (WebGpuTuning::family_q1_sg: the low-bit types' prologue by subgroup shuffles)
                                {"Q8_TOTAL_SG", wtype == 7.0 && tune_.family_q1_sg != 0 ? 1.0 : 0.0}}}};
        // A Q1_0 / Q2_0 / PQ2_0 [q; k; v] candidate (one token, no gate, no residual): recorded late, so
        // that a rope_kv_append right after it can take it as matvec_q1_qkv.wgsl (encode_q1_qkv_rope).
        if (wtype == 7.0 && tune_.family_q1_rope != 0 && !glu_act && !accumulate && T == 1 && parts.size() == 1) {
            fa_qkv_ = {};
            fa_q1_  = {part.words, gpu_buffer(in.x), nw, gpu_buffer(y), u32(k), gpu_offset(in.x, 4), part.scales_offset,
                       n, y0, u32(part.group), in.eps, in.norm != nullptr};
            const std::array<WGPUBuffer, 5> held{bufs[0], bufs[1], bufs[2], bufs[3], bufs[4]};
            const uint32_t                  groups = ceil_div(n, rows);
            step_->defer(gpu_buffer(y), y0, [this, key, held, p, groups] {
                step_->dispatch(key, held, &p, sizeof p, groups, 1);
            });
            continue;
        }
        step_->dispatch(key, bufs, &p, sizeof p, ceil_div(n, rows), u32(T));
    }
    return true;
}

// matvec_q1_qkv.wgsl in place of the deferred fa_q1_ matvec_q8 and the rope_kv_family after it: one
// token (the caller checks), a workgroup per head (head_dim rows: the QK-norm's and NeoX pairs' rows
// its own), where the threads, the workgroup memory and the norms' host copies allow; false (nothing
// recorded, the deferred matvec kept) otherwise.
bool WebGpuBackend::encode_q1_qkv_rope(const Tensor & q, const KvLayer & kv, const AttentionShape & s, int64_t pos0,
                                       const RopeTable & rope) {
    const FamilyQ1Qkv c  = fa_q1_;
    const int64_t     hd = s.head_dim, n_q = s.n_head * hd, n_kv = s.n_head_kv * hd;
    const uint32_t    wg = std::min<uint32_t>(tune_.family_q1_rope, ctx_.limits().maxComputeInvocationsPerWorkgroup);
    const int64_t     nb = c.k / 32, nt = c.k / std::max<uint32_t>(c.group, 1);
    if (c.words == nullptr || tune_.family_q1_rope == 0 || hd > wg || c.n_rows != n_q + 2 * n_kv || c.group % 64 != 0 ||
        (c.norm && nb > wg) || ceil_div(4 * nb, wg) > 8)
        return false;
    auto host_ok = [&](const Weight * n) { return n == nullptr || static_cast<int64_t>(as_norm(*n).host.size()) == hd; };
    if (!host_ok(s.q_norm) || !host_ok(s.k_norm)) return false;
    // Workgroup memory: the staged blocks and the prologue's exchanges (as try_family_decode), the
    // terms (a row every NT + 1), the head's sums and rotated values.
    const uint64_t need = static_cast<uint64_t>(nb) * 60 + uint64_t{wg} * 8 + static_cast<uint64_t>(hd * (nt + 1) * 4) +
                          static_cast<uint64_t>(hd) * 8 + 16;
    if (need > ctx_.limits().maxComputeWorkgroupStorageSize) return false;
    if (!step_->take_deferred(c.y, c.y_offset)) return false;
    fa_q1_ = {};
    std::unique_ptr<GpuBuffer> & qkn = qk_norms_[{s.q_norm, s.k_norm}];
    if (!qkn) {
        std::vector<float> both(static_cast<size_t>(2 * hd), 0.0f);
        if (s.q_norm) std::copy_n(as_norm(*s.q_norm).host.begin(), hd, both.begin());
        if (s.k_norm) std::copy_n(as_norm(*s.k_norm).host.begin(), hd, both.begin() + hd);
        qkn = make_buffer(both.size() * 4, both.data(), "q and k norms");
    }
    const size_t k_el = kv.k.type == DType::f16 ? 2 : 4;
    const size_t v_el = kv.v.type == DType::f16 ? 2 : 4;
    struct {
        uint32_t k;
        float    eps;
        uint32_t x_offset, nw_offset, scales_offset, n_rot, n_head, n_head_kv, pos, q_offset, k_offset, v_offset,
            n_embd_kv;
        float    qk_eps;
    } p{c.k,         c.eps,          c.x_offset,       0, c.scales_offset,        u32(s.n_rot),           u32(s.n_head),
        u32(s.n_head_kv), u32(pos0), gpu_offset(q, 4), gpu_offset(kv.k, k_el), gpu_offset(kv.v, v_el), u32(n_kv),
        s.qk_norm_eps};
    const PipelineKey key{dot4_native_ ? "matvec_q1_qkv" : "matvec_q1_qkv_nodp4",
                          "rrrrrwwwu",
                          {{{"WG", static_cast<double>(wg)},
                            {"ROWS", static_cast<double>(hd)},
                            {"NB", static_cast<double>(nb)},
                            {"QPT", static_cast<double>(ceil_div(4 * nb, wg))},
                            {"GROUP", static_cast<double>(c.group)},
                            {"NT", static_cast<double>(nt)},
                            {"NORM", c.norm ? 1.0 : 0.0},
                            {"Q_NORM", s.q_norm ? 1.0 : 0.0},
                            {"K_NORM", s.k_norm ? 1.0 : 0.0},
                            {"NORM_MODE", s.rope_mode == RopeMode::norm ? 1.0 : 0.0},
                            {"K_F16", kv.k.type == DType::f16 ? 1.0 : 0.0},
                            {"V_F16", kv.v.type == DType::f16 ? 1.0 : 0.0},
                            {"Q8_TOTAL_SG", tune_.family_q1_sg != 0 ? 1.0 : 0.0}}}};
    const WGPUBuffer bufs[] = {c.words, c.x, c.nw, rope.buffer->get(), qkn->get(), gpu_buffer(q), gpu_buffer(kv.k),
                               gpu_buffer(kv.v)};
    step_->dispatch(key, bufs, &p, sizeof p, u32(s.n_head + 2 * s.n_head_kv), 1);
    return true;
}

// A ternary weight (I2_S, TQ1_0, TQ2_0) of a family: the input as per-token int8 (the CPU's
// quantize_act_row after its rms_norm: rms_norm_quant.wgsl with or without the norm) into scratch,
// then BitNet's bitlinear / gate_up kernels. Null where the weight is not ternary.
const QuantizedActs * WebGpuBackend::family_int8_input(const Weight & w, const LinearInput & in) {
    if (!(w.type == DType::i2_s || w.type == DType::tq1_0 || w.type == DType::tq2_0) || in.x.buffer == nullptr) return nullptr;
    const int64_t k = in.x.ne[0], T = in.x.ne[1];
    TERN_ASSERT(k == w.n_cols && k % 4 == 0 && in.x.type == DType::f32, "family int8 input shapes");
    grown(mm_i8_, static_cast<size_t>(k * T), "family int8 activations");
    grown(mm_i8_scale_, static_cast<size_t>(T) * 4, "family int8 scales");
    family_acts_.q.buffer     = mm_i8_.get();
    family_acts_.q.type       = DType::i8;
    family_acts_.q.ne         = {k, T, 1, 1};
    family_acts_.scale.buffer = mm_i8_scale_.get();
    family_acts_.scale.type   = DType::f32;
    family_acts_.scale.ne     = {T, 1, 1, 1};
    if (in.norm != nullptr) {
        rms_norm_quant(family_acts_, in.x, *in.norm, in.eps);
        return &family_acts_;
    }
    struct {
        uint32_t k;
        float    eps;
        uint32_t x_offset, x_stride, w_offset, q_offset, q_stride, scale_offset;
    } p{u32(k), 0.0f, gpu_offset(in.x, 4), u32(in.x.ne[0]), 0, 0, u32(k / 4), 0};
    const PipelineKey key{"rms_norm_quant", "rrwwu", {{{"WG", 256}, {"NORM", 0.0}}}};  // (no norm: any K)
    const WGPUBuffer  bufs[] = {gpu_buffer(in.x), gpu_buffer(in.x), mm_i8_->get(), mm_i8_scale_->get()};
    step_->dispatch(key, bufs, &p, sizeof p, u32(T));
    return &family_acts_;
}

void WebGpuBackend::family_linear(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate) {
    if (try_family_decode(y, w, in, accumulate, nullptr)) return;
    if (const QuantizedActs * a = family_int8_input(w, in)) return bitlinear(y, w, *a, accumulate);
    Backend::linear(y, w, in, accumulate);
}

void WebGpuBackend::family_linear_glu(const Tensor & f, const Weight & w, const LinearInput & in, FfnActivation act) {
    if (try_family_decode(f, w, in, false, &act)) return;
    if (const QuantizedActs * a = family_int8_input(w, in)) return gate_up(f, w, *a, act);
    Backend::linear_glu(f, w, in, act);
}

void WebGpuBackend::matmul_glu(const Tensor & f, const Weight & w, const Tensor & x, FfnActivation act) {
    const int64_t n_ff = w.n_rows / 2;
    const int64_t T    = x.ne[1];
    TERN_ASSERT(f.ne[0] == n_ff && f.ne[1] == T, "matmul_glu shapes");
    grown(mm_glu_, static_cast<size_t>(w.n_rows * T * 4), "matmul_glu gate and up");
    Tensor gu;
    gu.buffer = mm_glu_.get();
    gu.type   = DType::f32;
    gu.ne     = {w.n_rows, T, 1, 1};
    matmul(gu, w, x, false);
    struct {
        uint32_t n_ff, gu_offset, f_offset, activation;
    } p{u32(n_ff), 0, gpu_offset(f, 4), act == FfnActivation::relu2 ? 0u : 1u};
    const PipelineKey key{"glu", "rwu", {{{"WG", 64}}}};
    const WGPUBuffer  bufs[] = {mm_glu_->get(), gpu_buffer(f)};
    step_->dispatch(key, bufs, &p, sizeof p, ceil_div(n_ff, 64), u32(T));
}

const RopeTable & WebGpuBackend::family_rope_table(const AttentionShape & s, int64_t n_pos) {
    RopeTable & r = family_ropes_[{s.n_rot, s.rope_freq_base, s.rope_freq_scale, s.rope_freqs}];
    if (r.buffer && r.n_pos >= n_pos) return r;
    int64_t cap = std::max<int64_t>(r.n_pos * 2, 256);
    while (cap < n_pos) cap *= 2;
    const int64_t half    = s.n_rot / 2;
    const float * factors = s.rope_freqs ? as_norm(*s.rope_freqs).host.data() : nullptr;
    TERN_ASSERT(!s.rope_freqs || static_cast<int64_t>(as_norm(*s.rope_freqs).host.size()) >= half, "rope_freqs size");
    std::vector<float> table(static_cast<size_t>(cap * half * 2));
    // The same expressions as cpu::rope_head (f32 pow, recurrence, divisor, scale, cpu::cos_sin_fixed).
    const float theta_scale = std::pow(s.rope_freq_base, -2.0f / static_cast<float>(s.n_rot));
    for (int64_t pos = 0; pos < cap; ++pos) {
        float theta = static_cast<float>(pos);
        for (int64_t i = 0; i < half; ++i) {
            const float t = s.rope_freq_scale * (factors ? theta / factors[i] : theta);
            float * cs = &table[static_cast<size_t>((pos * half + i) * 2)];
            cpu::cos_sin_fixed(t, cs, cs + 1);
            theta *= theta_scale;
        }
    }
    // Work recorded against the old table keeps its buffer alive until it ran; a deferred dispatch (a
    // [q; k; v] matvec, which reads no table) stays deferred for the rope_kv_append that asked.
    step_->flush_keeping_deferred();
    r.n_rot     = s.n_rot;
    r.freq_base = s.rope_freq_base;
    r.n_pos     = cap;
    r.buffer    = make_buffer(table.size() * 4, table.data(), "family rope table");
    return r;
}

void WebGpuBackend::rope_kv_append(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & s,
                                   int64_t pos0) {
    TERN_ASSERT(pos0 >= 0 && pos0 + qkv.ne[1] <= kv.k.ne[1], "positions past the KV cache");
    encode_family_rope_kv(q, kv, qkv, s, pos0, nullptr);
}

void WebGpuBackend::rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Tensor & qkv,
                                         const AttentionShape & s, const KvBatch & batch) {
    TERN_ASSERT(batch.n_tokens() == qkv.ne[1] && batch.columns.ne[1] == qkv.ne[1] && batch.columns.type == DType::i32,
                "rope_kv_append_paged: the batch's columns");
    encode_family_rope_kv(q, kv, qkv, s, 0, &batch);
}

// rope_kv_family.wgsl: column t at position pos0 + t (cache row the same), or where `batch` puts it.
void WebGpuBackend::encode_family_rope_kv(const Tensor & q, const KvLayer & kv, const Tensor & qkv,
                                          const AttentionShape & s, int64_t pos0, const KvBatch * batch) {
    const int64_t hd = s.head_dim, n_q = s.n_head * hd, n_kv = s.n_head_kv * hd;
    const int64_t T  = qkv.ne[1];
    TERN_ASSERT(qkv.ne[0] == n_q + 2 * n_kv && q.ne[0] == n_q && kv.k.ne[0] == n_kv, "rope_kv_append shapes");
    if (hd % 2 != 0 || hd > 256 || s.n_rot % 2 != 0 || s.n_rot > hd) {
        fail(ErrorKind::unsupported, format("webgpu: head_dim %lld with %lld rotated dimensions; rope_kv_family.wgsl "
                                            "needs even values and head_dim <= 256",
                                            static_cast<long long>(hd), static_cast<long long>(s.n_rot)),
             "use --backend cpu for this model");
    }
    const int64_t     n_pos = batch ? batch->max_position() + 1 : pos0 + T;
    const RopeTable & rope  = family_rope_table(s, n_pos);  // (a new table flushes: a deferred qkv runs)
    if (!mm_zero_norm_) mm_zero_norm_ = make_buffer(16, nullptr, "no qk norm");
    const size_t     k_el = kv.k.type == DType::f16 ? 2 : 4;
    const size_t     v_el = kv.v.type == DType::f16 ? 2 : 4;
    // One token's [q; k; v] matvec, still deferred (try_family_decode): recorded now as
    // its ROPE variant, where no QK-norm applies, every dim rotates, and its workgroups own whole
    // pairs (norm: even rows per workgroup; NeoX: a multiple of 4, head_dim / 2 even).
    // A deferred Q1_0 / Q2_0 / PQ2_0 [q; k; v] matvec_q8 writing qkv: matvec_q1_qkv.wgsl instead of both.
    if (!batch && T == 1 && hd % 2 == 0 && fa_q1_.y == gpu_buffer(qkv) && fa_q1_.y_offset == gpu_offset(qkv, 4) &&
        encode_q1_qkv_rope(q, kv, s, pos0, rope)) {
        return;
    }
    const uint32_t rows = fa_qkv_.rows;
    if (!batch && T == 1 && !s.q_norm && !s.k_norm && s.n_rot == hd && rows % 2 == 0 &&
        (s.rope_mode == RopeMode::norm || (rows % 4 == 0 && hd % 4 == 0)) && fa_qkv_.n_rows == qkv.ne[0] &&
        fa_qkv_.n_rows % rows == 0 && fa_qkv_.y == gpu_buffer(qkv) && fa_qkv_.y_offset == gpu_offset(qkv, 4) &&
        step_->take_deferred(gpu_buffer(qkv), gpu_offset(qkv, 4))) {
        const FamilyRope r{rope.buffer->get(), gpu_buffer(q), gpu_buffer(kv.k), gpu_buffer(kv.v),
                           gpu_offset(q, 4), u32(hd), u32(n_q), u32(n_kv), u32(pos0),
                           gpu_offset(kv.k, k_el), gpu_offset(kv.v, v_el), s.rope_mode == RopeMode::norm,
                           kv.k.type == DType::f16, kv.v.type == DType::f16};
        encode_family_matvec(fa_qkv_, &r);
        return;
    }
    const WGPUBuffer qn   = s.q_norm ? as_norm(*s.q_norm).buffer->get() : mm_zero_norm_->get();
    const WGPUBuffer kn   = s.k_norm ? as_norm(*s.k_norm).buffer->get() : mm_zero_norm_->get();
    TERN_ASSERT(kv.k.offset % 4 == 0 && kv.v.offset % 4 == 0, "KV cache views must be 4-byte aligned");
    struct {
        uint32_t head_dim, n_rot, n_head, n_head_kv, pos0, x_offset, x_stride, q_offset, q_stride, k_offset, v_offset,
            n_embd_kv;
        float    eps;
        uint32_t cols_offset;
    } p{u32(hd),           u32(s.n_rot),       u32(s.n_head),  u32(s.n_head_kv),       u32(pos0),
        gpu_offset(qkv, 4), u32(qkv.ne[0]),    gpu_offset(q, 4), u32(n_q),             gpu_offset(kv.k, k_el),
        gpu_offset(kv.v, v_el), u32(n_kv),     s.qk_norm_eps,  batch ? gpu_offset(batch->columns, 4) : 0u};
    uint32_t wg = 32;  // an invocation per pair of dimensions
    while (wg < hd / 2) wg *= 2;
    const PipelineKey key{"rope_kv_family",
                          "rrrrrwwwu",
                          {{{"WG", static_cast<double>(wg)},
                            {"K_F16", kv.k.type == DType::f16 ? 1.0 : 0.0},
                            {"V_F16", kv.v.type == DType::f16 ? 1.0 : 0.0},
                            {"Q_NORM", s.q_norm ? 1.0 : 0.0},
                            {"K_NORM", s.k_norm ? 1.0 : 0.0},
                            {"NORM_MODE", s.rope_mode == RopeMode::norm ? 1.0 : 0.0},
                            {"PAGED", batch ? 1.0 : 0.0}}}};
    const WGPUBuffer bufs[] = {gpu_buffer(qkv), rope.buffer->get(), qn, kn, batch ? gpu_buffer(batch->columns) : gpu_buffer(qkv),
                               gpu_buffer(q), gpu_buffer(kv.k), gpu_buffer(kv.v)};
    step_->dispatch(key, bufs, &p, sizeof p, u32(s.n_head + 2 * s.n_head_kv), u32(T));
}

}  // namespace tern
