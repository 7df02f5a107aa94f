// The fast CPU backend: the stacked q/k/v product, NeoX RoPE, the KV cache and causal attention.
#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cpu/cpu_ops.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tern {
namespace {

template <class T> void grow(std::vector<T> & v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// The cache view from position s0 on.
cpu::CacheView shifted(const cpu::CacheView & c, int64_t s0) {
    cpu::CacheView r = c;
    r.k = static_cast<const uint8_t *>(c.k) + s0 * c.stride * (c.f16_k ? 2 : 4);
    r.v = static_cast<const uint8_t *>(c.v) + s0 * c.stride * (c.f16_v ? 2 : 4);
    return r;
}

// Runs a job in tern's attention order (cpu_ops.h): up to 512 positions as one job (the single-pass
// softmax); more, a superblock at a time as blocks jobs of their own over the cache view shifted to
// its first position (run(s0, sub_job)), then each query head's superblock partials joined
// (cpu::join_partials) and normalised (cpu::finish_partial). sup holds [superblock][n_q][hd] partial
// outputs, then [superblock][n_q] M and L.
template <class Run> void run_by_superblocks(const cpu::AttentionJob & job, int64_t hd, std::vector<float> & sup, Run run) {
    if (job.n_pos <= cpu::k_pos_super) {
        run(int64_t{0}, job);
        return;
    }
    const int64_t n_super = (job.n_pos + cpu::k_pos_super - 1) / cpu::k_pos_super, n_q = job.n_q;
    grow(sup, n_super * n_q * (hd + 2));
    float * o = sup.data();
    float * m = o + n_super * n_q * hd;
    float * l = m + n_super * n_q;
    for (int64_t c = 0; c < n_super; ++c) {
        const int64_t     s0 = c * cpu::k_pos_super;
        cpu::AttentionJob part{job.q, n_q, std::min(job.n_pos - s0, cpu::k_pos_super), job.scale, o + c * n_q * hd,
                               m + c * n_q, l + c * n_q};
        part.blocks = true;
        run(s0, part);
    }
    thread_local std::vector<cpu::AttnPartial> parts;
    parts.resize(static_cast<size_t>(n_super));
    for (int64_t g = 0; g < n_q; ++g) {
        for (int64_t c = 0; c < n_super; ++c) {
            parts[static_cast<size_t>(c)] = {m[c * n_q + g], l[c * n_q + g], o + (c * n_q + g) * hd};
        }
        cpu::AttnPartial row{0.0f, 0.0f, parts[0].o};  // (in place: join_partials allows it)
        cpu::join_partials(parts.data(), n_super, hd, row);
        cpu::finish_partial(row, hd, job.out + g * hd);
    }
}

// The converted KV head from position s0 on (a multiple of 16: kt's blocks).
cpu::AttentionKv shifted(const cpu::AttentionKv & kv, int64_t s0) {
    cpu::AttentionKv r = kv;
    r.kt = kv.kt + s0 * kv.head_dim;
    r.v  = kv.v + s0 * kv.head_dim;
    return r;
}

// The K and V rows [0, n_pos) of the KV heads whose attention items thread ti runs next for one
// token (attention()'s split: items (KV head, query head of the group) in contiguous ranges).
cpu::Touch kv_touch_rows(const KvLayer & kv, const AttentionShape & s, int64_t n_pos, int ti, int n_threads) {
    cpu::Touch    t;
    const int64_t group = s.n_head / s.n_head_kv, hd = s.head_dim;
    int64_t       i0 = 0, i1 = 0;
    ThreadPool::chunk_range(s.n_head_kv * group, 1, n_threads, ti, i0, i1);
    if (i0 >= i1 || n_pos <= 0 || kv.k.type != kv.v.type) return t;
    const int64_t el = kv.k.type == DType::f16 ? 2 : 4, h0 = i0 / group, h1 = (i1 - 1) / group + 1;
    t.base[0]   = cpu_data<uint8_t>(kv.k) + h0 * hd * el;
    t.base[1]   = cpu_data<uint8_t>(kv.v) + h0 * hd * el;
    t.stride    = kv.k.ne[0] * el;
    t.row_bytes = (h1 - h0) * hd * el;
    // Up to 4 MiB of the layer's K (and as much V) over all threads: 2B4T's f16 cache to 3276 positions;
    // more would not stay in a last-level cache until attention reads it.
    t.n_rows    = n_pos * kv.k.ne[0] * el <= (int64_t{4} << 20) ? n_pos : 0;
    return t;
}

}  // namespace

// RoPE (angles by the reference's f32 recurrence and cpu::cos_sin_fixed, once per token: every head uses
// the same ones), q out, k and v into the cache. Token t is at position col_pos_[t] and its k and v
// go to cache row col_row_[t] (set by the caller). One token per thread. One token alone: its angles
// are kept (rope_angles_) for the next layers, which rotate by the same ones (the 64 cos_sin_fixed
// calls of a 2B4T layer were ~2/3 of its RoPE, which runs on one thread while the others wait).
void CpuFastBackend::rope_store(const Tensor & q, const KvLayer & kv, const AttentionShape & s, int64_t n_tok,
                                int64_t rows) {
    const int64_t n_q = s.n_head * s.head_dim, n_kv = s.n_head_kv * s.head_dim;
    float *       q_out = cpu_data<float>(q);
    const int64_t half  = s.n_rot / 2;
    const bool    keep  = n_tok == 1;
    if (keep && !(rope_key_.pos == col_pos_[0] && rope_key_.n_rot == s.n_rot && rope_key_.base == s.rope_freq_base)) {
        grow(rope_angles_, 2 * half);
        rope_angles(s, col_pos_[0], rope_angles_.data());
        rope_key_ = {col_pos_[0], s.n_rot, s.rope_freq_base};
    }
    pool_.parallel_for(n_tok, 1, [&](int64_t t0, int64_t t1, int ti) {
        Scratch & sc = scratch_[static_cast<size_t>(ti)];
        grow(sc.att, 2 * half);
        for (int64_t t = t0; t < t1; ++t) {
            float * cs = keep ? rope_angles_.data() : sc.att.data();
            if (!keep) rope_angles(s, col_pos_[static_cast<size_t>(t)], cs);
            const float * sn  = cs + half;
            float *       col = qkv_.data() + t * rows;
            k_.rope(col, s.n_head + s.n_head_kv, s.head_dim, s.n_rot, cs, sn);
            std::memcpy(q_out + t * n_q, col, static_cast<size_t>(n_q) * sizeof(float));
            const int64_t pos = col_row_[static_cast<size_t>(t)];
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

// The cos (cs[0, n_rot / 2)) and sin (cs[n_rot / 2, n_rot)) of position pos's angles.
void CpuFastBackend::rope_angles(const AttentionShape & s, int64_t pos, float * cs) {
    const int64_t half        = s.n_rot / 2;
    const float   theta_scale = std::pow(s.rope_freq_base, -2.0f / static_cast<float>(s.n_rot));
    float         theta       = static_cast<float>(pos);
    for (int64_t i = 0; i < half; ++i) {
        cpu::cos_sin_fixed(theta, &cs[i], &cs[half + i]);
        theta *= theta_scale;
    }
}

// [q; k; v] of a's tokens into qkv_ (x normed and quantized first where `in` carries it); returns
// the weight's rows, qkv_'s stride per token.
int64_t CpuFastBackend::qkv_products(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                                     const AttentionShape & s, const LinearInput * in, int64_t pos0) {
    const auto &  lw    = static_cast<const CpuTiledLinear &>(wqkv);
    const int64_t n_q   = s.n_head * s.head_dim, n_kv = s.n_head_kv * s.head_dim, n_tok = a.q.ne[1];
    TERN_ASSERT(lw.n_rows == n_q + 2 * n_kv && q.ne[0] == n_q && kv.k.ne[0] == n_kv, "qkv shapes");
    grow(qkv_, lw.n_rows * n_tok);
    grow(gsum_, n_tok * (lw.n_cols / lw.group));
    // One token past a superblock of positions: its K/V rows asked for during the product (cpu::Touch).
    // Shallower it lost: this VM's quiet window of 2026-11-29 10:05 (tg128, positions 0-127, 1 thread,
    // three rounds) 23.27 / 22.61 / 25.67 tok/s with the touch from position 1 against 25.52 / 26.69 /
    // 26.83 without; at 512 positions it saves 6.8% of a token's CPU time (BM_DecodeLayersAttention).
    // One token at 2+ threads: the product in stolen units (steal_units), each unit touching its share
    // of its owner's rows (linear_in_job).
    const bool touch = pos0 >= cpu::k_pos_super && n_tok == 1;
    const bool steal = steal_units(lw, n_tok);
    next_norm_learn(n_tok == 1 ? &lw : nullptr, in != nullptr ? in->norm : nullptr);
    if (touch) {  // each thread's rows (its own tiles' touch; with steal, sliced by linear_in_job)
        kv_touch_.resize(static_cast<size_t>(pool_.n_threads()));
        for (int t = 0; t < pool_.n_threads(); ++t) kv_touch_[static_cast<size_t>(t)] = kv_touch_rows(kv, s, pos0, t, pool_.n_threads());
    }
    pool_.run([&](int ti) {
        cpu::ActView av = in != nullptr
                              ? norm_quant_in_job(ti, a, in->x, static_cast<const CpuNorm &>(*in->norm), in->eps, lw.group)
                              : acts_in_job(ti, a, lw.group);
        if (touch && !steal) av.touch = &kv_touch_[static_cast<size_t>(ti)];
        linear_in_job(ti, lw, av, qkv_.data(), lw.n_rows, false, steal, touch && steal ? kv_touch_.data() : nullptr);
    });
    return lw.n_rows;
}

void CpuFastBackend::qkv_rope_kv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv,
                                        const QuantizedActs & a, const AttentionShape & s, int64_t pos0) {
    const int64_t n_tok = a.q.ne[1];
    TERN_ASSERT(pos0 >= 0 && pos0 + n_tok <= kv.k.ne[1], "positions past the KV cache");
    const int64_t rows = qkv_products(q, kv, wqkv, a, s, nullptr, pos0);
    set_contiguous_columns(pos0, n_tok);
    rope_store(q, kv, s, n_tok, rows);
}

void CpuFastBackend::linear_qkv(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const LinearInput & in,
                                const AttentionShape & s, int64_t pos0) {
    if (in.x.buffer == nullptr) {
        qkv_rope_kv_append(q, kv, wqkv, in.q, s, pos0);
        return;
    }
    TERN_ASSERT(in.norm != nullptr, "a linear input without a norm is not supported yet (issue 54)");
    const int64_t n_tok = in.q.q.ne[1];
    TERN_ASSERT(pos0 >= 0 && pos0 + n_tok <= kv.k.ne[1], "positions past the KV cache");
    const int64_t rows = qkv_products(q, kv, wqkv, in.q, s, &in, pos0);
    set_contiguous_columns(pos0, n_tok);
    rope_store(q, kv, s, n_tok, rows);
}

// Work items (kv head, token, query head of the group) in that order, split into contiguous ranges:
// a thread runs the kernel on each run of items that share a (kv head, token), reading the cache
// itself where the set has attention_cache, else converting each KV head it meets once (cache
// positions up to its last token).
void CpuFastBackend::attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s,
                               int64_t pos0) {
    const int64_t hd = s.head_dim, n_tok = q.ne[1], group = s.n_head / s.n_head_kv;
    const int64_t n_q = s.n_head * hd;
    TERN_ASSERT(pos0 + n_tok <= kv.k.ne[1], "attention past the KV cache");
    if (hd % 16 != 0) {
        reference().attention(out, q, kv, s, pos0);  // the kernels take whole vectors of dimensions
        return;
    }
    const float * qp    = cpu_data<float>(q);
    float *       op    = cpu_data<float>(out);
    const int64_t n_max = pos0 + n_tok;
    cpu::CacheView cache;
    cache.k        = cpu_data<uint8_t>(kv.k);
    cache.v        = cpu_data<uint8_t>(kv.v);
    cache.f16_k    = kv.k.type == DType::f16;
    cache.f16_v    = kv.v.type == DType::f16;
    cache.stride   = kv.k.ne[0];
    cache.head_dim = hd;
    const int64_t n_items = s.n_head_kv * n_tok * group;
    pool_.run([&](int ti) {
        int64_t i0 = 0, i1 = 0;
        ThreadPool::chunk_range(n_items, 1, pool_.n_threads(), ti, i0, i1);
        if (i0 >= i1) return;
        Scratch & sc = scratch_[static_cast<size_t>(ti)];
        grow(sc.att, cpu::attention_scratch(group, n_max, hd));
        if (k_.attention_cache == nullptr) {
            grow(sc.kt, ((n_max + 15) / 16) * 16 * hd);
            grow(sc.v, n_max * hd);
        }
        cpu::CacheView head = cache;  // per thread: `first` changes with the KV head
        int64_t        prepared = -1;
        for (int64_t i = i0; i < i1;) {
            const int64_t kvh = i / (n_tok * group), t = (i / group) % n_tok, g0 = i % group;
            const int64_t g1  = std::min(group, g0 + (i1 - i));
            const int64_t h0  = kvh * group + g0;
            cpu::AttentionJob job{qp + t * n_q + h0 * hd, g1 - g0, pos0 + t + 1, s.scale, op + t * n_q + h0 * hd};
            if (k_.attention_cache != nullptr) {
                head.first = kvh * hd;
                // The KV head of this thread's next item, where it is another one: the kernel asks for
                // its K while it sums this one's P.V (decoding finds each layer's cache in DRAM). Not
                // past one superblock: the next head's rows would be asked for superblocks before use.
                const int64_t next = i + (g1 - g0), next_kvh = next / (n_tok * group);
                head.next_first = next < i1 && next_kvh != kvh && job.n_pos <= cpu::k_pos_super ? next_kvh * hd : -1;
                run_by_superblocks(job, hd, sc.sup, [&](int64_t s0, const cpu::AttentionJob & j) {
                    k_.attention_cache(shifted(head, s0), j, sc.att.data());
                });
                i += g1 - g0;
                continue;
            }
            if (kvh != prepared) {
                const int64_t last_t = std::min(n_tok - 1, ((std::min(i1, (kvh + 1) * n_tok * group) - 1) / group) % n_tok);
                head.first           = kvh * hd;
                k_.attention_prepare(head, pos0 + last_t + 1, sc.kt.data(), sc.v.data());
                prepared = kvh;
            }
            cpu::AttentionKv akv{sc.kt.data(), sc.v.data(), hd, cache.f16_k, cache.f16_v};
            run_by_superblocks(job, hd, sc.sup, [&](int64_t s0, const cpu::AttentionJob & j) {
                k_.attention(shifted(akv, s0), j, sc.att.data());
            });
            i += g1 - g0;
        }
    });
}

// Positions and cache rows of tokens pos0 .. pos0 + n_tok - 1 of one sequence in a contiguous cache.
void CpuFastBackend::set_contiguous_columns(int64_t pos0, int64_t n_tok) {
    col_pos_.resize(static_cast<size_t>(n_tok));
    for (int64_t t = 0; t < n_tok; ++t) col_pos_[static_cast<size_t>(t)] = pos0 + t;
    col_row_ = col_pos_;
}

// The paged form (backend.h, KvBatch): the same products and RoPE; each column's position and
// cache row come from its sequence and page table.
void CpuFastBackend::qkv_rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Weight & wqkv,
                                              const QuantizedActs & a, const AttentionShape & s,
                                              const KvBatch & batch) {
    const int64_t n_tok = a.q.ne[1];
    TERN_ASSERT(batch.n_tokens() == n_tok, "paged qkv: %lld columns, the batch has %lld", static_cast<long long>(n_tok),
                static_cast<long long>(batch.n_tokens()));
    col_pos_.resize(static_cast<size_t>(n_tok));
    col_row_.resize(static_cast<size_t>(n_tok));
    for (size_t sq = 0; sq < batch.seqs.size(); ++sq) {
        const KvSeq & seq = batch.seqs[sq];
        for (int64_t j = 0; j < seq.n; ++j) {
            const int64_t pos = seq.pos0 + j, row = batch.cache_row(sq, pos);
            TERN_ASSERT(row >= 0 && row < kv.k.ne[1], "paged qkv: cache row %lld of %lld", static_cast<long long>(row),
                        static_cast<long long>(kv.k.ne[1]));
            col_pos_[static_cast<size_t>(seq.first + j)] = pos;
            col_row_[static_cast<size_t>(seq.first + j)] = row;
        }
    }
    rope_store(q, kv, s, n_tok, qkv_products(q, kv, wqkv, a, s, nullptr));
}

// Batched attention over pages: attention()'s work items and kernels, each (KV head, sequence) a
// thread meets gathered from its pages into contiguous rows first (the cache type's bytes, then the
// kernels as for one contiguous cache), so every column gets the bits it gets alone.
void CpuFastBackend::attention_paged(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s,
                                     const KvBatch & batch) {
    const int64_t hd = s.head_dim, n_tok = q.ne[1], group = s.n_head / s.n_head_kv;
    const int64_t n_q = s.n_head * hd;
    TERN_ASSERT(batch.n_tokens() == n_tok, "paged attention: %lld columns, the batch has %lld",
                static_cast<long long>(n_tok), static_cast<long long>(batch.n_tokens()));
    if (hd % 16 != 0) {
        reference().attention_paged(out, q, kv, s, batch);  // the kernels take whole vectors of dimensions
        return;
    }
    col_seq_.resize(static_cast<size_t>(n_tok));
    for (size_t sq = 0; sq < batch.seqs.size(); ++sq) {
        const KvSeq & seq = batch.seqs[sq];
        for (int64_t j = 0; j < seq.n; ++j) col_seq_[static_cast<size_t>(seq.first + j)] = static_cast<int64_t>(sq);
        for (int64_t p = 0; p < seq.pos0 + seq.n; ++p) {
            const int64_t row = batch.cache_row(sq, p);
            TERN_ASSERT(row >= 0 && row < kv.k.ne[1], "paged attention: cache row %lld of %lld",
                        static_cast<long long>(row), static_cast<long long>(kv.k.ne[1]));
        }
    }
    const float *   qp     = cpu_data<float>(q);
    float *         op     = cpu_data<float>(out);
    const uint8_t * kbase  = cpu_data<uint8_t>(kv.k);
    const uint8_t * vbase  = cpu_data<uint8_t>(kv.v);
    const size_t    k_el   = kv.k.type == DType::f16 ? 2 : 4, v_el = kv.v.type == DType::f16 ? 2 : 4;
    const int64_t   stride = kv.k.ne[0];
    const int64_t   n_max  = batch.max_position() + 1;
    const int64_t   n_items = s.n_head_kv * n_tok * group;
    pool_.run([&](int ti) {
        int64_t i0 = 0, i1 = 0;
        ThreadPool::chunk_range(n_items, 1, pool_.n_threads(), ti, i0, i1);
        if (i0 >= i1) return;
        Scratch & sc = scratch_[static_cast<size_t>(ti)];
        if (k_.attention_cache == nullptr) {
            grow(sc.kt, ((n_max + 15) / 16) * 16 * hd);
            grow(sc.v, n_max * hd);
        }
        grow(sc.att, cpu::attention_scratch(group, n_max, hd));
        grow(sc.kv_rows, n_max * hd * static_cast<int64_t>(k_el + v_el));
        uint8_t * gk = sc.kv_rows.data();
        uint8_t * gv = gk + static_cast<size_t>(n_max * hd) * k_el;
        const cpu::CacheView head{gk, gv, k_el == 2, v_el == 2, hd, 0, hd};
        int64_t prepared_kvh = -1, prepared_seq = -1;
        for (int64_t i = i0; i < i1;) {
            const int64_t kvh = i / (n_tok * group), t = (i / group) % n_tok, g0 = i % group;
            const int64_t g1  = std::min(group, g0 + (i1 - i));
            const int64_t sq  = col_seq_[static_cast<size_t>(t)];
            const KvSeq & seq = batch.seqs[static_cast<size_t>(sq)];
            if (kvh != prepared_kvh || sq != prepared_seq) {
                // positions up to this thread's last column of the sequence under this KV head
                const int64_t last_t = std::min({n_tok - 1, seq.first + seq.n - 1,
                                                 ((std::min(i1, (kvh + 1) * n_tok * group) - 1) / group) % n_tok});
                const int64_t n_pos  = seq.pos0 + (last_t - seq.first) + 1;
                for (int64_t p = 0; p < n_pos; ++p) {
                    const size_t src = static_cast<size_t>(batch.cache_row(static_cast<size_t>(sq), p) * stride + kvh * hd);
                    std::memcpy(gk + static_cast<size_t>(p * hd) * k_el, kbase + src * k_el, static_cast<size_t>(hd) * k_el);
                    std::memcpy(gv + static_cast<size_t>(p * hd) * v_el, vbase + src * v_el, static_cast<size_t>(hd) * v_el);
                }
                if (k_.attention_cache == nullptr) k_.attention_prepare(head, n_pos, sc.kt.data(), sc.v.data());
                prepared_kvh = kvh;
                prepared_seq = sq;
            }
            const int64_t     h0  = kvh * group + g0;
            const int64_t     pos = seq.pos0 + (t - seq.first);
            cpu::AttentionKv  akv{sc.kt.data(), sc.v.data(), hd, k_el == 2, v_el == 2};
            cpu::AttentionJob job{qp + t * n_q + h0 * hd, g1 - g0, pos + 1, s.scale, op + t * n_q + h0 * hd};
            run_by_superblocks(job, hd, sc.sup, [&](int64_t s0, const cpu::AttentionJob & j) {
                if (k_.attention_cache != nullptr) {
                    k_.attention_cache(shifted(head, s0), j, sc.att.data());  // the gathered rows
                } else {
                    k_.attention(shifted(akv, s0), j, sc.att.data());
                }
            });
            i += g1 - g0;
        }
    });
}

// The column gather is a copy per column: the reference's.
void CpuFastBackend::gather_columns(const Tensor & dst, const Tensor & src, const Tensor & cols) {
    reference().gather_columns(dst, src, cols);
}

}  // namespace tern
