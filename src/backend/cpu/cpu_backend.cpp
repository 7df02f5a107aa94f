// CpuBackend: the scalar reference. Executes each op of backend.h eagerly with the scalar kernels of
// cpu_ops.h, spreading output rows over a thread pool. Scratch buffers are sized at load time (largest K, n_embd, n_ctx)
// so that a forward pass allocates nothing once warmed up.
#include "backend/cpu/cpu_backend.h"

#include "backend/cpu/cpu_matmul.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_weights.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

namespace tern {
namespace {

template <typename T>
T * ptr(const Tensor & t) {
    auto * b = static_cast<CpuBuffer *>(t.buffer);
    TERN_ASSERT(b != nullptr, "tensor without buffer");
    TERN_ASSERT(t.offset + t.n_bytes() <= b->size_bytes(), "tensor view past the end of its buffer");
    return reinterpret_cast<T *>(b->data() + t.offset);
}

// Exact f16 -> f32 for every bit pattern: one 256 KiB table instead of branches in the LM head loop.
const float * fp16_table() {
    static const std::vector<float> table = [] {
        std::vector<float> t(65536);
        for (uint32_t i = 0; i < 65536; ++i) t[i] = fp16_to_fp32(static_cast<uint16_t>(i));
        return t;
    }();
    return table.data();
}

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int n_threads) : pool_(n_threads) {
        scratch_.resize(static_cast<size_t>(pool_.n_threads()));
    }

    std::string_view name() const override { return "cpu"; }

    DeviceInfo device_info() const override {
        return {"cpu", format("scalar reference kernels, %d threads", pool_.n_threads())};
    }

    bool supports_linear(DType type) const override {
        switch (type) {
            case DType::i2_s: case DType::tq1_0: case DType::tq2_0: case DType::q2_0: case DType::pq2_0:
            case DType::q1_0: return true;
            default: return cpu_matrix_type(type);
        }
    }
    bool supports_embedding(DType type) const override { return type != DType::i2_s && type != DType::i8 && type != DType::i32; }

    std::unique_ptr<Buffer> alloc(size_t n_bytes, const char * /*label*/) override {
        return std::make_unique<CpuBuffer>(n_bytes);
    }
    void write(const Tensor & dst, const void * src, size_t n_bytes) override {
        TERN_ASSERT(n_bytes <= dst.n_bytes(), "write of %zu bytes into a %zu-byte tensor", n_bytes, dst.n_bytes());
        std::memcpy(ptr<uint8_t>(dst), src, n_bytes);
    }
    void read(const Tensor & src, void * dst, size_t n_bytes) override {
        TERN_ASSERT(n_bytes <= src.n_bytes(), "read of %zu bytes from a %zu-byte tensor", n_bytes, src.n_bytes());
        std::memcpy(dst, ptr<uint8_t>(src), n_bytes);
    }

    std::unique_ptr<Weight> load_norm(const WeightSource & src) override {
        grow_scratch(src.ne[0]);
        auto w     = cpu_pack_norm(src);
        w->n_bytes = w->w.size() * sizeof(float);
        return w;
    }
    std::unique_ptr<Weight> load_linear(std::span<const WeightSource> parts) override {
        if (!parts.empty() && !dtype_is_lowbit(parts[0].type)) {
            auto m = cpu_pack_matrix(parts);
            grow_scratch(m->n_cols);
            return m;
        }
        auto w = cpu_pack_linear(parts);
        w->type = parts[0].type;
        grow_scratch(w->n_cols);
        w->n_bytes = w->codes.size() + (w->scales.size() + w->output_scales.size()) * sizeof(float);
        return w;
    }
    std::unique_ptr<Weight> load_embedding(const WeightSource & src) override {
        auto w = cpu_pack_embedding(src);
        grow_scratch(w->n_cols);
        w->n_bytes = w->src.data.size();  // read in the file's layout
        return w;
    }

    // memcpy of n_bytes split into one contiguous slice per pool thread, best of 5 after a warm-up.
    double measure_copy_bandwidth(size_t n_bytes) override {
        n_bytes = std::max<size_t>(n_bytes, 4096);
        std::vector<uint8_t> src(n_bytes), dst(n_bytes);
        const int64_t        n_chunks = pool_.n_threads();
        const int64_t        chunk    = static_cast<int64_t>(n_bytes) / n_chunks;
        auto                 copy     = [&](uint8_t value) {
            pool_.parallel_for(n_chunks, 1, [&](int64_t c0, int64_t c1, int) {
                for (int64_t c = c0; c < c1; ++c) {
                    const size_t b = static_cast<size_t>(c * chunk);
                    const size_t e = c + 1 == n_chunks ? n_bytes : static_cast<size_t>((c + 1) * chunk);
                    if (value != 0) std::memset(src.data() + b, value, e - b);  // first touch per thread
                    std::memcpy(dst.data() + b, src.data() + b, e - b);
                }
            });
        };
        copy(1);  // maps every page (in the threads that use them) and warms up
        double best = 0;
        for (int rep = 0; rep < 5; ++rep) {
            const auto   t0 = std::chrono::steady_clock::now();
            copy(0);
            const double s  = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (s > 0) best = std::max(best, 2.0 * static_cast<double>(n_bytes) / s);
        }
        return best;
    }

