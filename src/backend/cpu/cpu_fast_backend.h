// The fast CPU backend (internal header): backend.h's ops on the kernel table of cpu_kernels.h,
// bit-identical to the scalar reference. Split over cpu_fast_backend.cpp (memory, norms, linear
// products), cpu_fast_attention.cpp (q/k/v, RoPE, the cache, attention) and cpu_fast_head.cpp (the
// LM head: exact rows, and the int8 copy of an F16 head for greedy and top-k decoding).
//
// Threads: every op is one ThreadPool::run over contiguous ranges of output rows (or heads, or
// tokens), so each output is computed by one thread with the same arithmetic whatever the thread
// count. Scratch is per thread and grows only when a larger shape first appears: a decode step
// allocates nothing.
#pragma once

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_tiles.h"
#include "backend/cpu/cpu_weights.h"
#include "core/steal_ranges.h"
#include "core/thread_pool.h"

#include <vector>

namespace tern {

// An embedding / head table (mmap'd, as the reference keeps it) and what greedy and top-k
// decoding bound its rows with (cpu_fast_head.cpp): for an F16 table of
// CpuOptions::head_i8_min_bytes or more an int8 copy, for a Q6_K table its row norms (the
// table's own codes are the approximation).
class CpuFastEmbedding : public CpuEmbedding {
public:
    enum class Bound { none, i8_copy, q6_k };
    Bound bound = Bound::none;
    // i8_copy, row r: q[r * n_cols ..] = round(e / s_r) in [-127, 127] with s_r = max |e| / 127,
    // and the bound coefficients (floats rounded up): d_norm = ||e - s q||, q_norm = s ||q||.
    AlignedBytes         i8;
    std::vector<float>   s, d_norm, q_norm;
    std::vector<int32_t> q_sum;   // sum of q over the row
    std::vector<float>   e_norm;  // ||e|| rounded up (both kinds)
    std::vector<float>   e_abs;   // i8_copy and q6_k: sum |e| rounded up (the exact head's checked sums)
};

// The data of a tensor in a CpuBuffer.
template <typename T> T * cpu_data(const Tensor & t) {
    auto * b = static_cast<CpuBuffer *>(t.buffer);
    TERN_ASSERT(b != nullptr, "tensor without buffer");
    TERN_ASSERT(t.offset + t.n_bytes() <= b->size_bytes(), "tensor view past the end of its buffer");
    return reinterpret_cast<T *>(b->data() + t.offset);
}

class CpuFastBackend final : public Backend {
public:
    explicit CpuFastBackend(const CpuOptions & options);

    std::string_view name() const override { return "cpu"; }
    DeviceInfo       device_info() const override;
    bool             supports_linear(DType type) const override;
    bool             supports_embedding(DType type) const override;

    std::unique_ptr<Buffer> alloc(size_t n_bytes, const char * label) override;
    void                    write(const Tensor & dst, const void * src, size_t n_bytes) override;
    void                    read(const Tensor & src, void * dst, size_t n_bytes) override;

    std::unique_ptr<Weight> load_norm(const WeightSource & src) override;
    std::unique_ptr<Weight> load_linear(std::span<const WeightSource> parts) override;
    std::unique_ptr<Weight> load_embedding(const WeightSource & src) override;

    double measure_copy_bandwidth(size_t n_bytes) override;
    double measure_read_bandwidth(size_t n_bytes) override;
    std::vector<double> read_sweeps(size_t n_bytes, int sweeps) override;

    void begin_step() override {}
    void end_step() override {}
    void synchronize() override {}

