// The compute interface the model talks to (DESIGN.md decisions 2, 4 and 8): a small set of
// model-level, fusion-friendly ops instead of a general graph, and the decode loop's device side.
// All shapes are in ggml order: ne[0] is the contiguous dimension, ne[1] the token (column) index.
//
// Three layers, each written on top of the one before:
//   * primitive ops (required): the unfused kernels, each with a scalar CPU version in
//     cpu/cpu_ops.cpp that every other kernel is tested against;
//   * composite ops (optional): what a model calls. Each names its input as a LinearInput (x and the
//     norm in front of the matrix) or a HeadOutput, so a backend may fuse the norm, the activation
//     quantization, the residual add or the argmax into one kernel; the defaults chain primitives;
//   * decode(): the generation loop's device side. The session hands over a request (first token,
//     how many, how the next token is chosen, the model's step) and takes ids from a DecodeStream;
//     how steps are batched into submits, recorded ahead and read back is the backend's business.
// A CPU backend runs ops eagerly; a GPU backend records the ops between begin_step() and end_step()
// into one command buffer.
//
// Where the next pieces plug in:
//   * device-side sampling (issue 52): HeadOutput.sampling and DecodeRequest.sampling name the
//     sampler's chain (sampler_stages.h); the id comes from Backend::sample with a uniform the host
//     draws from the sampler's own stream, so the device's tokens are the CPU sampler's;
//   * batched decoding over a paged KV cache (issue 53): the `_paged` ops take a KvBatch (sequences
//     of token columns, each at its own positions, with a page table each) where the one-sequence
//     ops take pos0; the other ops already handle T columns, so the sequences' tokens form one
//     batch and one ternary GEMM covers them all (BitnetModel::forward_batch);
//   * new architectures (issue 54): LinearInput's activation form follows the weight type (int8 per
//     token for ternary types, Q8 blocks for Q4_0/Q8_0, float for float types), `linear` and
//     `linear_glu` (SwiGLU) serve them all, QK-norm joins linear_qkv.
//
// Adding an op or a kernel:
//   1. add the virtual here with a one-line contract, and its scalar version in cpu/cpu_ops.cpp
//      (the oracle every other kernel is tested against);
//   2. add cases to tests/backend/backend_ops_test.cpp (shapes that are not powers of two);
//   3. add the fast CPU / WGSL versions behind the same virtual; the same tests cover them;
//   4. count the op in dispatches-per-token if it is a GPU dispatch.
#pragma once

#include "core/dtype.h"
#include "core/error.h"
#include "sampler/sampler_stages.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern {

// Device memory owned by a backend. Only the backend that allocated it may interpret it.
class Buffer {
public:
    virtual ~Buffer() = default;
    virtual size_t size_bytes() const = 0;
};

// A typed view into a Buffer. Activations and KV caches are allocated once per session, so a
// forward pass allocates nothing.
struct Tensor {
    Buffer *               buffer = nullptr;
    size_t                 offset = 0;  // in bytes, from the start of the buffer
    DType                  type   = DType::f32;
    std::array<int64_t, 4> ne{1, 1, 1, 1};

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    size_t  row_bytes() const { return dtype_row_bytes(type, ne[0]); }
    size_t  n_bytes() const { return row_bytes() * static_cast<size_t>(ne[1] * ne[2] * ne[3]); }
    // Columns [first, first + count) of a 2-D tensor (e.g. the last token's logits).
    Tensor columns(int64_t first, int64_t count) const;
};

