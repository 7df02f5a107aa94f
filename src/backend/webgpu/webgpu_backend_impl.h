// Internals of the WebGPU backend shared by webgpu_backend.cpp (device, memory, weights, steps) and
// webgpu_ops.cpp (one encoder per op of backend.h). Not a public header.
#pragma once

#include "backend/webgpu/pipeline_cache.h"
#include "backend/webgpu/webgpu_backend.h"
#include "backend/webgpu/webgpu_dispatch_util.h"
#include "backend/webgpu/webgpu_resources.h"
#include "backend/webgpu/webgpu_step.h"
#include "backend/webgpu/webgpu_tuning.h"
#include "backend/webgpu/webgpu_weights.h"

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <tuple>
#include <memory>
#include <optional>
#include <span>
#include <set>
#include <string_view>
#include <vector>

namespace tern {

class WebGpuBackend final : public Backend {
public:
    explicit WebGpuBackend(const WebGpuOptions & options);
    ~WebGpuBackend() override;

    std::string_view name() const override { return "webgpu"; }
    DeviceInfo       device_info() const override;
    bool             supports_linear(DType type) const override;
    bool             supports_embedding(DType type) const override;

    std::unique_ptr<Buffer> alloc(size_t n_bytes, const char * label) override;
    void write(const Tensor & dst, const void * src, size_t n_bytes) override;
    void read(const Tensor & src, void * dst, size_t n_bytes) override;

    std::unique_ptr<Weight> load_norm(const WeightSource & src) override;
    std::unique_ptr<Weight> load_linear(std::span<const WeightSource> parts) override;
    std::unique_ptr<Weight> load_embedding(const WeightSource & src) override;