    void begin_step() override {}
    void end_step() override {}
    void synchronize() override {}

    void embed(const Tensor & x, const Weight & token_embd, const Tensor & tokens) override {
        const auto &    e   = static_cast<const CpuEmbedding &>(token_embd);
        const int32_t * ids = ptr<int32_t>(tokens);
        float *         out = ptr<float>(x);
        for (int64_t t = 0; t < tokens.ne[0]; ++t) {
            const int32_t id = ids[t];
            if (id < 0 || id >= e.n_rows) {
                fail(ErrorKind::invalid_argument,
                     format("token id %d is outside the vocabulary (0..%lld)", id, static_cast<long long>(e.n_rows - 1)));
            }
            dequantize_row(e.src.type, e.src.data.data() + static_cast<size_t>(id) * e.row_bytes, out + t * x.ne[0],
                           e.n_cols);
        }
    }

    void rms_norm(const Tensor & y, const Tensor & x, const Weight & w, float eps) override {
        const auto &  nw = static_cast<const CpuNorm &>(w);
        const int64_t k  = x.ne[0];
        TERN_ASSERT(nw.n_cols == k, "norm of %lld over %lld", static_cast<long long>(nw.n_cols), static_cast<long long>(k));
        const float * in  = ptr<float>(x);
        float *       out = ptr<float>(y);
        for (int64_t t = 0; t < x.ne[1]; ++t) cpu::rms_norm_row(in + t * k, nw.w.data(), out + t * k, k, eps);
    }

    void rms_norm_quant(const QuantizedActs & a, const Tensor & x, const Weight & w, float eps) override {
        const auto &  nw = static_cast<const CpuNorm &>(w);
        const int64_t k  = x.ne[0];
        TERN_ASSERT(nw.n_cols == k && a.q.ne[0] == k, "rms_norm_quant shapes");
        const float * in    = ptr<float>(x);
        int8_t *      q     = ptr<int8_t>(a.q);
        float *       scale = ptr<float>(a.scale);
        pool_.parallel_for(x.ne[1], 1, [&](int64_t t0, int64_t t1, int ti) {
            float * normed = scratch_[static_cast<size_t>(ti)].f.data();
            for (int64_t t = t0; t < t1; ++t) {
                cpu::rms_norm_row(in + t * k, nw.w.data(), normed, k, eps);
                scale[t] = cpu::quantize_act_row(normed, q + t * k, k);
            }
        });
    }

    void bitlinear(const Tensor & y, const Weight & w, const QuantizedActs & a, bool accumulate) override {
        const auto & lw = static_cast<const CpuLinear &>(w);
        TERN_ASSERT(y.ne[0] == lw.n_rows && a.q.ne[0] == lw.n_cols && y.ne[1] == a.q.ne[1], "bitlinear shapes");
        float * out = ptr<float>(y);
        run_linear(lw, a, 0, lw.n_rows, [&](int64_t r, int64_t t, float v) {
            float & dst = out[t * y.ne[0] + r];
            dst         = accumulate ? dst + v : v;
        });
    }