// A weight tensor as it sits in the model file, before the backend repacks it.
struct WeightSource {
    std::string                name;          // GGUF tensor name, for error messages
    DType                      type = DType::f32;
    std::array<int64_t, 4>     ne{1, 1, 1, 1};
    std::span<const uint8_t>   data;           // the file bytes (mmap'd)
    float                      output_scale = 1.0f;  // extra y *= s (mainline `bitnet` `.scale` tensors)
    // The model multiplies it with Q8_0-block activations (a llama / qwen3 / phi3 linear: matmul,
    // matmul_glu), never with per-token int8 (bitlinear): a backend may lay a Q1_0 weight out for
    // that alone (the fast CPU backend's 1-bit tiles).
    bool                       q8_0_acts = false;
    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

// A weight after upload: repacked into the backend's preferred layout (DESIGN.md decision 3).
class Weight {
public:
    virtual ~Weight() = default;
    int64_t n_rows  = 0;  // output features (or vocabulary rows)
    int64_t n_cols  = 0;  // input features
    DType   type    = DType::f32;  // the file's type of a linear weight (set by load_linear): decides
                                   // the activation form (docs/architecture.md, "Activation semantics")
    size_t  n_bytes = 0;  // bytes as the backend stores it (what reading all of it once moves)
    // Bytes an output_head that yields only ids reads of this table (the WebGPU backend streams an
    // int8 copy of a large F16 head); 0: n_bytes. For bandwidth figures.
    size_t  n_bytes_ids = 0;
};

// Per-token int8 activations (FORMATS.md §4.7): q = round_half_even(x * scale), scale = 127/max|x|.
struct QuantizedActs {
    Tensor q;      // [K, T] i8
    Tensor scale;  // [T] f32, 127 / max(|x|, 1e-5) as bitnet.cpp computes it
};

// One layer of the KV cache: K and V for every position of the context.
struct KvLayer {
    Tensor k;  // [n_embd_kv, n_ctx], f16 or f32; column p = position p, heads contiguous
    Tensor v;  // [n_embd_kv, n_ctx], same type
};

// One sequence of a batch (KvBatch): its token columns are [first, first + n), at positions
// pos0 .. pos0 + n - 1.
struct KvSeq {
    int64_t first = 0;
    int64_t n     = 1;
    int64_t pos0  = 0;
};

// Many sequences in one forward pass over a paged KV cache (issue 53): the T token columns of the
// pass are grouped into sequences of consecutive columns, each at its own positions, each with its
// own pages. The KvLayer the paged ops get views the whole pool: cache column r is physical row r,
// and page g holds rows [g * page_size, (g + 1) * page_size). Position p of sequence s lives in
// row pages[s * max_pages + p / page_size] * page_size + p % page_size. A column at position p
// attends positions [0, p] of its own sequence (causal), exactly as the same tokens of that
// sequence alone over a contiguous cache (KvLayer column p = position p): the paged ops give the
// bits of attention() / qkv_rope_kv_append() with pos0, sequence by sequence.
//
// The host copies (seqs, pages) and the device copies (page_table, columns) hold the same tables;
// the caller writes the device ones once per forward pass (model/kv_cache.h: KvBatchTables), and
// each backend reads the copy it needs.
struct KvBatch {
    int64_t                  page_size = 0;  // positions per page
    int64_t                  max_pages = 0;  // page-table entries per sequence
    std::span<const KvSeq>   seqs;           // in column order, covering columns [0, T) without gaps
    std::span<const int32_t> pages;          // [n_seq][max_pages] physical pages (entries past a sequence's end: any)
    Tensor                   page_table;     // [max_pages, n_seq] i32 on the device: `pages`
    Tensor                   columns;        // [4, T] i32 on the device, per column: position, sequence, cache row, 0