    void begin_step() override {
        step_submits_at_begin_ = step_->submits();
        weight_order_.next_step(step_->releases());
    }
    // A batched step (forward_batch) goes out in pieces of first_submit, 2x, 4x ... 32x dispatches
    // while it is recorded (2B4T at 64 streams: ~480 dispatches, whose recording the device would
    // otherwise wait for); the rest with end_step.
    void begin_step_from_idle() override {
        begin_step();
        if (tune_.first_submit > 0) step_->ramp_submits(tune_.first_submit, 32 * size_t{tune_.first_submit});
    }
    // A batched step recorded ahead (BatchEngine::record_ahead) is kept in the same pieces, which
    // release_held_step() submits one after the other: the device starts on the first while the
    // driver takes the next ones (the device is idle when it is released: its tokens were waited for).
    void begin_held_step() override {
        begin_step();
        if (tune_.first_submit > 0) step_->hold_in_pieces(tune_.first_submit, 32 * size_t{tune_.first_submit});
    }
    // (The greedy head's last argmax stage may stay deferred for the next step's embed to fold in.)
    void end_step() override {
        step_->ramp_submits(0, 0);  // (start_from_idle's pieces end with the step)
        if (split_sum_.pending) step_->run_deferred();  // (a split GEMM's sum stays in its step)
        if (++steps_unsubmitted_ >= steps_per_submit_) submit_steps();
    }
    void synchronize() override;
    std::vector<int64_t> warm_up_positions(int64_t n_ctx) const override;
    // One query over this many positions or more takes the split kernels (WebGpuTuning::attn_long_positions,
    // else 800; attention_prefetching takes them from fewer where attention.wgsl keeps fewer scores),
    // and over more than one superblock of 512 always: attention.wgsl softmaxes a row in one pass,
    // longer rows are in issue 52's block order (super_attention and the prompt kernels).
    int64_t long_positions() const {
        return std::min<int64_t>(tune_.attn_long_positions != 0 ? int64_t{tune_.attn_long_positions} : 800, 513);
    }
    void embed(const Tensor & x, const Weight & token_embd, const Tensor & tokens) override;
    void rms_norm_quant(const QuantizedActs & a, const Tensor & x, const Weight & w, float eps) override;
    void rms_norm(const Tensor & y, const Tensor & x, const Weight & w, float eps) override;
    void bitlinear(const Tensor & y, const Weight & w, const QuantizedActs & a, bool accumulate) override;
    void qkv_rope_kv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                            const AttentionShape & shape, int64_t pos0) override;
    void attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & shape,
                   int64_t pos0) override;
    void gate_up(const Tensor & f, const Weight & w_gate_up, const QuantizedActs & a, FfnActivation act) override;
    void lm_head(const Tensor & logits, const Weight & head, const Tensor & h, bool round_input_f16) override;
    void argmax(const Tensor & ids, const Tensor & logits) override;
    // sample.wgsl: the chain in one workgroup (webgpu_sample.cpp).
    void sample(const Tensor & id, const Tensor & logits, const SamplingChain & chain, const Tensor & uniform) override;
    bool samples_on_device(const SamplingChain & chain) const override;
    void gather_columns(const Tensor & dst, const Tensor & src, const Tensor & cols) override;
    // A batch of sequences in a paged KV cache (webgpu_batch.cpp, webgpu_attention_split.cpp).
    void qkv_rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                                  const AttentionShape & shape, const KvBatch & batch) override;
    void attention_paged(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & shape,
                         const KvBatch & batch) override;
    // The composite ops: one token takes the fused decode kernels (webgpu_decode.cpp: the norm and
    // the int8 quantization in the matmul's prologue, the argmax in the head), which also pull the
    // weights of the kernels after them into L2 (WeightOrder); many tokens chain the primitives.
    void linear(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate) override;
    void linear_glu(const Tensor & f, const Weight & w_gate_up, const LinearInput & in, FfnActivation act) override;
    void linear_qkv(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const LinearInput & in,
                    const AttentionShape & shape, int64_t pos0) override;
    void output_head(const HeadOutput & out, const Weight & head, const LinearInput & in, bool round_input_f16) override;
    // The general linear path of the other families (webgpu_family.cpp: matmul.wgsl, glu.wgsl,
    // quantize_q8_0.wgsl, rope_kv_family.wgsl), bit-identical to the CPU reference.
    void matmul(const Tensor & y, const Weight & w, const Tensor & x, bool accumulate) override;
    void matmul_glu(const Tensor & f, const Weight & w_gate_up, const Tensor & x, FfnActivation act) override;
    void rope_kv_append(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & shape,
                        int64_t pos0) override;
    void rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & shape,
                              const KvBatch & batch) override;
    // Pipelined streams (webgpu_decode_stream.cpp): the device choice chains ids on the device and
    // reads them back a batch at a time while the next batch runs; a host picker gets each step
    // recorded while the one before runs (hold_step), unless a profile serializes the dispatches.
    std::unique_ptr<DecodeStream> decode(const DecodeRequest & request) override;

    // --- the submit pipeline, for the decode streams (and their tests) ---
    // Steps per submit: end_step() then submits every n-th step only, for a submit costs time of its
    // own; submit_steps() submits what is recorded now (a read, write or synchronize() does too).
    void set_steps_per_submit(int64_t n);
    void submit_steps() {
        steps_unsubmitted_ = 0;
        step_->flush_keeping_deferred();
    }
    // The device is idle and steps follow: the next step goes out in growing pieces, so that the
    // device starts on it while the rest is recorded.
    void start_from_idle();
    // hold_step() ends a step like end_step() but keeps it unsubmitted; release_held_step() submits
    // it, after anything written or read meanwhile (a write of its input token, a read of the
    // previous step's results); drop_held_step() discards it. At most one held step, and nothing
    // else recorded while it is held. hold_step() returns false when it could not hold the whole
    // step (its recording had to submit part of it, e.g. to grow a table): then it submits the
    // rest, and the step ran with whatever its inputs held. Not while profiling.
    bool hold_step() override;
    void release_held_step() override { step_->release_held(); }
    void drop_held_step() override;
    bool can_hold_steps() const override { return !step_->any_profiling(); }
    // read() in two halves, so that work recorded in between overlaps the wait: read_begin() orders
    // the read after the work recorded so far (submits it and starts the copy back), read_end()
    // waits for it and copies into dst. One in flight at a time; `src` must live until read_end().
    void read_begin(const Tensor & src, size_t n_bytes);
    void read_end(void * dst);
    // The rows that the last top-k head into `logits` left finite (HeadOutput.top_k), listed on the
    // device; false, with `rows` empty, when there is no such list (or anything else ran since).
    bool read_top_k_rows(const Tensor & logits, std::vector<LogitRow> & rows);
    // decode()'s id slots (the greedy stream's two rings), grown to at least n i32.
    const Tensor & decode_ids(int64_t n);
    int64_t take_dispatch_count() override { return step_->take_dispatch_count(); }
    // $TERN_WEBGPU_PROFILE=gpu's figures so far (webgpu_step.h): kernel variant -> (dispatches, GPU ms).
    const std::map<std::string, std::pair<int64_t, double>> & gpu_times() const { return step_->gpu_times(); }
    bool    counts_dispatches() const override { return true; }
    void    restart_profile() override {
        if (!step_->any_profiling()) return;
        synchronize();
        step_->restart_profile();
    }
    // Copies by a kernel (copy_bandwidth.wgsl) between two buffers of n_bytes (at most half of
    // maxBufferSize), 16 per submit, the best of 5 submits after a warm-up (best_rate).
    double measure_copy_bandwidth(size_t n_bytes) override;
    // read_bandwidth.wgsl's layouts over one buffer, 8 reads per submit, each layout's best of 3
    // submits after a warm-up (best_rate); the best layout's rate.
    double measure_read_bandwidth(size_t n_bytes) override;
    // The layouts measure_read_bandwidth tries: `groups` workgroups of 256 with `loads` 16-byte
    // loads in flight per thread, or (rows) the greedy head's rows. Empty: its default list (tests).
    struct ReadLayout {
        uint32_t groups = 0, loads = 1;
        bool     rows = false;
    };
    void set_read_bandwidth_layouts(std::vector<ReadLayout> layouts) { read_layouts_ = std::move(layouts); }
    // The tunables in use (webgpu_tuning.h): the device class's defaults with $TERN_WEBGPU_TUNE.
    const WebGpuTuning & tuning() const { return tune_; }
    DispatchCost measure_dispatch_cost() override;

    // The prefill GEMMs' tilings (webgpu_tuning.h).
    using GemmTiling = tern::GemmTiling;
    using MmaTiling  = tern::MmaTiling;
    // Forces one tiling for every prefill GEMM (tests; nullopt: the tuning's choice). Returns false,
    // and changes nothing, for a tiling the kernel or the device cannot run.
    bool set_gemm_tiling(std::optional<GemmTiling> t);
    // Forces one tensor-core tiling for every prefill GEMM (tests; nullopt: the tuning's). Returns
    // false, and changes nothing, where the tensor-core GEMM does not run (mma_unit() is 0) or
    // cannot run t. A forced dot4 tiling (set_gemm_tiling) takes precedence: the dot4 GEMM runs.
    bool set_mma_tiling(std::optional<MmaTiling> t);
    // The unit (bytes) of the subgroup matrix builtins' i8 offsets and strides on this device, found
    // once by subgroup_matrix_probe (4 or 1), or 0: ternary_gemm_mma.wgsl and lm_head_i8_mma.wgsl are not used (no subgroup
    // matrices, no 32-wide subgroups, or no exact product).
    uint32_t mma_unit();
    // Tokens from which the GEMM replaces the per-token kernels (WebGpuTuning::gemm_min_tokens).
    int64_t gemm_min_tokens();
    // Forces every prefill GEMM of one scale group per row to split K into this many shares (tests;
    // nullopt: WebGpuTuning::gemm_split_groups decides; 1: no split).
    void set_gemm_split(std::optional<uint32_t> shares) { gemm_split_ = shares; }
    // Forces WebGpuTuning::norm_words_wg (tests; nullopt: the tuning's).
    void set_norm_words_wg(std::optional<uint32_t> wg) { norm_words_wg_ = wg; }
    // norm_quant_words.wgsl's threads for rows of k elements (0: it does not run them; also tests).
    uint32_t norm_words_wg(int64_t k) const;
    // The batched head's tensor-core stage (lm_head_i8_mma.wgsl) for tests: `shader` stands in for
    // it (tests/backend's emulation of the subgroup matrices, so adapters without them run its
    // indexing and epilogue) with builtin offsets in `unit` bytes and `sgm` subgroups along the rows;
    // sgm 0: the tuning's choice again. `shader` must outlive its use.
    struct HeadMmaOverride {
        std::string_view shader;
        uint32_t         unit = 0, sgm = 0;
    };
    void set_head_mma(HeadMmaOverride o) { head_mma_override_ = o; }
    // lm_head_i8_mma.wgsl's tiling for head_batch over n_cols columns of k elements, or none where
    // the tensor cores do not run it (lm_head_i8_batch.wgsl, dot4, instead).
    std::optional<MmaTiling> head_mma_tiling(int64_t n_cols, int64_t k);

    // What numerics_probe.wgsl found (set once by the constructor).
    struct Numerics {
        bool fma_fused     = true;
        bool div_ieee      = true;   // plain f32 division correctly rounded on the probe's inputs
        bool sqrt_ieee     = true;
        bool contracts     = false;  // a plain a * b + c is evaluated as one fma (one rounding)
        bool mul_rn_rounds = true;   // mul_rn(a, b) + c rounds twice, as the CPU (lib/numerics.wgsl)
        int  probe_inexact = 0;      // probe inputs whose product is inexact (where the two differ)
    };
    const Numerics & numerics() const { return numerics_; }
    const WgpuContext & context() const { return ctx_; }
    // One int8 product on the subgroup matrices (shaders/subgroup_matrix_probe.wgsl): c [16][16] =
    // a [16][32] b, the operands at column 32 of a [16][64] and of b given as [16 columns][64], loaded
    // from workgroup memory with offsets and strides counted in `unit` i8 (1: elements, 4: the i32
    // words that hold them). c comes back as [16][32], the product in columns 16..31
    // (subgroup_matrix_probe_product gives the exact one). `error` says why there is no result (no
    // feature, no compile).
    struct MatrixProbe {
        std::vector<int32_t> c;
        std::string          error;
    };
    MatrixProbe subgroup_matrix_probe(const std::vector<int8_t> & a, const std::vector<int8_t> & b_cols, uint32_t unit);
    // What subgroup_matrix_probe should return for a and b_cols: the integer product, on the CPU.
    static std::vector<int32_t> subgroup_matrix_probe_product(const std::vector<int8_t> & a,
                                                              const std::vector<int8_t> & b_cols);
    // Records one dispatch of `key` (a test's own kernel among them: add_wgsl_shaders) with these
    // buffers and params as the uniform; the next read() runs it.
    void run_kernel(const PipelineKey & key, std::span<const WGPUBuffer> buffers, const void * params,
                    size_t params_bytes, uint32_t groups);

    // The int8 copy of an F16 table that greedy decoding streams (head_i8_pack.wgsl), made if it is
    // not there yet and read back, for tests: codes [n_rows][n_cols] int8, info [n_rows] (scale, bound
    // coefficient, s ||q||, 0). Empty when the copy does not apply to this table.
    struct HeadInt8Copy {
        std::vector<int8_t> codes;
        std::vector<float>  info;
    };
    HeadInt8Copy read_head_int8_copy(const Weight & head);
    // How many batched greedy / top-k heads (head_batch) were recorded, for tests.
    int64_t batch_heads_recorded() const { return batch_heads_recorded_; }
    // How many split GEMM sums went out fused with the next rms_norm_quant, for tests.
    int64_t split_sums_fused() const { return split_sums_fused_; }
    // The bounds B that the last int8 greedy head wrote for rows 0 .. n_rows - 1 (its value f is in
    // the logits it was given), for tests that check |f - exact logit| <= B.
    std::vector<float> read_greedy_head_bounds(int64_t n_rows);

    // Decode kernels encoded so far that took their norm's sum of squares from the norm statistics
    // (block sums left by the previous kernel; webgpu_decode.cpp), for tests.
    int64_t norm_stats_reads() const { return norm_stats_reads_; }
    // O-projections encoded so far that read one query's attention output from attention_split_pvt's
    // sums themselves (the deferred attention_split_combine; WebGpuTuning::attn_combine_fused), for tests.
    int64_t combines_fused() const { return combines_fused_; }
    // Compute pipelines built so far, for tests (a layer that builds none reuses every kernel's).
    size_t pipelines_built() const { return pipelines_.n_pipelines(); }