    void qkv_rope_kv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                            const AttentionShape & s, int64_t pos0) override {
        TERN_ASSERT(pos0 >= 0 && pos0 + a.q.ne[1] <= kv.k.ne[1], "positions past the KV cache");
        qkv_append(q, kv, wqkv, a, s, [pos0](int64_t t) { return std::pair{pos0 + t, pos0 + t}; });
    }

    void qkv_rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                                  const AttentionShape & s, const KvBatch & batch) override {
        index_columns(batch, a.q.ne[1], kv);
        qkv_append(q, kv, wqkv, a, s, [&](int64_t t) {
            const int64_t sq  = col_seq_[static_cast<size_t>(t)];
            const int64_t pos = batch.seqs[static_cast<size_t>(sq)].pos0 + t - batch.seqs[static_cast<size_t>(sq)].first;
            return std::pair{pos, batch.cache_row(static_cast<size_t>(sq), pos)};
        });
    }

    void attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s,
                   int64_t pos0) override {
        TERN_ASSERT(pos0 + q.ne[1] <= kv.k.ne[1], "attention past the KV cache");
        attend(out, q, kv, s, pos0 + q.ne[1], [pos0](int64_t t) { return pos0 + t; },
               [](int64_t, int64_t p) { return p; });
    }

    void attention_paged(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s,
                         const KvBatch & batch) override {
        index_columns(batch, q.ne[1], kv);
        const auto pos_of = [&](int64_t t) {
            const KvSeq & sq = batch.seqs[static_cast<size_t>(col_seq_[static_cast<size_t>(t)])];
            return sq.pos0 + t - sq.first;
        };
        const auto row_of = [&](int64_t t, int64_t p) {
            return batch.cache_row(static_cast<size_t>(col_seq_[static_cast<size_t>(t)]), p);
        };
        attend(out, q, kv, s, batch.max_position() + 1, pos_of, row_of);
    }

    void gather_columns(const Tensor & dst, const Tensor & src, const Tensor & cols) override {
        const int64_t   k  = src.ne[0];
        const int32_t * ci = ptr<int32_t>(cols);
        TERN_ASSERT(dst.ne[0] == k && dst.ne[1] == cols.ne[0] && src.type == DType::f32 && dst.type == DType::f32,
                    "gather_columns shapes");
        for (int64_t i = 0; i < cols.ne[0]; ++i) {
            TERN_ASSERT(ci[i] >= 0 && ci[i] < src.ne[1], "gather_columns: column %d of %lld", ci[i],
                        static_cast<long long>(src.ne[1]));
            std::memmove(ptr<float>(dst) + i * k, ptr<float>(src) + ci[i] * k, static_cast<size_t>(k) * sizeof(float));
        }
    }

    void gate_up(const Tensor & f, const Weight & w_gate_up, const QuantizedActs & a, FfnActivation act) override {
        const auto &  lw   = static_cast<const CpuLinear &>(w_gate_up);
        const int64_t n_ff = lw.n_rows / 2;
        TERN_ASSERT(f.ne[0] == n_ff && f.ne[1] == a.q.ne[1], "gate_up shapes");
        float * out = ptr<float>(f);
        // Gate row r and up row n_ff + r are computed by the same thread, so f needs no second pass.
        const int64_t k = lw.n_cols;
        const int8_t * q = ptr<int8_t>(a.q);
        const float *  act_scale = ptr<float>(a.scale);
        const int64_t  n_groups  = k / lw.group;
        const int64_t  n_tok     = a.q.ne[1];
        pool_.parallel_for(n_ff, 16, [&](int64_t r0, int64_t r1, int ti) {
            Scratch & sc = scratch_[static_cast<size_t>(ti)];
            int8_t *  wg = sc.w.data();
            int8_t *  wu = sc.w2.data();
            for (int64_t r = r0; r < r1; ++r) {
                cpu::unpack_codes_row(lw.codes.data() + r * (k / 4), k, wg);
                cpu::unpack_codes_row(lw.codes.data() + (n_ff + r) * (k / 4), k, wu);
                const float * sg = lw.scales.data() + r * n_groups;
                const float * su = lw.scales.data() + (n_ff + r) * n_groups;
                for (int64_t t = 0; t < n_tok; ++t) {
                    const float g = cpu::bitlinear_dot(wg, sg, lw.group, q + t * k, act_scale[t], k) *
                                    lw.output_scales[static_cast<size_t>(r)];
                    const float u = cpu::bitlinear_dot(wu, su, lw.group, q + t * k, act_scale[t], k) *
                                    lw.output_scales[static_cast<size_t>(n_ff + r)];
                    const float gg = act == FfnActivation::relu2 ? cpu::relu2(g) : cpu::silu(g);
                    out[t * n_ff + r] = gg * u;
                }
            }
        });
    }

    void lm_head(const Tensor & logits, const Weight & head, const Tensor & h, bool round_input_f16) override {
        const auto &  e     = static_cast<const CpuEmbedding &>(head);
        const int64_t k     = e.n_cols;
        const int64_t n_tok = h.ne[1];
        TERN_ASSERT(h.ne[0] == k && logits.ne[0] == e.n_rows && logits.ne[1] == n_tok, "lm_head shapes");
        const float * hp = ptr<float>(h);
        if (hin_.size() < static_cast<size_t>(k * n_tok)) hin_.resize(static_cast<size_t>(k * n_tok));
        for (int64_t i = 0; i < k * n_tok; ++i) hin_[static_cast<size_t>(i)] = round_input_f16 ? round_to_fp16(hp[i]) : hp[i];
        float *       out   = ptr<float>(logits);
        const float * table = fp16_table();
        pool_.parallel_for(e.n_rows, 64, [&](int64_t r0, int64_t r1, int ti) {
            float * row = scratch_[static_cast<size_t>(ti)].f.data();
            for (int64_t r = r0; r < r1; ++r) {
                const uint8_t * src = e.src.data.data() + static_cast<size_t>(r) * e.row_bytes;
                if (e.src.type == DType::f16) {
                    const auto * h16 = reinterpret_cast<const uint16_t *>(src);
                    for (int64_t i = 0; i < k; ++i) row[i] = table[h16[i]];
                } else {
                    dequantize_row(e.src.type, src, row, k);
                }
                for (int64_t t = 0; t < n_tok; ++t) out[t * e.n_rows + r] = cpu::dot_f32(row, hin_.data() + t * k, k);
            }
        });
    }

    void argmax(const Tensor & ids, const Tensor & logits) override {
        const float * l   = ptr<float>(logits);
        int32_t *     out = ptr<int32_t>(ids);
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

    void matmul(const Tensor & y, const Weight & w, const Tensor & x, bool accumulate) override {
        TERN_ASSERT(y.ne[0] == w.n_rows && x.ne[0] == w.n_cols && y.ne[1] == x.ne[1], "matmul shapes");
        float * out = ptr<float>(y);
        run_matmul(w, x, 0, w.n_rows, [&](int64_t r, int64_t t, float v) {
            float & dst = out[t * y.ne[0] + r];
            dst         = accumulate ? dst + v : v;
        });
    }

    void matmul_glu(const Tensor & f, const Weight & w, const Tensor & x, FfnActivation act) override {
        const int64_t n_ff = w.n_rows / 2;
        TERN_ASSERT(f.ne[0] == n_ff && x.ne[0] == w.n_cols && f.ne[1] == x.ne[1], "matmul_glu shapes");
        const int64_t n_tok = x.ne[1];
        if (glu_.size() < static_cast<size_t>(w.n_rows * n_tok)) glu_.resize(static_cast<size_t>(w.n_rows * n_tok));
        float * gu = glu_.data();
        run_matmul(w, x, 0, w.n_rows, [&](int64_t r, int64_t t, float v) { gu[t * w.n_rows + r] = v; });
        float * out = ptr<float>(f);
        for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < n_ff; ++r) {
                const float g     = gu[t * w.n_rows + r];
                const float gg    = act == FfnActivation::relu2 ? cpu::relu2(g) : cpu::silu(g);
                out[t * n_ff + r] = gg * gu[t * w.n_rows + n_ff + r];
            }
        }
    }

    void rope_kv_append(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & s,
                        int64_t pos0) override {
        TERN_ASSERT(pos0 >= 0 && pos0 + qkv.ne[1] <= kv.k.ne[1], "positions past the KV cache");
        rope_append(q, kv, qkv, s, [pos0](int64_t t) { return std::pair{pos0 + t, pos0 + t}; });
    }

    void rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & s,
                              const KvBatch & batch) override {
        index_columns(batch, qkv.ne[1], kv);
        rope_append(q, kv, qkv, s, [&](int64_t t) {
            const int64_t sq  = col_seq_[static_cast<size_t>(t)];
            const int64_t pos = batch.seqs[static_cast<size_t>(sq)].pos0 + t - batch.seqs[static_cast<size_t>(sq)].first;
            return std::pair{pos, batch.cache_row(static_cast<size_t>(sq), pos)};
        });
    }