    int64_t n_tokens() const { return seqs.empty() ? 0 : seqs.back().first + seqs.back().n; }
    // The largest position of any column (every column attends at most this + 1 positions).
    int64_t max_position() const;
    // The cache row of position p of sequence s.
    int64_t cache_row(size_t s, int64_t p) const {
        return static_cast<int64_t>(pages[s * static_cast<size_t>(max_pages) + static_cast<size_t>(p / page_size)]) *
                   page_size +
               p % page_size;
    }
};

enum class FfnActivation { relu2, silu };

// neox: pairs (i, i + n_rot/2) (BitNet, Qwen3, Phi-3); norm: pairs (2i, 2i+1) (llama.cpp's `llama`,
// whose converter permutes q/k rows so that this equals transformers' rotate_half).
enum class RopeMode { neox, norm };

struct AttentionShape {
    int64_t n_head    = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim  = 0;
    int64_t n_rot     = 0;        // rotated dimensions per head
    float   rope_freq_base = 10000.0f;
    float   scale     = 0.0f;     // attention scale, 1/sqrt(head_dim)
    // Used by rope_kv_append only (the other families; qkv_rope_kv_append is BitNet's NeoX rope):
    RopeMode       rope_mode       = RopeMode::neox;
    float          rope_freq_scale = 1.0f;     // linear rope scaling: angles times this
    const Weight * rope_freqs      = nullptr;  // [n_rot/2] f32 divisors of the angles (Llama-3 scaling)
    const Weight * q_norm          = nullptr;  // [head_dim] f32: per-head RMS norm of q before RoPE (Qwen3)
    const Weight * k_norm          = nullptr;  // [head_dim] f32: the same for k
    float          qk_norm_eps     = 0.0f;
};

struct DeviceInfo {
    std::string name;        // "cpu", adapter name
    std::string description; // threads, features, memory
};

// The input of a matrix op: x, RMS-normalized by `norm` first where it is set, then brought into
// the form the weight type multiplies (DESIGN.md decision 8; today every linear weight is ternary:
// per-token int8, FORMATS.md §4.7). A backend may fuse all of it into the matrix kernel, so the
// scratch tensors' contents afterwards are unspecified.
struct LinearInput {
    Tensor         x;               // [K, T] f32; unset (no buffer): `q` holds the input already
    const Weight * norm = nullptr;  // [K] f32: rms_norm(x) * norm first (required with x, for now)
    float          eps  = 0.0f;
    QuantizedActs  q;               // [K, T] i8 + [T] f32: int8 form, scratch (or the input, see x)
    Tensor         h;               // [K, T] f32: normalized float form, scratch (output_head)
};

// What output_head writes for each token column.
struct HeadOutput {
    Tensor  logits;     // [n_vocab, T] f32: the logits (scratch when `ids` is set)
    Tensor  ids;        // [T] i32, optional: argmax of each column (lowest index on ties)
    // > 0 (without ids): the reader looks only at the k largest logits of a column; rows that cannot
    // be among them (ties with the k-th included) may be -inf, the others are exact.
    int64_t top_k = 0;
    // With ids (T = 1): ids[0] is sample(logits, *sampling, uniform) instead of the argmax.
    const SamplingChain * sampling = nullptr;
    Tensor                uniform;  // [1] f32 in [0, 1)
    // With top_k over T > 1 columns, optional: a backend that finds each column's candidates on the
    // device may also list them here, so that a reader fetches a few rows per column instead of
    // n_vocab logits. Column c's block is top_rows_stride u32 at c * top_rows_stride: [count, 0,
    // then (row, value bits) pairs]; the rows listed are every row that `logits` holds finite
    // (exact), in no particular order; a count above (top_rows_stride - 2) / 2: they did not all fit
    // (read the logits). *rows_listed is set to true where the backend wrote the lists (left alone
    // where it did not: the CPU, shapes the fast head does not take).
    Tensor  top_rows;  // [top_rows_stride, T] i32 (u32 words)
    int64_t top_rows_stride = 0;
    bool *  rows_listed = nullptr;
};

// One logit a backend read back by itself (HeadOutput.top_k's rows).
struct LogitRow {
    int32_t id    = 0;
    float   logit = 0.0f;
};

// One decode step as the model records it (BitnetModel::record_step): the token whose id is in
// `token` on the device, at position `pos`, through every layer, into the LM head.
struct DecodeStep {
    int64_t    pos = 0;
    Tensor     token;  // [1] i32
    HeadOutput head;
};

// What a host-side picker sees of one step's logits: every row, or only the rows that can be among
// the request's top_k largest (the rest count as -inf). Exactly one of the two is non-empty.
struct StepLogits {
    std::span<const float>    all;   // [n_vocab]
    std::span<const LogitRow> rows;  // in any order
};

// A decode request (Backend::decode): feed `first` at position pos0, then each chosen id at the
// next position; id i (1-based) comes from the step at pos0 + i - 1. At most n_max ids, so the
// positions used are pos0 .. pos0 + n_max - 1 (the caller keeps them inside the cache).
struct DecodeRequest {
    int32_t first = 0;
    int64_t pos0  = 0;
    int64_t n_max = 0;
    // Records one step's ops (no begin_step / end_step: the stream brackets them).
    std::function<void(const DecodeStep &)> record;
    // How the next id is chosen. Empty: argmax on the device (the step's head writes it, so tokens
    // never leave the device and ids come back in batches). Set: the host picks from the logits
    // that the step's head writes into `logits` ([n_vocab, 1] f32), reading only the top_k largest
    // where top_k > 0 and the backend can list them.
    std::function<int32_t(const StepLogits &)> pick;
    Tensor  logits;
    int64_t top_k = 0;
    int64_t batch = 32;  // device choice: ids per read-back
    // Device choice by sampling (without pick; the backend must samples_on_device(*sampling)): each
    // step's id is Backend::sample's, with uniform() called once per step as the step is recorded,
    // in step order (steps run ahead, so it may be called for steps whose ids are never taken).
    // An id of k_sample_on_host means the device could not choose that step (see Backend::sample):
    // the ids after it are meaningless; the caller takes the step's logits on the host.
    const SamplingChain *   sampling = nullptr;
    std::function<float()>  uniform;
};

// Backend::sample's "the host must choose this step" (the candidates outgrew the device's list).
constexpr int32_t k_sample_on_host = -1;

// The ids of a decode request, in order, as the device produces them. Steps may run ahead of the
// ids taken (up to a batch, or one step with a host picker): when the caller stops early, the
// cache rows they wrote lie past the last position it accepted, and attention reads no row before
// it is written again, so the cache stays consistent. Destroying the stream ends it without
// waiting: steps already recorded still run (a step held for its token is dropped).
class DecodeStream {
public:
    virtual ~DecodeStream() = default;
    // The next ids into `ids` (at least one, at most ids.size()); 0 once n_max ids were given.
    virtual size_t next(std::span<int32_t> ids) = 0;
    // Host seconds spent recording and submitting steps so far, not waiting for ids (`tern bench`'s
    // host ms per token: where it approaches the wall time, the host is the bottleneck).
    virtual double host_seconds() const = 0;
};

class Backend {
public:
    virtual ~Backend() = default;