private:
    // Runs numerics_probe.wgsl and sets the FMA_FUSED override of every pipeline.
    void probe_numerics();
    // Runs subgroup_probe.wgsl and, when every subgroup is an aligned contiguous range of
    // invocations, has the pipelines use the "_sg" variants. Returns why not otherwise ("" if used).
    std::string probe_subgroups();
    // A new buffer of at least n_bytes holding `data` (may be null); Error(device) if it cannot be made.
    std::unique_ptr<GpuBuffer> make_buffer(size_t n_bytes, const void * data, const char * label);
    // A scratch buffer of at least n_bytes: `b` as it is, or made anew (larger) when it is missing
    // or smaller; returns its handle. (A dropped buffer's cached bind groups go with it; a deferred
    // dispatch, which may bind it, is recorded first.)
    WGPUBuffer grown(std::unique_ptr<GpuBuffer> & b, size_t n_bytes, const char * label);
    // The rope table covering positions [0, n_pos).
    const RopeTable & rope_table(int64_t n_rot, float freq_base, int64_t n_pos);
    // The shader name of a ternary kernel: "<base>" or "<base>_nodp4".
    std::string_view ternary_shader(std::string_view base) const;
    // Common dispatch of bitlinear / gate_up (same bindings; Params differ only in the last field:
    // accumulate / activation). At most max_outputs outputs per workgroup.
    void encode_ternary(std::string_view shader, const Tensor & y, const GpuLinear & w, const QuantizedActs & a,
                        uint32_t n_out, uint32_t max_outputs, uint32_t last_param);
    // Prefill (many tokens) forms of bitlinear / gate_up / qkv_rope_kv_append through the tiled GEMM
    // (webgpu_prefill.cpp); false when the op should take the per-token kernels instead.
    bool prefill_bitlinear(const Tensor & y, const Weight & w, const QuantizedActs & a, bool accumulate);
    bool prefill_gate_up(const Tensor & f, const Weight & w_gate_up, const QuantizedActs & a, FfnActivation act);
    bool prefill_qkv_rope_kv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                                    const AttentionShape & shape, int64_t pos0);
    // Prompt attention through attention_prefill_*.wgsl (webgpu_attention_prefill.cpp); false when
    // attention.wgsl should run (few query tokens, unless long_one: one query over a long context
    // that split_attention could not take).
    bool prefill_attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & shape,
                           int64_t pos0, bool long_one);
    // One query per column with the positions spread over many workgroups (attention_split_*.wgsl,
    // webgpu_attention_split.cpp): the columns of a paged batch, or (batch null) columns at
    // positions pos0 + t of a contiguous cache (rows past 512 positions by super_attention); false when
    // its workgroups or buffers would not fit this device or the shape, or a row has more than 512
    // positions that super_attention did not take.
    bool split_attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & shape,
                         const KvBatch * batch, int64_t pos0);
    // Attention by attention_split_scores + attention_paged_super.wgsl + attention_split_combine
    // (webgpu_attention_paged.cpp: the softmax taken inside the P·V workgroups, whole V rows per load): the
    // columns of a paged batch, or (batch null) columns at positions pos0 + t of a contiguous cache
    // (rows past 512 positions in issue 52's block order; one query by attention_block_pv +
    // attention_block_combine where they fit); false where the shape does not fit.
    bool super_attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & shape,
                         const KvBatch * batch, int64_t pos0);
    // rope_kv.wgsl over the qkv scratch's n_tok columns: at positions pos0 + t of a contiguous cache,
    // or (batch) at each column's position and cache row (webgpu_prefill.cpp).
    void encode_rope_kv(const Tensor & q, const KvLayer & kv, const GpuLinear & lw, const AttentionShape & shape,
                        int64_t n_tok, int64_t pos0, const KvBatch * batch);
    // Shared by both: the softmax of the n_rows score rows of each KV head in attn_scores_ (rows of
    // ld floats), in place (rows over 512 positions in the block order), with the join weights into
    // attn_wts_ (rows of w_ld floats for nsb_ld superblocks, attention_prefill_softmax.wgsl's header;
    // one_query: the threads per row for one query's long rows); and the join of attn_part_'s
    // segment sums (a superblock each) into `out`, rows in blocks of row_block.
    void encode_attention_softmax(int64_t n_rows, int64_t n_kv, int64_t group, int64_t pos0, int64_t ld,
                                  int64_t nsb_ld, int64_t w_ld, bool v_f16, bool one_query);
    void encode_attention_combine(const Tensor & out, uint32_t out_offset, int64_t hd, int64_t group, int64_t n_rows,
                                  uint32_t row_block, int64_t n_kv, int64_t pos0, int64_t nsb_ld, int64_t w_ld);
    // Error(invalid_argument) for a tuned GEMM tiling this device cannot run (the constructor).
    void check_tuned_tilings();
    // The tiling of a prefill GEMM of n_tok tokens (webgpu_prefill.cpp).
    GemmTiling gemm_tiling(int64_t n_tok) const;
    // The tensor-core tiling of a prefill GEMM over rows of k elements.
    MmaTiling mma_tiling(int64_t k) const;
    // One ternary_gemm.wgsl dispatch into y (f32 elements at y_offset, y_stride per token); n_out
    // outputs (gate/up pairs when gate_up); last_param: accumulate / activation.
    void encode_gemm(WGPUBuffer y, uint32_t y_offset, uint32_t y_stride, const GpuLinear & w, const QuantizedActs & a,
                     uint32_t n_out, bool gate_up, uint32_t last_param);
    // The shares along K for a GEMM of `groups` workgroups over n_chunks chunks of 64 (1: no split).
    uint32_t gemm_split(const GpuLinear & w, uint32_t groups, uint32_t n_chunks) const;
    // A split GEMM's sum (not gate/up) is deferred (StepEncoder::defer): when the next command is
    // rms_norm_quant of the y it adds into (last = 1: o, down) or rope_kv of the qkv products it
    // writes (last = 0), both go out as one dispatch
    // (norm_quant_words.wgsl, rope_kv_split.wgsl: the same bits); otherwise gemm_split_sum.wgsl runs
    // first as before.
    struct SplitSum {
        WGPUBuffer weights = nullptr, part = nullptr, scale = nullptr, y = nullptr;
        uint32_t   n_out = 0, n_tokens = 0, n_split = 0, scales_offset = 0, oscales_offset = 0, ascale_offset = 0,
                 y_offset = 0, y_stride = 0, last = 0;
        bool       pending = false;
    } split_sum_;
    // rms_norm_quant with the deferred split sum of x fused in, where it is x's and its scales are a's
    // (false: nothing recorded).
    bool rms_norm_quant_after_sum(const QuantizedActs & a, const Tensor & x, const GpuNorm & nw, float eps);
    // rms_norm_quant (ss null) or rms_norm_quant_after_sum (ss: the pending sum) by
    // norm_quant_words.wgsl where WebGpuTuning::norm_words_wg asks for it and the row fits it (false:
    // nothing recorded).
    bool norm_quant_words(const QuantizedActs & a, const Tensor & x, const GpuNorm & nw, float eps,
                          const SplitSum * ss);

    // The bandwidth probes' timing: `reps` + 1 submits of `per_submit` dispatches that record(i)
    // records, each moving `bytes` per dispatch, timed on the host around submit + queue idle; the
    // first warms up (the pipeline, the clocks). Returns the best rate in bytes per second.
    double best_rate(int reps, int per_submit, double bytes, const std::function<void(int)> & record,
                     const char * what);

    // --- decode (one token) kernels, webgpu_decode.cpp ---
    struct DecodeTiling {
        uint32_t lanes = 8, rows = 32, wg = 256;  // wg = rows / rpt * lanes (rpt: decode_tiling's rows per lane team)
    };
    // Where a decode kernel's activations come from: x and the norm weights (fused norm), or a
    // previous rms_norm_quant's int8 words and scale.
    // One query's attention_split_combine, deferred (StepEncoder::defer) so that the o-projection's
    // prologue reads attention_split_pvt's sums itself (out's layout at offset 0 of `part`;
    // lib/decode_io.wgsl PARTS; WebGpuTuning::attn_combine_fused): what the combine would have written
    // (out's buffer and byte offset) and what the prologue reads instead.
    struct DeferredCombine {
        WGPUBuffer out = nullptr, part = nullptr;
        uint64_t   out_offset = 0;
        uint32_t   n = 0;  // the query's f32 outputs (n_head hd)
    } deferred_combine_;
    struct DecodeSource {
        WGPUBuffer src = nullptr, scale = nullptr;
        uint32_t   offset = 0, scale_offset = 0;
    };
    // The tiling of a decode kernel for w, or nothing when the general kernels must run (several
    // tokens, several scale groups per row, K not a multiple of 64 or above 8192).
    std::optional<DecodeTiling> decode_tiling(const GpuLinear & w, int64_t n_tok, uint32_t max_rows,
                                              uint32_t rpt = 1, uint32_t min_lanes = 4, uint32_t wg = 0) const;
    DecodeSource decode_source(const QuantizedActs & a, const Tensor * x, const Weight * norm) const;
    // The key of a decode kernel; with the fused norm (norm) its prologue's offsets (s, the slot of
    // x's statistics) become pipeline constants where they take one of a few values
    // (lib/decode_io.wgsl: SRC_AT, NW_AT, STATS_AT).
    PipelineKey  decode_key(std::string_view shader, std::string_view signature, const DecodeTiling & t, int64_t k,
                            bool norm, const DecodeSource & s, std::optional<uint32_t> stats_in,
                            bool stats_out = false) const;
    // Encode the decode kernel and return true, or return false (nothing encoded) when it does not
    // apply. x / norm null: the activations are a's.
    // prefetch: a weight a later kernel reads, pulled into L2 by this one (lib/weight_prefetch.wgsl).
    bool try_decode_bitlinear(const Tensor & y, const GpuLinear & w, const QuantizedActs & a, const Tensor * x,
                              const Weight * norm, float eps, bool accumulate, const GpuLinear * prefetch = nullptr);
    bool try_decode_gate_up(const Tensor & f, const GpuLinear & w, const QuantizedActs & a, const Tensor * x,
                            const Weight * norm, float eps, FfnActivation act, const GpuLinear * prefetch = nullptr);
    bool try_decode_qkv(const Tensor & q, const KvLayer & kv, const GpuLinear & w, const QuantizedActs & a,
                        const Tensor * x, const Weight * norm, float eps, const AttentionShape & shape, int64_t pos0,
                        const GpuLinear * prefetch = nullptr);
    WGPUBuffer add_kernel_prefetch(PipelineKey & key, const GpuLinear * pf, uint32_t groups, uint32_t wg,
                                   WGPUBuffer filler) const;
    uint32_t attention_score_slots(uint32_t wg, uint32_t kpart, uint32_t tile_words, uint32_t hd) const;
    // attention() where one query's attention.wgsl also pulls `prefetch` (a weight a later kernel
    // reads; null: none) into L2 with workgroups of its own (attention.wgsl: PF_FROM).
    void attention_prefetching(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & shape,
                               int64_t pos0, const GpuLinear * prefetch);
    // Workgroup size of the norm kernels for rows of k elements (k <= 32 WG); fails beyond the adapter.
    uint32_t norm_workgroup(int64_t k) const;
    // The decode LM head (F16 table, one token); returns false when it does not apply.
    // argmax_only: f32 sums + bounds for argmax_exact.wgsl (output_head with ids), logits not exact.
    bool try_decode_head(const Tensor & logits, const GpuTable & head, const Tensor & h_or_x, const GpuNorm * norm,
                         float eps, bool round_input_f16, bool argmax_only);
    // argmax_partial_, grown to at least n_bytes; returns its buffer.
    WGPUBuffer argmax_partials(size_t n_bytes);
    // Makes head.q8 (one dispatch in the current step) unless it exists; false if it does not apply or
    // cannot be made.
    bool ensure_head_q8(const GpuTable & head);
    // Greedy decoding's head over the int8 copy (lm_head_i8_argmax.wgsl): the same per-row values and
    // bounds as try_decode_head(argmax_only), and one lower bound per workgroup, for argmax_exact.wgsl.
    // exact_tail: the kernel recomputes its candidate rows itself (EXACT_TAIL) and leaves each
    // workgroup's exact best in head_exact_ (from pair 1; pair 0 holds its threshold slots), where
    // argmax_final reads them: no argmax_exact. Returns its workgroups, 0 when it does not apply.
    uint32_t try_decode_head_i8(const Tensor & logits, const GpuTable & head, const Tensor & x, const GpuNorm & norm,
                                float eps, bool round_input_f16, bool exact_tail = false);
    // argmax_exact.wgsl after a fast head that left n_bounds lower bounds (int8: that head was the
    // int8 copy): top_k = 0 writes each group's best (value, index) to exact_partial_ for
    // argmax_final; top_k > 0 overwrites `logits` with the exact logits of the rows that can be among
    // the top_k largest and -inf elsewhere, and lists those rows in top_k_lists_. Returns the number
    // of groups.
    // Whether argmax_exact.wgsl fits this head's rows in the device's workgroup memory.
    bool     exact_rows_fit(const GpuTable & head) const;
    uint32_t encode_exact_rows(const Tensor & logits, const GpuTable & head, const Tensor & x, const GpuNorm & norm,
                               float eps, bool round_input_f16, uint32_t n_bounds, bool int8, uint32_t top_k);
    // Whether greedy decoding streams the int8 copy of this head (F16, or a Q-block head's f32 rows
    // with family_head_i8; at least head_i8_min_bytes, row width a multiple of 16 up to 4096, its
    // copy made or not yet tried).
    bool greedy_head_i8_applies(const GpuTable & head) const;
    // webgpu_head_batch.cpp: the greedy (ids) or top-k head over several columns at once (a batched decoding step):
    // rms_norm into in.h, head_grid_batch.wgsl, lm_head_i8_batch.wgsl or lm_head_i8_mma.wgsl (the
    // int8 copy streamed once for all columns), head_exact_batch.wgsl (each column's candidates exactly), argmax_final. Each
    // id is the exact head's argmax (lm_head_i8_argmax.wgsl's for that column alone). Returns false
    // (nothing recorded) where it does not apply.
    // With out.top_k instead of ids (head_topk_batch.wgsl): the logits of the rows that can be among
    // each column's top_k largest, exactly, and -inf elsewhere; those rows also listed per column
    // in out.top_rows where it is set (HeadOutput).
    bool head_batch(const HeadOutput & out, const GpuTable & head, const LinearInput & in, bool round_input_f16);
    // head_batch over the columns in groups of at most k_head_batch_columns (its scratch, T n_vocab
    // (f, B) pairs, stays within a binding); false (nothing recorded) where it does not apply.
    bool head_batches(const HeadOutput & out, const GpuTable & head, const LinearInput & in, bool round_input_f16);
    // lm_head_i8_mma.wgsl's pipeline for rows of k elements under tiling t (or the tests' stand-in).
    PipelineKey head_mma_key(int64_t k, const MmaTiling & t);

    // Builds the pipelines options.pipeline_list names on the library's worker threads (called last in
    // the constructor, when the constants are set); writes the list back (the destructor) when this
    // run used a pipeline it did not name.
    void prebuild_listed_pipelines();
    void write_pipeline_list_back() const;

    WgpuContext   ctx_;
    std::string              pipeline_list_;         // WebGpuOptions::pipeline_list
    std::string              pipeline_list_header_;  // its header line: the adapter and the tuning
    std::deque<std::string>  listed_names_;          // the names its keys view (outlive pipelines_)
    std::vector<PipelineKey> listed_;                // the keys it named
    PipelineCache pipelines_;
    std::shared_ptr<StepEncoder> step_;
    bool          dot4_native_ = true;
    std::string   subgroup_note_;  // why the subgroup reductions are not used; "" when they are
    WebGpuTuning  tune_;
    std::vector<ReadLayout> read_layouts_;  // set_read_bandwidth_layouts
    // The linear weights of a decode step (one token) in the order the model uses them, learned
    // from the step before: each decode matmul pulls the next one into L2 while it runs
    // (lib/weight_prefetch.wgsl), and one query's attention, whose DRAM slot is free, the one after
    // that (attention.wgsl PF_FROM), which the matmul before it then leaves alone. For BitNet:
    // qkv pulls o, attention gate+up, gate+up down, down the next layer's qkv. H100 tg128 (medians of
    // ten, three alternating rounds): 813.5-815.3 tokens/s against 767.3-770.0 with no prefetch;
    // attention also pulling down 802.3-805.0, and o 753.3-756.7 (its workgroups outlast attention).
    // The pointers are only trusted while no buffer was released since the step they were learned
    // in began (StepEncoder::releases(): a weight's buffer goes with it).
    struct WeightOrder {
        std::vector<const GpuLinear *> last, now;  // the previous decode step's, this step's so far
        uint64_t                       last_at = 0, now_at = 0;  // releases() when each step began
        bool                           follows = true;           // `now` is a prefix of a valid `last`
        const GpuLinear *              by_attention = nullptr;   // what attention pulled this step
        // A new step begins (releases: StepEncoder::releases()): the step that ended becomes `last`
        // if it decoded a token.
        void next_step(uint64_t releases) {
            if (!now.empty()) {
                last.swap(now);
                last_at = now_at;
            }
            now.clear();
            now_at       = releases;
            follows      = last_at == releases;
            by_attention = nullptr;
        }
        // A decode matmul of w: the weight it pulls (null: none).
        const GpuLinear * linear(const GpuLinear & w, uint64_t releases) {
            const size_t i = now.size();
            now.push_back(&w);
            follows = follows && last_at == releases && i < last.size() && last[i] == &w;
            const GpuLinear * next = follows && i + 1 < last.size() ? last[i + 1] : nullptr;
            return next == by_attention ? nullptr : next;
        }
        // One query's attention: the weight it pulls, two matmuls ahead (null: none).
        const GpuLinear * attention(uint64_t releases) {
            const size_t i = now.size();  // the matmul after attention
            follows        = follows && last_at == releases;
            by_attention   = follows && i + 1 < last.size() ? last[i + 1] : nullptr;
            return by_attention;
        }
    } weight_order_;
    // The LM head: exact logits (and the argmax's first stage), the argmax alone (greedy: the int8
    // copy and the exact candidates), or the top-k rows (a sampler that starts with top-k).
    void head_logits(const Tensor & logits, const GpuTable & head, const LinearInput & in, bool round_input_f16,
                     const Tensor & ids);
    void head_ids(const Tensor & ids, const Tensor & logits, const GpuTable & head, const LinearInput & in,
                  bool round_input_f16);
    void head_top_k(const Tensor & logits, const GpuTable & head, const LinearInput & in, bool round_input_f16,
                    int64_t k);
    // The decode LM head also writes the argmax's first stage (chunk winners of 64 rows) for the
    // logits it produced; argmax() right after it only runs the final stage.
    struct HeadPartials {
        WGPUBuffer logits = nullptr;
        uint32_t   offset = 0, n_chunks = 0;
        uint64_t   serial = 0;  // step_->serial() right after the head
    } head_partials_;
    // --- the norm statistics (lib/sum_squares.wgsl) ---
    // A decode kernel that writes a vector in workgroups of whole blocks of 32 elements also writes
    // the blocks' sums of squares (cpu::sum_squares's inner level) to norm_stats_, so that the next
    // kernel's fused norm adds only those. Like head_partials_ they are valid for the very next
    // command only (serial). Two slots: a kernel that reads one writes the other (stats_out_slot).
    static constexpr uint32_t k_stats_slot = 256;  // f32 per slot: blocks of a vector of up to 8192
    struct NormStats {
        WGPUBuffer buffer = nullptr;  // the vector's buffer, f32 index, elements
        uint32_t   offset = 0, n = 0;
        uint32_t   slot   = 0;                    // f32 index in norm_stats_
        uint64_t   serial = ~uint64_t{0};         // step_->serial() right after the producer
    } stats_;
    std::unique_ptr<GpuBuffer> norm_stats_;
    std::unique_ptr<GpuBuffer> no_x_out_;  // bitlinear_decode's x_out binding without PARTS (nothing writes it)
    mutable int64_t            norm_stats_reads_ = 0;
    int64_t                    combines_fused_   = 0;
    // The slot holding x's block sums, if the last command left them.
    std::optional<uint32_t> stats_for(const Tensor & x) const;
    // Whether a producer of n elements may write them (on, and their blocks fit a slot).
    bool stats_fit(int64_t n) const { return n <= 32 * int64_t{k_stats_slot}; }
    // The slot a producer writes: the other one where it reads x's statistics from slot `in`, else 0.
    // By role rather than alternating, so that every layer's matmuls read and write the same slots
    // (the slot is each matmul's pipeline constant, STATS_AT) whatever the number of producers in a
    // layer: with 3 (one query past 512 positions, whose attention writes none) alternating slots gave
    // each matmul two pipelines used in turn, and each dispatch ran ~2 us slower (docs/perf-log.md,
    // issue 52: H200 tg64 @ d4096 706.7 vs 598.0 tok/s).
    static uint32_t stats_out_slot(std::optional<uint32_t> in) { return in && *in == 0 ? k_stats_slot : 0; }
    // Records that the command just encoded left y's block sums in `slot`.
    void stats_written(const Tensor & y, uint32_t slot);
    WGPUBuffer stats_buffer();
    WGPUBuffer no_x_out_buffer();
    Numerics      numerics_;
    // A MapRead | CopyDst buffer that reads come back through, and its map request's state: one for
    // read(), one for read_begin() / read_end() (so a read() may run while that one is in flight).
    struct Readback {
        WgpuHandle<WGPUBuffer> buffer;
        size_t                 capacity  = 0;
        size_t                 size      = 0;  // bytes copied and mapped, from a 4-byte aligned start
        size_t                 skip      = 0;  // where the wanted bytes start in them
        size_t                 n_bytes   = 0;
        bool                   in_flight = false;
        bool                   done      = false;  // set by the map callback
        uint32_t               status    = 0;
        std::string            message;
    };
    // Records the copy of src's n_bytes into r, submits everything recorded, requests the map.
    void start_readback(Readback & r, const Tensor & src, size_t n_bytes);
    // Waits for r's map, copies the bytes out, unmaps; throws Error(device) on failure.
    void finish_readback(Readback & r, void * dst);
    Readback read_back_;
    Readback read_ahead_;
    std::map<std::pair<int64_t, float>, RopeTable> ropes_;
    // webgpu_family.cpp: non-ternary weights, the Q8_0 form of their inputs, matmul_glu's gate and up
    // rows, and rope tables with rope_freqs divisors / linear scaling (key: n_rot, base, scale, divisors).
    std::unique_ptr<Weight> load_matrix(std::span<const WeightSource> parts);
    const RopeTable &       family_rope_table(const AttentionShape & s, int64_t n_pos);
    // The blocks of a Q8_0 / Q4_0 / Q6_K table for its LM head (null for other types), and that head.
    std::unique_ptr<Weight> load_head_blocks(const WeightSource & src);
    void family_lm_head(const Tensor & logits, const GpuTable & head, const Tensor & h, bool round_input_f16);
    bool head_q_stages(int64_t n_cols) const;  // lm_head_q.wgsl's STAGE
    void encode_family_rope_kv(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & s,
                               int64_t pos0, const KvBatch * batch);
    // linear / linear_glu of a non-ternary weight: one token takes matvec_q8.wgsl where it applies.
    void family_linear(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate);
    void family_linear_glu(const Tensor & f, const Weight & w, const LinearInput & in, FfnActivation act);
    const QuantizedActs * family_int8_input(const Weight & w, const LinearInput & in);
    std::unique_ptr<GpuBuffer> mm_i8_, mm_i8_scale_;  // its scratch
    QuantizedActs              family_acts_;
    bool try_family_decode(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate,
                           const FfnActivation * glu_act);
    // One matvec_q8_acts.wgsl dispatch (try_family_decode), kept so that the [q; k; v] one can be
    // recorded late, as its ROPE variant, by the rope_kv_append after it (fa_qkv_: the last deferred).
    struct FamilyMatvec {
        WGPUBuffer words = nullptr, scales = nullptr, acts = nullptr, y = nullptr, oacts = nullptr;
        uint32_t   wg = 0, rows = 0, mrows = 0, nb = 0, wtype = 0, nbo = 1, loads = 1;
        bool       glu = false, accumulate = false, qout = false;
        uint32_t   n_rows = 0, y_offset = 0, y_stride = 0, up_row = 0, activation = 0;
        // PROLOGUE (matvec_q8_acts.wgsl): h's blocks made from x (and the norm nw) in every workgroup.
        bool       prologue = false, norm = false;
        WGPUBuffer x = nullptr, nw = nullptr;
        uint32_t   k = 0, x_offset = 0, qpt = 1;
        float      eps = 0.0f;
    } fa_qkv_;
    // ROPE's destinations: the (cos, sin) table, q_out, the caches (offsets in elements), the shape.
    struct FamilyRope {
        WGPUBuffer table, q, k_cache, v_cache;
        uint32_t   q_offset, head_dim, n_q, n_kv, pos, k_offset, v_offset;
        bool       norm_mode, k_f16, v_f16;
    };
    void encode_family_matvec(const FamilyMatvec & mv, const FamilyRope * rope);
    // One token's [q; k; v] matvec_q8.wgsl of a Q1_0 / Q2_0 / PQ2_0 weight (GpuLinear), deferred like
    // fa_qkv_ so that the rope_kv_append right after it can record matvec_q1_qkv.wgsl instead (the
    // QK-norm, RoPE and cache stores in its epilogue; WebGpuTuning::family_q1_rope).
    struct FamilyQ1Qkv {
        WGPUBuffer words = nullptr, x = nullptr, nw = nullptr, y = nullptr;
        uint32_t   k = 0, x_offset = 0, scales_offset = 0, n_rows = 0, y_offset = 0, group = 0;
        float      eps = 0;
        bool       norm = false;
    } fa_q1_;
    bool encode_q1_qkv_rope(const Tensor & q, const KvLayer & kv, const AttentionShape & s, int64_t pos0,
                            const RopeTable & rope);
    // [q_norm; k_norm] in one buffer per pair of norms (matvec_q1_qkv.wgsl's qkn; zeros for a missing one).
    std::map<std::pair<const Weight *, const Weight *>, std::unique_ptr<GpuBuffer>> qk_norms_;
    std::unique_ptr<GpuBuffer> mm_dummy_kv_[2];  // ROPE's cache bindings when it is off
    std::unique_ptr<GpuBuffer> mm_codes_, mm_dq_, mm_kcodes_, mm_kd_, mm_glu_, mm_zero_norm_;
    // try_family_decode's Q8_0-block inputs (lib/acts_q8_0.wgsl): act_q8_0.wgsl's [0], a gate+up's
    // outputs [1] (QOUT), one query's attention output [2] (attention.wgsl Q8_OUT); fa_ready_: the
    // tensor whose blocks the command just recorded left (serial: the step's serial right after it)
    // and where (acts).
    std::unique_ptr<GpuBuffer> fa_acts_[3];
    struct FamilyActs {
        WGPUBuffer buffer = nullptr;
        uint32_t   offset = 0;
        int64_t    k = 0, T = 0;
        uint64_t   serial = 0;
        WGPUBuffer acts = nullptr;
    } fa_ready_;
    // Whether `a` is x, recorded by the very last command.
    bool fa_follows(const FamilyActs & a, const Tensor & x) const;
    // The last one-query attention.wgsl output (acts unset), and whether a family's Q8_0-block
    // o-projection was seen reading one (act_q8_0.wgsl right after it): from then on that attention
    // writes the blocks itself (Q8_OUT).
    FamilyActs attn_out_;
    bool       attn_q8_out_ = false;
    std::map<std::tuple<int64_t, float, float, const Weight *>, RopeTable> family_ropes_;
    std::unique_ptr<GpuBuffer>                     scratch_;  // input copy for an in-place rms_norm
    std::unique_ptr<GpuBuffer>                     argmax_partial_;  // argmax chunk winners [T][n_chunks]
    std::unique_ptr<GpuBuffer>                     exact_partial_;   // argmax_exact.wgsl winners [groups]
    // lm_head_i8_argmax.wgsl EXACT_TAIL: u32 [threshold slot 0, slot 1, (value bits, index) x groups];
    // the tail heads use the slots in turn (head_thr_slot_), each zeroing the other for the next.
    std::unique_ptr<GpuBuffer> head_exact_;
    // head_batch: the columns' grids and norms, their threshold slots, every row's (f, B) per
    // column, the workgroups' winners.
    // batch_head_list_: the top-k lists' stand-in where the caller wants none (counts only).
    std::unique_ptr<GpuBuffer> batch_head_grid_, batch_head_thr_, batch_head_fb_, batch_head_wmax_, batch_head_partial_,
        batch_head_list_;
    int64_t                    batch_heads_recorded_ = 0;
    int64_t                    split_sums_fused_     = 0;
    uint32_t                   head_thr_slot_ = 0;
    // The argmax_final that waits for the next embed (defer): its pairs' buffer, first pair, count.
    WGPUBuffer folded_pairs_        = nullptr;
    uint32_t   folded_pairs_offset_ = 0;
    uint32_t   folded_chunks_       = 0;
    bool       lane_sums_sg_        = false;  // lib/ternary_decode.wgsl's register sums for 32-lane teams
    bool       attention_short_ok_  = false;  // attention's short form (ATT_SHORT): on, subgroups exactly 32 wide
    // argmax_exact.wgsl's TOP_K lists: [count, 0, (row, value bits) x k_top_k_list_rows] u32, two
    // (a held step's head fills one while the other is read), used in turn; and the heads recorded
    // and not read yet, oldest first (at most two: the step just submitted and a held one). A list
    // is read (read_top_k_rows) while nothing was recorded after its head but a held step.
    static constexpr uint32_t  k_top_k_list_rows = 4096;  // (32 KiB to read back; more: the host reads the logits)
    static size_t              top_k_list_bytes() { return (2 + 2 * size_t{k_top_k_list_rows}) * 4; }
    std::unique_ptr<GpuBuffer> top_k_lists_[2];
    int                        top_k_next_ = 0;
    // Whether a list's count is 0 when the next head recorded runs: a new buffer's is, and sample()
    // sets it back to 0 after reading the list; else the head's encoder writes 0 first (a queue write
    // per step that device sampling does without).
    bool top_k_list_zero_[2] = {true, true};
    // sample_scan.wgsl's maximum, candidate count, slice sums and candidates (webgpu_sample.cpp); the
    // sample.wgsl that reads them sets the maximum and the count back to 0 (a new buffer is zero).
    std::unique_ptr<GpuBuffer> sample_scan_;
    // The list of the last top-k head recorded (head_top_k), for the sample() that follows it (then
    // cleared): the logits it belongs to and which of top_k_lists_.
    struct {
        WGPUBuffer logits = nullptr;
        uint32_t   offset = 0;
        int        list   = 0;
    } sample_list_;
    struct TopKList {
        WGPUBuffer logits = nullptr;
        uint32_t   offset = 0;
        int        list   = 0;
        uint64_t   serial = 0;  // the step's serial right after the head
    };
    std::deque<TopKList> top_k_pending_;
    uint64_t             step_submits_at_begin_ = 0;  // begin_step(): a held step must not have been split
    std::unique_ptr<GpuBuffer>                     qkv_scratch_;  // prefill [q; k; v] products [N, T] f32
    int64_t                                        steps_per_submit_  = 1;  // end_step(): set_steps_per_submit
    int64_t                                        steps_unsubmitted_ = 0;
    OwnedTensor                                    decode_ids_;   // decode_ids()
    std::unique_ptr<GpuBuffer>                     attn_scores_;  // prompt attention scores / probabilities
    std::unique_ptr<GpuBuffer>                     attn_part_;    // prompt attention segment sums
    std::unique_ptr<GpuBuffer>                     attn_wts_;     // prompt attention superblock weights
    std::unique_ptr<GpuBuffer>                     attn_wmax_;    // attention_split_scores: workgroup maxima
    std::unique_ptr<GpuBuffer>                     attn_bsum_;    // split attention: block sums of exp
    std::unique_ptr<GpuBuffer>                     attn_super_;   // P·V sums: attention_split_pvt's, super_attention's partials
    std::unique_ptr<GpuBuffer>                     attn_sml_;     // super_attention: superblock / chunk maxima and sums
    std::optional<GemmTiling>                      gemm_tiling_;  // set_gemm_tiling()
    std::optional<MmaTiling>                       mma_tiling_;   // set_mma_tiling()
    HeadMmaOverride                                head_mma_override_;  // set_head_mma()
    bool                                           head_mma_broken_ = false;  // lm_head_i8_mma did not build
    std::set<PipelineKey>                          split_tiles_warmed_;  // split_attention's P·V keys whose tiles are built
    std::optional<uint32_t>                        gemm_split_;   // set_gemm_split()
    std::optional<uint32_t>                        norm_words_wg_;  // set_norm_words_wg()
    std::unique_ptr<GpuBuffer>                     gemm_split_part_;  // split GEMMs' shares [S][T][N] i32
    std::optional<uint32_t>                        mma_unit_;     // mma_unit(), once found
};

}  // namespace tern