private:
    struct Scratch {
        std::vector<float>  f;       // a row of K floats (normed activations, dequantized rows)
        std::vector<int8_t> w, w2;   // unpacked weight rows
        std::vector<float>  k_rows, v_rows;  // one superblock of a head: K and V rows [512][head_dim]
        std::vector<float>  scores;          // [512]
        std::vector<float>  sup_o;           // [n_super + 1][head_dim]: each superblock's O, then the row's
        std::vector<cpu::AttnPartial> sup;   // [n_super]
    };

    void grow_scratch(int64_t k) {
        for (auto & sc : scratch_) {
            if (sc.f.size() < static_cast<size_t>(k)) {
                sc.f.resize(static_cast<size_t>(k));
                sc.w.resize(static_cast<size_t>(k));
                sc.w2.resize(static_cast<size_t>(k));
            }
        }
    }
    void grow_attention_scratch(int64_t n_ctx, int64_t hd) {
        const size_t n_super = static_cast<size_t>((n_ctx + cpu::k_pos_super - 1) / cpu::k_pos_super);
        const size_t rows    = static_cast<size_t>(std::min(n_ctx, cpu::k_pos_super) * hd);
        for (auto & sc : scratch_) {
            if (sc.k_rows.size() < rows) {
                sc.k_rows.resize(rows);
                sc.v_rows.resize(rows);
                sc.scores.resize(static_cast<size_t>(cpu::k_pos_super));
            }
            if (sc.sup.size() < n_super || sc.sup_o.size() < (n_super + 1) * static_cast<size_t>(hd)) {
                sc.sup.resize(n_super);
                sc.sup_o.resize((n_super + 1) * static_cast<size_t>(hd));
            }
        }
    }

    // Calls emit(row, token, value) for rows [r0, r1) of a linear weight applied to every token.
    template <typename Emit>
    void run_linear(const CpuLinear & lw, const QuantizedActs & a, int64_t r0, int64_t r1, Emit && emit) {
        const int64_t  k         = lw.n_cols;
        const int8_t * q         = ptr<int8_t>(a.q);
        const float *  act_scale = ptr<float>(a.scale);
        const int64_t  n_groups  = k / lw.group;
        const int64_t  n_tok     = a.q.ne[1];
        pool_.parallel_for(r1 - r0, 16, [&](int64_t i0, int64_t i1, int ti) {
            int8_t * wv = scratch_[static_cast<size_t>(ti)].w.data();
            for (int64_t r = r0 + i0; r < r0 + i1; ++r) {
                cpu::unpack_codes_row(lw.codes.data() + r * (k / 4), k, wv);
                const float * sc = lw.scales.data() + r * n_groups;
                const float   os = lw.output_scales[static_cast<size_t>(r)];
                for (int64_t t = 0; t < n_tok; ++t) {
                    float v = cpu::bitlinear_dot(wv, sc, lw.group, q + t * k, act_scale[t], k);
                    if (os != 1.0f) v *= os;
                    emit(r, t, v);
                }
            }
        });
    }

    // Calls emit(row, token, value) for rows [r0, r1) of any linear weight applied to every column
    // of the f32 input x, the input first brought into the form the weight type multiplies.
    template <typename Emit>
    void run_matmul(const Weight & w, const Tensor & x, int64_t r0, int64_t r1, Emit && emit) {
        const int64_t k     = w.n_cols;
        const int64_t n_tok = x.ne[1];
        const float * xp    = ptr<float>(x);
        if (w.type == DType::q1_0 || w.type == DType::q2_0 || w.type == DType::pq2_0) {  // Q8_0 blocks
            const auto &  lw        = static_cast<const CpuLinear &>(w);
            const size_t  col_bytes = static_cast<size_t>(k / 32) * cpu::k_q8_0_block_bytes;
            if (acts_.size() < col_bytes * static_cast<size_t>(n_tok)) acts_.resize(col_bytes * static_cast<size_t>(n_tok));
            for (int64_t t = 0; t < n_tok; ++t) cpu::quantize_row_q8_0_acts(xp + t * k, acts_.data() + t * col_bytes, k);
            const int64_t n_groups = k / lw.group;
            pool_.parallel_for(r1 - r0, 16, [&](int64_t i0, int64_t i1, int ti) {
                int8_t * wv = scratch_[static_cast<size_t>(ti)].w.data();
                for (int64_t r = r0 + i0; r < r0 + i1; ++r) {
                    cpu::unpack_codes_row(lw.codes.data() + r * (k / 4), k, wv);
                    const float * sc = lw.scales.data() + r * n_groups;
                    for (int64_t t = 0; t < n_tok; ++t) {
                        emit(r, t, cpu::dot_lowbit_q8_0(wv, sc, lw.group, acts_.data() + t * col_bytes, k) *
                                       lw.output_scales[static_cast<size_t>(r)]);
                    }
                }
            });
            return;
        }
        if (dtype_is_lowbit(w.type)) {  // ternary: per-token int8 (quantize_act_row), then BitLinear
            const auto & lw = static_cast<const CpuLinear &>(w);
            if (act_i8_.size() < static_cast<size_t>(k * n_tok)) act_i8_.resize(static_cast<size_t>(k * n_tok));
            act_scales_.resize(static_cast<size_t>(n_tok));
            for (int64_t t = 0; t < n_tok; ++t) act_scales_[t] = cpu::quantize_act_row(xp + t * k, act_i8_.data() + t * k, k);
            const int64_t n_groups = k / lw.group;
            pool_.parallel_for(r1 - r0, 16, [&](int64_t i0, int64_t i1, int ti) {
                int8_t * wv = scratch_[static_cast<size_t>(ti)].w.data();
                for (int64_t r = r0 + i0; r < r0 + i1; ++r) {
                    cpu::unpack_codes_row(lw.codes.data() + r * (k / 4), k, wv);
                    const float * sc = lw.scales.data() + r * n_groups;
                    const float   os = lw.output_scales[static_cast<size_t>(r)];
                    for (int64_t t = 0; t < n_tok; ++t) {
                        float v = cpu::bitlinear_dot(wv, sc, lw.group, act_i8_.data() + t * k, act_scales_[t], k);
                        if (os != 1.0f) v *= os;
                        emit(r, t, v);
                    }
                }
            });
            return;
        }
        // Non-ternary parts: the input columns in every form the parts' types need, then the rows.
        const auto & m = static_cast<const CpuMatrix &>(w);
        bool         need_q8_0 = false, need_q8_k = false;
        for (const WeightSource & p : m.parts) {
            need_q8_0 |= cpu::act_form(p.type) == cpu::ActForm::q8_0;
            need_q8_k |= cpu::act_form(p.type) == cpu::ActForm::q8_k;
        }
        const size_t q8_0_bytes = need_q8_0 ? static_cast<size_t>(k / 32) * cpu::k_q8_0_block_bytes : 0;
        const size_t q8_k_bytes = need_q8_k ? static_cast<size_t>(k / 256) * sizeof(cpu::BlockQ8K) : 0;
        const size_t col_bytes  = q8_0_bytes + q8_k_bytes;  // per column: Q8_0 blocks, then Q8_K blocks
        if (acts_.size() < col_bytes * static_cast<size_t>(n_tok)) acts_.resize(col_bytes * static_cast<size_t>(n_tok));
        for (int64_t t = 0; t < n_tok; ++t) {
            uint8_t * dst = acts_.data() + static_cast<size_t>(t) * col_bytes;
            if (need_q8_0) cpu::quantize_row_q8_0_acts(xp + t * k, dst, k);
            if (need_q8_k) cpu::quantize_row_q8_k_acts(xp + t * k, reinterpret_cast<cpu::BlockQ8K *>(dst + q8_0_bytes), k);
        }
        pool_.parallel_for(r1 - r0, 16, [&](int64_t i0, int64_t i1, int ti) {
            float * row = scratch_[static_cast<size_t>(ti)].f.data();
            for (int64_t r = r0 + i0; r < r0 + i1; ++r) {
                DType           type;
                const uint8_t * wr = m.row(r, type);
                if (cpu::act_form(type) == cpu::ActForm::f32) dequantize_row(type, wr, row, k);
                for (int64_t t = 0; t < n_tok; ++t) {
                    const uint8_t *      a  = acts_.data() + static_cast<size_t>(t) * col_bytes;
                    const auto *         ak = reinterpret_cast<const cpu::BlockQ8K *>(a + q8_0_bytes);
                    float                v  = 0.0f;
                    switch (type) {
                        case DType::q4_0: v = cpu::dot_q4_0_q8_0(wr, a, k); break;
                        case DType::q8_0: v = cpu::dot_q8_0_q8_0(wr, a, k); break;
                        case DType::q4_k: v = cpu::dot_q4_k_q8_k(wr, ak, k); break;
                        case DType::q6_k: v = cpu::dot_q6_k_q8_k(wr, ak, k); break;
                        default: v = cpu::dot_f32_blocks(row, xp + t * k, k); break;
                    }
                    emit(r, t, v);
                }
            }
        });
    }

    // [q; k; v] = Wqkv a, RoPE, k and v into the cache; place(t) = (position, cache row) of column t.
    template <class Place>
    void qkv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                    const AttentionShape & s, Place place) {
        const auto &  lw    = static_cast<const CpuLinear &>(wqkv);
        const int64_t n_q   = s.n_head * s.head_dim;
        const int64_t n_kv  = s.n_head_kv * s.head_dim;
        const int64_t n_tok = a.q.ne[1];
        TERN_ASSERT(lw.n_rows == n_q + 2 * n_kv && q.ne[0] == n_q && kv.k.ne[0] == n_kv, "qkv shapes");
        const int64_t rows = n_q + 2 * n_kv;
        if (qkv_.size() < static_cast<size_t>(rows * n_tok)) qkv_.resize(static_cast<size_t>(rows * n_tok));
        float * qkv = qkv_.data();
        run_linear(lw, a, 0, rows, [&](int64_t r, int64_t t, float v) { qkv[t * rows + r] = v; });

        float * q_out = ptr<float>(q);
        for (int64_t t = 0; t < n_tok; ++t) {
            const auto [pos, row] = place(t);
            TERN_ASSERT(row >= 0 && row < kv.k.ne[1], "cache row %lld past the KV cache", static_cast<long long>(row));
            float * col = qkv + t * rows;
            for (int64_t h = 0; h < s.n_head + s.n_head_kv; ++h) {
                cpu::rope_neox_head(col + h * s.head_dim, s.n_rot, pos, s.rope_freq_base);  // q heads, then k heads
            }
            std::memcpy(q_out + t * n_q, col, static_cast<size_t>(n_q) * sizeof(float));
            store_cache_column(kv.k, row, col + n_q, n_kv);
            store_cache_column(kv.v, row, col + n_q + n_kv, n_kv);
        }
    }

    // rope_kv_append's body; place(t) = (position, cache row) of column t.
    template <class Place>
    void rope_append(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & s, Place place) {
        const int64_t n_q   = s.n_head * s.head_dim;
        const int64_t n_kv  = s.n_head_kv * s.head_dim;
        const int64_t rows  = n_q + 2 * n_kv;
        const int64_t n_tok = qkv.ne[1];
        TERN_ASSERT(qkv.ne[0] == rows && q.ne[0] == n_q && kv.k.ne[0] == n_kv, "rope_kv_append shapes");
        const float * factors = s.rope_freqs ? static_cast<const CpuNorm *>(s.rope_freqs)->w.data() : nullptr;
        const float * qn      = s.q_norm ? static_cast<const CpuNorm *>(s.q_norm)->w.data() : nullptr;
        const float * kn      = s.k_norm ? static_cast<const CpuNorm *>(s.k_norm)->w.data() : nullptr;
        float *       cols    = ptr<float>(qkv);
        float *       q_out   = ptr<float>(q);
        for (int64_t t = 0; t < n_tok; ++t) {
            const auto [pos, row] = place(t);
            TERN_ASSERT(row >= 0 && row < kv.k.ne[1], "cache row %lld past the KV cache", static_cast<long long>(row));
            float * col = cols + t * rows;
            for (int64_t h = 0; h < s.n_head + s.n_head_kv; ++h) {  // q heads, then k heads
                float *       head = col + h * s.head_dim;
                const float * norm = h < s.n_head ? qn : kn;
                if (norm) cpu::rms_norm_row(head, norm, head, s.head_dim, s.qk_norm_eps);
                cpu::rope_head(head, s.n_rot, pos, s.rope_freq_base, s.rope_freq_scale, factors, s.rope_mode);
            }
            std::memcpy(q_out + t * n_q, col, static_cast<size_t>(n_q) * sizeof(float));
            store_cache_column(kv.k, row, col + n_q, n_kv);
            store_cache_column(kv.v, row, col + n_q + n_kv, n_kv);
        }
    }

    // Causal GQA attention of column t's query over positions [0, pos_of(t)], position p of column
    // t in cache row row_of(t, p); max_n bounds pos_of(t) + 1 (scratch).
    template <class PosOf, class RowOf>
    void attend(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s, int64_t max_n,
                PosOf pos_of, RowOf row_of) {
        const int64_t n_q   = s.n_head * s.head_dim;
        const int64_t n_tok = q.ne[1];
        const int64_t group = s.n_head / s.n_head_kv;
        const int64_t hd    = s.head_dim;
        const bool    k_f16 = kv.k.type == DType::f16;
        const bool    v_f16 = kv.v.type == DType::f16;
        const float * qp    = ptr<float>(q);
        float *       op    = ptr<float>(out);
        grow_attention_scratch(max_n, hd);
        // One (token, head) pair per task: each output column slice is written by one thread.
        pool_.parallel_for(n_tok * s.n_head, 1, [&](int64_t i0, int64_t i1, int ti) {
            Scratch & sc = scratch_[static_cast<size_t>(ti)];
            for (int64_t i = i0; i < i1; ++i) {
                const int64_t t   = i / s.n_head;
                const int64_t h   = i % s.n_head;
                const int64_t kvh = h / group;
                const int64_t n   = pos_of(t) + 1;  // causal: positions 0..pos
                // The row in tern's order (cpu_ops.h, cpu::attention_row): the single-pass softmax
                // up to 512 positions; beyond, each superblock's partial in the block order
                // (cpu::superblock_partial), then the row's join. One superblock of K and V rows
                // at a time as f32 values.
                const float * qh      = qp + t * n_q + h * hd;
                float *       oh      = op + t * n_q + h * hd;
                float *       kr      = sc.k_rows.data();
                float *       vr      = sc.v_rows.data();
                const int64_t n_super = (n + cpu::k_pos_super - 1) / cpu::k_pos_super;
                for (int64_t c = 0; c < n_super; ++c) {
                    const int64_t s0 = c * cpu::k_pos_super, len = std::min(n - s0, cpu::k_pos_super);
                    for (int64_t p = 0; p < len; ++p) {
                        load_cache_head(kv.k, row_of(t, s0 + p), kvh * hd, hd, kr + p * hd);
                        load_cache_head(kv.v, row_of(t, s0 + p), kvh * hd, hd, vr + p * hd);
                    }
                    if (n_super == 1) {
                        cpu::attention_row(qh, kr, hd, vr, hd, n, hd, s.scale, k_f16, v_f16, oh);
                        break;
                    }
                    cpu::attention_scores(qh, kr, hd, len, hd, s.scale, k_f16, sc.scores.data());
                    cpu::AttnPartial & part = sc.sup[static_cast<size_t>(c)];
                    part.o                  = sc.sup_o.data() + c * hd;
                    cpu::superblock_partial(sc.scores.data(), len, vr, hd, hd, v_f16, part);
                }
                if (n_super > 1) {
                    cpu::AttnPartial row{0.0f, 0.0f, sc.sup_o.data() + n_super * hd};
                    cpu::join_partials(sc.sup.data(), n_super, hd, row);
                    cpu::finish_partial(row, hd, oh);
                }
            }
        });
    }

    // col_seq_[t] = the sequence of column t (asserts that the batch covers the n_tok columns and
    // that every position it names is in the page table and the pool).
    void index_columns(const KvBatch & b, int64_t n_tok, const KvLayer & kv) {
        TERN_ASSERT(b.n_tokens() == n_tok && b.page_size > 0, "the batch's columns and the tensors' disagree");
        col_seq_.assign(static_cast<size_t>(n_tok), -1);
        int64_t next = 0;
        for (size_t i = 0; i < b.seqs.size(); ++i) {
            const KvSeq & sq = b.seqs[i];
            TERN_ASSERT(sq.first == next && sq.n >= 1 && sq.pos0 >= 0, "batch sequence %zu", i);
            TERN_ASSERT((sq.pos0 + sq.n - 1) / b.page_size < b.max_pages, "sequence %zu past its page table", i);
            for (int64_t p = 0; p < sq.pos0 + sq.n; p += b.page_size) {
                const int32_t g = b.pages[i * static_cast<size_t>(b.max_pages) + static_cast<size_t>(p / b.page_size)];
                TERN_ASSERT(g >= 0 && (g + 1) * b.page_size <= kv.k.ne[1], "page %d of sequence %zu", g, i);
            }
            for (int64_t t = sq.first; t < sq.first + sq.n; ++t) col_seq_[static_cast<size_t>(t)] = static_cast<int64_t>(i);
            next = sq.first + sq.n;
        }
    }

    static void store_cache_column(const Tensor & cache, int64_t pos, const float * src, int64_t n) {
        if (cache.type == DType::f16) {
            uint16_t * dst = ptr<uint16_t>(cache) + pos * cache.ne[0];
            for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
        } else {
            std::memcpy(ptr<float>(cache) + pos * cache.ne[0], src, static_cast<size_t>(n) * sizeof(float));
        }
    }
    static void load_cache_head(const Tensor & cache, int64_t pos, int64_t first, int64_t n, float * dst) {
        if (cache.type == DType::f16) {
            const uint16_t * src   = ptr<uint16_t>(cache) + pos * cache.ne[0] + first;
            const float *    table = fp16_table();
            for (int64_t i = 0; i < n; ++i) dst[i] = table[src[i]];
        } else {
            std::memcpy(dst, ptr<float>(cache) + pos * cache.ne[0] + first, static_cast<size_t>(n) * sizeof(float));
        }
    }

    ThreadPool           pool_;
    std::vector<Scratch> scratch_;
    std::vector<float>   qkv_;  // [n_q + 2 n_kv, T] before RoPE
    std::vector<float>   hin_;  // LM head input after the optional f16 rounding
    std::vector<float>   glu_;  // matmul_glu: [2 n_ff, T] gate and up rows
    std::vector<uint8_t> acts_;        // matmul: the input columns as Q8_0 / Q8_K blocks
    std::vector<int8_t>  act_i8_;      // matmul on ternary weights: per-token int8 codes
    std::vector<float>   act_scales_;  // ... and their scales
    std::vector<int64_t> col_seq_;  // the paged ops: the sequence of each column
};

}  // namespace

std::unique_ptr<Backend> make_cpu_reference_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

std::unique_ptr<Backend> make_cpu_backend(const CpuOptions & options) {
    const CpuIsa isa = cpu_isa_resolve(options.isa);
    if (isa == CpuIsa::ref) return make_cpu_reference_backend(options.n_threads);
    CpuOptions o = options;
    o.isa        = isa;
    return make_cpu_fast_backend(o);
}

}  // namespace tern