    virtual std::string_view name() const = 0;          // "cpu", "webgpu"
    virtual DeviceInfo       device_info() const = 0;
    // Whether a weight type can serve as a linear / embedding weight on this backend (checked at load).
    virtual bool supports_linear(DType type) const = 0;
    virtual bool supports_embedding(DType type) const = 0;

    // --- memory ---
    virtual std::unique_ptr<Buffer> alloc(size_t n_bytes, const char * label) = 0;
    virtual void write(const Tensor & dst, const void * src, size_t n_bytes) = 0;  // after the work recorded so far
    virtual void read(const Tensor & src, void * dst, size_t n_bytes) = 0;         // waits for pending work

    // --- weights (repacked at load, DESIGN.md decision 3) ---
    // [n] f32 norm weights.
    virtual std::unique_ptr<Weight> load_norm(const WeightSource & src) = 0;
    // Low-bit matrices sharing the input dimension, stacked along the output dimension
    // (e.g. {q, k, v} or {gate, up}); each part keeps its own scales. src ne = [K, N_i].
    virtual std::unique_ptr<Weight> load_linear(std::span<const WeightSource> parts) = 0;
    // [n_embd, n_vocab] table of any readable type, used by embed() and the LM head.
    virtual std::unique_ptr<Weight> load_embedding(const WeightSource & src) = 0;