    void embed(const Tensor & x, const Weight & token_embd, const Tensor & tokens) override;
    void rms_norm_quant(const QuantizedActs & a, const Tensor & x, const Weight & w, float eps) override;
    void rms_norm(const Tensor & y, const Tensor & x, const Weight & w, float eps) override;
    void bitlinear(const Tensor & y, const Weight & w, const QuantizedActs & a, bool accumulate) override;
    void qkv_rope_kv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                            const AttentionShape & shape, int64_t pos0) override;
    void attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & shape,
                   int64_t pos0) override;
    void gate_up(const Tensor & f, const Weight & w_gate_up, const QuantizedActs & a, FfnActivation act) override;
    // The llama / qwen3 / phi3 families' general path (cpu_fast_family.cpp): Q4_0 / Q8_0 in Q-block
    // tiles and Q1_0 / Q2_0 / PQ2_0 in 2-bit tiles against the input's Q8_0 blocks (the kernels'
    // qblock_gemm / lowbit_q8_gemm); ternary weights (Falcon3-1.58bit) as per-token int8 + this
    // backend's bitlinear / gate_up; other types on the scalar reference. rope_kv_append: the
    // reference's operations with each token's angles computed once for all heads.
    void matmul(const Tensor & y, const Weight & w, const Tensor & x, bool accumulate) override;
    void matmul_glu(const Tensor & f, const Weight & w_gate_up, const Tensor & x, FfnActivation act) override;
    void rope_kv_append(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & shape,
                        int64_t pos0) override;
    void rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & shape,
                              const KvBatch & batch) override;
    void lm_head(const Tensor & logits, const Weight & head, const Tensor & h, bool round_input_f16) override;
    void argmax(const Tensor & ids, const Tensor & logits) override;

    // Composite ops: the norm and the int8 quantization of the input inside the product's pool job
    // (one token: every thread quantizes it into its own scratch, no barrier); the head bounded by
    // its int8 copy or Q6_K codes for ids and top-k rows.
    void linear(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate) override;
    void linear_glu(const Tensor & f, const Weight & w_gate_up, const LinearInput & in, FfnActivation act) override;
    void linear_qkv(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const LinearInput & in,
                    const AttentionShape & shape, int64_t pos0) override;
    void output_head(const HeadOutput & out, const Weight & head, const LinearInput & in, bool round_input_f16) override;

    void qkv_rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                                  const AttentionShape & s, const KvBatch & batch) override;
    void attention_paged(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s,
                         const KvBatch & batch) override;
    void gather_columns(const Tensor & dst, const Tensor & src, const Tensor & cols) override;