    // --- a step ---
    virtual void begin_step() = 0;   // ops up to end_step() form one step (optional for eager backends)
    virtual void end_step() = 0;     // submits the step's work; does not wait
    // begin_step() for a step that starts on an idle device whose results are awaited right after it
    // (BatchEngine's steps): a backend may submit the step in pieces while it is recorded, so the
    // device starts before the whole step is recorded (WebGPU: WebGpuTuning::first_submit).
    virtual void begin_step_from_idle() { begin_step(); }
    // Pipelined batched steps (BatchEngine::record_ahead): hold_step() ends a step like end_step()
    // but keeps it unsubmitted, so that its input (the tokens) can be written after it was recorded;
    // release_held_step() submits it after whatever was written or read meanwhile, drop_held_step()
    // discards it. At most one held step. hold_step() returns false when it could not hold the
    // whole step (part of it went out while it was recorded): the step then ran with whatever its
    // inputs held. Only where can_hold_steps() (not on eager backends, whose ops run as recorded).
    virtual bool can_hold_steps() const { return false; }
    // begin_step() for a step that will be held (hold_step): a backend may keep it in pieces that
    // release_held_step() submits one after the other (WebGPU: first_submit, as begin_step_from_idle).
    virtual void begin_held_step() { begin_step(); }
    virtual bool hold_step() {
        end_step();
        return false;
    }
    virtual void release_held_step() {}
    virtual void drop_held_step() {}
    virtual void synchronize() = 0;  // waits for submitted work; rethrows device errors as Error(device)

    // --- primitive ops: the unfused kernels ---
    // x[:, t] = token_embd[tokens[t]] as f32.                  x: [n_embd, T] f32, tokens: [T] i32
    virtual void embed(const Tensor & x, const Weight & token_embd, const Tensor & tokens) = 0;
    // y = rms_norm(x) * w.                                     x, y: [K, T] f32 (may alias)
    virtual void rms_norm(const Tensor & y, const Tensor & x, const Weight & w, float eps) = 0;
    // a = int8-quantize(rms_norm(x) * w).                      x: [K, T] f32
    virtual void rms_norm_quant(const QuantizedActs & a, const Tensor & x, const Weight & w, float eps) = 0;
    // y = W a (accumulate: y += W a, the residual-add epilogue). y: [N, T] f32, W: [K, N]
    virtual void bitlinear(const Tensor & y, const Weight & w, const QuantizedActs & a, bool accumulate) = 0;
    // [q; k; v] = Wqkv a; NeoX RoPE on q and k at positions pos0 + t; k, v stored into kv at those
    // positions (rounded to the cache type); q written to `q`.  q: [n_head * head_dim, T] f32
    virtual void qkv_rope_kv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const QuantizedActs & a,
                                    const AttentionShape & shape, int64_t pos0) = 0;
    // Causal GQA attention of T queries at positions pos0 + t over cache positions [0, pos0 + t].
    // out: [n_head * head_dim, T] f32, heads contiguous. With an f16 K cache q is rounded to f16
    // before q·k, with an f16 V cache the probabilities are rounded before P·V (bitnet.cpp decode).
    virtual void attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & shape,
                           int64_t pos0) = 0;
    // f = act(g) * u with [g; u] = Wgu a (gate and up stacked, each n_ff rows). f: [n_ff, T] f32
    virtual void gate_up(const Tensor & f, const Weight & w_gate_up, const QuantizedActs & a, FfnActivation act) = 0;
    // logits = head · h (no activation quantization). With round_input_f16 the f32 h is rounded to
    // f16 first (what ggml does for an F16 head). logits: [n_vocab, T] f32, h: [n_embd, T] f32
    virtual void lm_head(const Tensor & logits, const Weight & head, const Tensor & h, bool round_input_f16) = 0;
    // ids[t] = argmax_v logits[v, t] (lowest index on ties).  ids: [T] i32
    virtual void argmax(const Tensor & ids, const Tensor & logits) = 0;
    // id[0] = sample_chain(logits, chain, uniform[0]) (sampler_stages.h; chain.temp > 0), or
    // k_sample_on_host where samples_on_device allows it. The default reads both back and runs the
    // CPU chain (the reference). A device's f32 arithmetic may choose differently only where the
    // reference's decision is within a relative 1e-4 of flipping (tests/backend/webgpu_sample_test.cpp).
    //   logits: [n_vocab, 1] f32   uniform: [1] f32 in [0, 1)   id: [1] i32
    virtual void sample(const Tensor & id, const Tensor & logits, const SamplingChain & chain, const Tensor & uniform);
    // Whether decode() can choose ids with `chain` on the device (DecodeRequest.sampling) without a
    // host round trip per token. Default (and CPU): false; the session then picks on the host.
    virtual bool samples_on_device(const SamplingChain & chain) const {
        (void)chain;
        return false;
    }
    // dst[:, i] = src[:, cols[i]].                             dst: [K, n] f32, src: [K, T] f32, cols: [n] i32
    virtual void gather_columns(const Tensor & dst, const Tensor & src, const Tensor & cols) = 0;

    // --- primitive ops over a batch of sequences in a paged KV cache (KvBatch; issue 53) ---
    // qkv_rope_kv_append where column t of a is at the position `batch` gives it: RoPE at that
    // position, k and v stored into the cache row of that position of its sequence.
    virtual void qkv_rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Weight & wqkv,
                                          const QuantizedActs & a, const AttentionShape & shape,
                                          const KvBatch & batch) = 0;
    // attention where each column's query attends positions [0, its position] of its own sequence,
    // read through the page table. out, q: [n_head * head_dim, T] f32.
    virtual void attention_paged(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & shape,
                                 const KvBatch & batch) = 0;

    // --- primitive ops of the general linear path (issue 54; default: Error(unsupported)) ---
    // y = W x for a weight of any linear type, x's activation form following W.type as ggml does
    // (docs/architecture.md, "Activation semantics"): per-token int8 for ternary types, Q8_0 blocks
    // for Q4_0 / Q8_0, Q8_K blocks for Q4_K / Q6_K, f32 for F32 / F16 / BF16. accumulate: y +=.
    // y: [N, T] f32, x: [K, T] f32
    virtual void matmul(const Tensor & y, const Weight & w, const Tensor & x, bool accumulate);
    // f = act(g) * u with [g; u] = Wgu x as matmul computes them.  f: [n_ff, T] f32, x: [K, T] f32
    virtual void matmul_glu(const Tensor & f, const Weight & w_gate_up, const Tensor & x, FfnActivation act);
    // From projected [q; k; v] columns (qkv: [n_q + 2 n_kv, T] f32, overwritten): the per-head
    // q/k norms of `shape` where set, RoPE (shape.rope_mode, rope_freqs, rope_freq_scale) on q and k
    // at positions pos0 + t, k and v stored into kv (rounded to the cache type), q written to `q`.
    virtual void rope_kv_append(const Tensor & q, const KvLayer & kv, const Tensor & qkv, const AttentionShape & shape,
                                int64_t pos0);
    // rope_kv_append where column t is at the position `batch` gives it, k and v stored into the
    // cache row of that position of its sequence (KvBatch).
    virtual void rope_kv_append_paged(const Tensor & q, const KvLayer & kv, const Tensor & qkv,
                                      const AttentionShape & shape, const KvBatch & batch);

    // --- composite ops: what a model calls (each equals its default, which chains primitives) ---
    // A ternary weight with a norm in front takes rms_norm_quant + bitlinear (BitNet's path); any
    // other weight, or an input without a norm, takes the float path: rms_norm into in.h (when
    // in.norm is set) + matmul (matmul_glu).
    // y = W act(in) (accumulate: y +=).                        y: [N, T] f32
    virtual void linear(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate);
    // f = act(g) * u with [g; u] = Wgu act(in).                f: [n_ff, T] f32
    virtual void linear_glu(const Tensor & f, const Weight & w_gate_up, const LinearInput & in, FfnActivation act);
    // qkv_rope_kv_append on act(in).
    virtual void linear_qkv(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const LinearInput & in,
                            const AttentionShape & shape, int64_t pos0);
    // out = head · normalized in (float, rounded to f16 first with round_input_f16), as HeadOutput
    // asks. in.q is unused; in.h is the normalized input's scratch.
    virtual void output_head(const HeadOutput & out, const Weight & head, const LinearInput & in, bool round_input_f16);
    // qkv_rope_kv_append_paged on act(in).
    virtual void linear_qkv_paged(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const LinearInput & in,
                                  const AttentionShape & shape, const KvBatch & batch);

    // --- decoding ---
    // The stream of ids for `request` (see DecodeRequest). Default: one step at a time, each read
    // back before the next is recorded (right for eager backends).
    virtual std::unique_ptr<DecodeStream> decode(const DecodeRequest & request);

    // --- measurement (`tern bench`) ---
    // Number of device dispatches recorded since the last call. Backends that run ops eagerly (CPU)
    // count nothing: counts_dispatches() is false and this returns 0.
    virtual int64_t take_dispatch_count() { return 0; }
    virtual bool    counts_dispatches() const { return false; }
    // Where a backend keeps a per-kernel profile (WebGPU's $TERN_WEBGPU_PROFILE), forgets what it
    // counted so far (waiting for pending work first), so that the profile printed at the end covers
    // only what runs from here (`tern bench --parallel`: the timed steps, not the prefill).
    virtual void restart_profile() {}
    // Positions past 0 (below n_ctx) where a decode step's kernels or tables change (a GPU compiles
    // a kernel at its first use, in the middle of generation): Session::warm_up runs steps there.
    virtual std::vector<int64_t> warm_up_positions(int64_t n_ctx) const {
        (void)n_ctx;
        return {};
    }

    // The memory bandwidth ceiling for roofline figures, in bytes per second counting bytes read plus
    // bytes written: the best of several timed copies of an n_bytes buffer into another. Default (and
    // CPU): memcpy; the CPU backend splits it over its threads; a GPU copies device to device. Waits
    // for pending work first.
    virtual double measure_copy_bandwidth(size_t n_bytes = size_t{256} << 20);
    // The read-only bandwidth ceiling, in bytes read per second, for kernels that only stream (a
    // GPU's greedy head reads its table and writes next to nothing): the best of several timed
    // reads of an n_bytes buffer. 0 where it is not measured (CPU). Waits for pending work first.
    virtual double measure_read_bandwidth(size_t n_bytes = size_t{320} << 20) {
        (void)n_bytes;
        return 0.0;
    }
    // The read loop of measure_read_bandwidth as single sweeps: one untimed sweep of n_bytes, then
    // `sweeps` timed ones, each's bytes read per second in order (the CPU reads each sweep from
    // another slice of a buffer larger than its last-level cache, so that no sweep is served by
    // it). The buffer is kept between calls of the same size (no allocation, no first touch), so a
    // call costs the sweeps alone: `tern bench --roofline` samples the read bandwidth between a
    // run's tokens. Empty where it is not measured this way (GPU).
    virtual std::vector<double> read_sweeps(size_t n_bytes, int sweeps) {
        (void)n_bytes;
        (void)sweeps;
        return {};
    }

    // What one dispatch costs in a chain of dependent dispatches (each waits for the previous one),
    // the fixed price every decode kernel pays: GPU seconds per dispatch for a tiny kernel of one
    // workgroup and of `wide_groups` workgroups, and host seconds to record and submit one.
    // Backends without dispatches (CPU) return all zeros.
    struct DispatchCost {
        double gpu_s_one = 0, gpu_s_wide = 0, host_s = 0;
        uint32_t wide_groups = 0;
    };
    virtual DispatchCost measure_dispatch_cost() { return {}; }
};

// Checks the parts of a stacked linear weight (what load_linear receives): every part of one
// low-bit type and one input width, I2_S scales finite. Returns the total number of rows; throws
// Error(unsupported / invalid_model) naming the tensor otherwise.
int64_t check_linear_parts(std::span<const WeightSource> parts);

// A Tensor over a freshly allocated buffer (helper for models and tests).
struct OwnedTensor {
    std::unique_ptr<Buffer> buffer;
    Tensor                  tensor;
};
OwnedTensor alloc_tensor(Backend & backend, DType type, std::array<int64_t, 4> ne, const char * label);

}  // namespace tern