private:
    // Per-thread scratch, grown on demand.
    struct Scratch {
        std::vector<float>   f;        // a normed row; dequantized head rows
        std::vector<int8_t>  q;        // one token's quantized activations (fused decode ops)
        std::vector<int32_t> gsum;     // its group sums
        float                act_scale = 0;  // and its scale
        std::vector<float>   kt, v;    // one KV head converted for the attention kernel
        std::vector<float>   att;      // scores + q of one job
        std::vector<float>   sup;      // a job's superblocks: outputs, maxima, sums (run_by_superblocks)
        std::vector<float>   gate, up; // gate/up rows of a block of tokens
        std::vector<int64_t> dots;     // the int8 head's integer sums
        std::vector<double>  fd;       // the Q6_K head's row sums
        std::vector<float>   cand;     // head_bounded_top: the lower bounds of the thread's rows
        std::vector<int32_t> rows;     // candidate rows
        AlignedBytes         tile_bytes;  // base-3 tiles for many tokens: ActView::scratch (272 K)
        std::vector<uint8_t> kv_rows;  // attention_paged: one KV head's K then V rows of a sequence, gathered
    };

    // The activations of a norm op feeding a linear weight: quantizes x's tokens into a (and their
    // group sums for `group`) inside a pool job; returns the view the ternary kernel reads. With one
    // token every thread quantizes it into its own scratch (no barrier); with more the tokens are
    // split over the threads, then they meet at a barrier.
    cpu::ActView norm_quant_in_job(int ti, const QuantizedActs & a, const Tensor & x, const CpuNorm & norm, float eps,
                                   int64_t group);
    cpu::ActView acts_in_job(int ti, const QuantizedActs & a, int64_t group);
    void         norm_quant_token(const float * x, const float * w, int64_t k, float eps, float * tmp, int8_t * q,
                                  float * scale, int32_t * gsum, int64_t group);
    // Thread ti's tiles of w (one token: taken with steal_ when steal is set, see steal_units). With
    // steal and touch (one cpu::Touch per thread, the [q; k; v] product's K/V rows), each take touches
    // its share of its owner's rows (the thread whose range holds it): units [j, j + c) of a range of
    // n units the rows [j n_rows / n, (j + c) n_rows / n) of both blocks, whoever runs them.
    void         linear_in_job(int ti, const CpuTiledLinear & w, const cpu::ActView & a, float * y, int64_t ldy,
                               bool accumulate, bool steal = false, const cpu::Touch * touch = nullptr);
    // Issue 51: a one-token norm-fused op's norm weights are cold (the token's other ~850 MB passed
    // through the caches since they were read), and its prologue (the norm, on every thread) read them
    // at DRAM latency while DRAM idled. The product before it learns them (next_norm_learn: the op
    // that follows it names them, and the next token's product asks for them) and every thread of it
    // asks for them once its units are done (next_norm_touch), so the prologue finds them in cache.
    // product (nullptr: not a one-token product) is about to run, after norm (nullptr: none) was
    // named by the op now starting; sets next_norm_hint_ for product's job.
    void         next_norm_learn(const CpuTiledLinear * product, const Weight * norm);
    void         next_norm_touch() const;
    struct NormHint {
        const float * w = nullptr;
        int64_t       n = 0;
    };
    // By the product's CpuTiledLinear::hint_id (given at load, never reused: a freed weight's entry is
    // a stale hint, and a prefetch of freed memory does not fault); an index, not a hash map: the
    // map's nodes were cold at every lookup (+0.4 us between a token's ops).
    std::vector<NormHint> next_norm_;
    int64_t               last_product_ = -1;  // the hint_id of the last one-token product, else -1
    int64_t               cur_product_  = -1;  // the running product's
    // One token's product over stolen units (issue 51): steal_ reset over w's tiles, one tile a unit
    // (a thread takes up to ~64 KB at once from its own range: unit_tiles); false (the static split)
    // with one thread or more tokens.
    bool         steal_units(const CpuTiledLinear & w, int64_t n_tok);
    void         gate_up_in_job(int ti, const CpuTiledLinear & w, const cpu::ActView & a, float * f, FfnActivation act,
                                bool steal = false);
    // The same for a one-token gate + up product: steal_ over the gate tiles, steal_up_ over the up
    // tiles, glu_gate_ / glu_up_ grown for their rows.
    bool         steal_glu(const CpuTiledLinear & w, int64_t n_tok);
    void         rope_store(const Tensor & q, const KvLayer & kv, const AttentionShape & s, int64_t n_tok, int64_t rows);
    static void  rope_angles(const AttentionShape & s, int64_t pos, float * cs);
    void         set_contiguous_columns(int64_t pos0, int64_t n_tok);
    // pos0 > 0 (one token of a contiguous cache): the product touches the cache rows [0, pos0) that
    // attention reads next (cpu::Touch).
    int64_t      qkv_products(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                              const AttentionShape & s, const LinearInput * in, int64_t pos0 = -1);
    // The LM head's input: h (or its f16 rounding) for each token into hin_.
    const float * head_input(const Tensor & h, bool round_input_f16);
    void          head_rows(const CpuEmbedding & e, const float * hin, int64_t n_tok, int64_t r0, int64_t r1,
                            float * out, int64_t ld, Scratch & sc);
    // Rows [r, r + nb) of a quantized table (nb <= 32) as the reference dequantizes them, into sc.f.
    const float * dequant_head_rows(const CpuEmbedding & e, int64_t r, int64_t nb, Scratch & sc);
    // habs_[t] = max_i |hin[t][i]| (the checked heads' bound input).
    void          head_max_abs(const float * hin, int64_t n_tok, int64_t k);
    // Bytes a head that yields only ids reads (Weight::n_bytes_ids): the int8 copy and its
    // coefficients, or the Q6_K rows and their norms.
    static size_t ids_head_bytes(const CpuFastEmbedding & e);
    void          build_head_i8(CpuFastEmbedding & e);
    void          build_head_norms(CpuFastEmbedding & e);
    // The bounded head's candidate search for one token (hin: its head input): the argmax into
    // best (top_k 1) or the top-k rows into logits, the others -inf. False when it cannot bound (a
    // non-finite input): then the caller runs the exact head.
    bool head_bounded_top(const CpuFastEmbedding & e, const float * hin, int64_t top_k, float * logits, int32_t * best);
    // Pass 1 of it: lo_ and hi_ of rows [r0, r1); returns their largest lower bound.
    float head_bounds(const CpuFastEmbedding & e, const float * hin, int64_t r0, int64_t r1, Scratch & sc);

    ThreadPool              pool_;
    StealRanges             steal_;     // one job's units: one-token products (linear_in_job) and the head's pass 1
    StealRanges             steal_up_;  // a one-token gate + up product's up tiles (steal_ has its gate tiles)
    std::vector<float>      glu_gate_, glu_up_;  // its gate and up rows
    std::vector<cpu::Touch> kv_touch_;           // qkv_products: each thread's K/V rows (cpu::Touch)
    std::vector<int64_t>    col_pos_, col_row_;  // rope_store: each token's position and cache row
    std::vector<float>      rope_angles_;        // rope_store: one token's angles (cos, then sin) and their key
    struct {
        int64_t pos = -1, n_rot = 0;
        float   base = 0;
    } rope_key_;
    std::vector<int64_t>    col_seq_;            // attention_paged: each column's sequence
    CpuIsa                  isa_;
    const cpu::Kernels &    k_;
    size_t                  head_i8_min_bytes_;
    bool                    base3_ = false;  // ternary weights in base-3 tiles (CpuOptions::base3)
    std::vector<Scratch>    scratch_;
    std::vector<int32_t>    gsum_;   // group sums of a shared activation tensor [T][n_groups]
    std::vector<float>      qkv_;    // [T][n_q + 2 n_kv] before RoPE
    std::vector<float>      hin_;    // head input
    std::vector<float>      habs_;   // its max |h| per token
    // The head input on the int8 copy's 16-bit grid (high bytes, then low bytes) or on the Q6_K
    // head's 8-bit grid; 64-byte aligned: the kernels load them beside the streamed rows, and
    // loads that straddle cache lines halved the int8 head's streaming rate (15 against 29 GB/s on
    // one core of the development machine).
    AlignedBytes            hgrid_;
    AlignedBytes            read_buf_;       // read_sweeps' slices, kept between calls
    size_t                  read_slice_ = 0;  // the slice read_sweeps reads next
    AlignedBytes            h8_;
    std::vector<int32_t>    h8_sum4_;
    struct HeadGrid {                 // the grid of the current head input and its norms
        double S = 1, h_norm = 0, eta_norm = 0, h8_norm = 0;
    } grid_;
    std::vector<float>      lo_, hi_;  // the int8 head's bounds per row
    std::vector<float>      top_lo_;   // head_bounded_top: each thread's top_k largest lower bounds
    std::unique_ptr<Backend> ref_;   // the reference, for shapes the kernels do not take
    // The families' Q8_0-block products (cpu_fast_family.cpp): a weight that is not ternary, as
    // Q-block tiles where the kernels take it, else the reference's CpuMatrix.
    std::unique_ptr<Weight> load_family_linear(std::span<const WeightSource> parts);
    std::unique_ptr<Weight> load_binary_linear(std::span<const WeightSource> parts);  // Q1_0 of a family model
    bool                    family_kernel(const Weight & w) const;  // Q-block tiles, or Q1_0/Q2_0/PQ2_0 tiles
    void                    grow_q8_acts(const Tensor & x);
    // x's Q8_0 blocks (the reference quantizer) into q8_*, split over the threads, then a barrier.
    cpu::Q8BlockActs        q8_acts_in_job(int ti, const Tensor & x);
    void                    q8_block_reference(const float * x, int64_t i, int8_t * q);
    void family_gemm(int ti, const Weight & w, const cpu::Q8BlockActs & a, int64_t tile0, int64_t tile1, float * y,
                     int64_t ldy, int64_t row0, bool accumulate);
    [[noreturn]] static void reference_lowbit_unsupported(const Weight & w);
    std::vector<int8_t>     q8_q_;     // [T][K] the input's Q8_0 codes
    std::vector<float>      q8_d_;     // [T][K / 32] their block scales (fp16 values)
    std::vector<int32_t>    q8_bsum_;  // [T][K / 32] the sums of each block's codes
    // matmul on a ternary weight: its input as per-token int8 (cpu_fast_family.cpp).
    OwnedTensor family_q_, family_scale_;
    // The per-token int8 form of x in family_q_ / family_scale_ (grown as needed).
    QuantizedActs family_acts(const Tensor & x);
    Backend &               reference();
};

}  // namespace tern
