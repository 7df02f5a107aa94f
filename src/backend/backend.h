// The compute interface the model talks to (DESIGN.md decision 2): a small set of model-level,
// fusion-friendly ops instead of a general graph. The CPU backend executes each op eagerly; a GPU
// backend records the ops of a step between begin_step() and end_step() into one command buffer
// (greedy decoding groups a few steps per submit: set_steps_per_submit).
// All shapes are in ggml order: ne[0] is the contiguous dimension, ne[1] the token (column) index.
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

#include <array>
#include <cstddef>
#include <cstdint>
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
    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

// A weight after upload: repacked into the backend's preferred layout (DESIGN.md decision 3).
class Weight {
public:
    virtual ~Weight() = default;
    int64_t n_rows  = 0;  // output features (or vocabulary rows)
    int64_t n_cols  = 0;  // input features
    size_t  n_bytes = 0;  // bytes as the backend stores it (what reading all of it once moves)
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

enum class FfnActivation { relu2, silu };

struct AttentionShape {
    int64_t n_head    = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim  = 0;
    int64_t n_rot     = 0;        // rotated dimensions per head (NeoX pairs (i, i + n_rot/2))
    float   rope_freq_base = 10000.0f;
    float   scale     = 0.0f;     // attention scale, 1/sqrt(head_dim)
};

struct DeviceInfo {
    std::string name;        // "cpu", adapter name
    std::string description; // threads, features, memory
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
    virtual void write(const Tensor & dst, const void * src, size_t n_bytes) = 0;
    virtual void read(const Tensor & src, void * dst, size_t n_bytes) = 0;  // waits for pending work
    // read() in two halves, so that work recorded in between overlaps the wait: read_begin() orders
    // the read after the work recorded so far (a device backend submits it and starts the copy
    // back), read_end() waits for it and copies into dst. Work recorded after read_begin() does not
    // delay read_end(). One read in flight at a time; `src` must stay alive until read_end().
    // Default (eager backends): read_end() is read().
    virtual void read_begin(const Tensor & src, size_t n_bytes) {
        TERN_ASSERT(pending_read_.buffer == nullptr, "read_begin: a read is already in flight");
        pending_read_       = src;
        pending_read_bytes_ = n_bytes;
    }
    virtual void read_end(void * dst) {
        TERN_ASSERT(pending_read_.buffer != nullptr, "read_end without read_begin");
        const Tensor src = pending_read_;
        pending_read_    = Tensor{};
        read(src, dst, pending_read_bytes_);
    }

    // --- weights (repacked at load) ---
    // [n] f32 norm weights.
    virtual std::unique_ptr<Weight> load_norm(const WeightSource & src) = 0;
    // Low-bit matrices sharing the input dimension, stacked along the output dimension
    // (e.g. {q, k, v} or {gate, up}); each part keeps its own scales. src ne = [K, N_i].
    virtual std::unique_ptr<Weight> load_linear(std::span<const WeightSource> parts) = 0;
    // [n_embd, n_vocab] table of any readable type, used by embed() and lm_head().
    virtual std::unique_ptr<Weight> load_embedding(const WeightSource & src) = 0;

    // --- a step ---
    virtual void begin_step() = 0;  // (optional for eager backends)
    // x[:, t] = token_embd[tokens[t]] as f32.                  x: [n_embd, T] f32, tokens: [T] i32
    virtual void embed(const Tensor & x, const Weight & token_embd, const Tensor & tokens) = 0;
    // a = int8-quantize(rms_norm(x) * w).                      x: [K, T] f32
    virtual void rms_norm_quant(const QuantizedActs & a, const Tensor & x, const Weight & w, float eps) = 0;
    // y = rms_norm(x) * w.                                     x, y: [K, T] f32 (may alias)
    virtual void rms_norm(const Tensor & y, const Tensor & x, const Weight & w, float eps) = 0;
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

    // --- fused pairs: a norm and the op that consumes it (DESIGN.md decision 2) ---
    // Each equals the two ops in sequence; a backend may fuse them into one kernel (the WebGPU
    // backend recomputes the norm in the matmul's prologue when decoding), in which case the
    // intermediate (`a`, `h`) is scratch whose contents afterwards are unspecified.
    // rms_norm_quant(a, x, norm, eps), then bitlinear(y, w, a, accumulate).
    virtual void norm_bitlinear(const Tensor & y, const Weight & w, const QuantizedActs & a, const Tensor & x,
                                const Weight & norm, float eps, bool accumulate) {
        rms_norm_quant(a, x, norm, eps);
        bitlinear(y, w, a, accumulate);
    }
    // rms_norm_quant(a, x, norm, eps), then gate_up(f, w_gate_up, a, act).
    virtual void norm_gate_up(const Tensor & f, const Weight & w_gate_up, const QuantizedActs & a, const Tensor & x,
                              const Weight & norm, float eps, FfnActivation act) {
        rms_norm_quant(a, x, norm, eps);
        gate_up(f, w_gate_up, a, act);
    }
    // rms_norm_quant(a, x, norm, eps), then qkv_rope_kv_append(q, kv, wqkv, a, shape, pos0).
    virtual void norm_qkv_rope_kv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv,
                                         const QuantizedActs & a, const Tensor & x, const Weight & norm, float eps,
                                         const AttentionShape & shape, int64_t pos0) {
        rms_norm_quant(a, x, norm, eps);
        qkv_rope_kv_append(q, kv, wqkv, a, shape, pos0);
    }
    // rms_norm(h, x, norm, eps), then lm_head(logits, head, h, round_input_f16); with ids set
    // (ids.buffer != nullptr), then argmax(ids, logits).
    virtual void norm_lm_head(const Tensor & logits, const Weight & head, const Tensor & h, const Tensor & x,
                              const Weight & norm, float eps, bool round_input_f16, const Tensor & ids) {
        rms_norm(h, x, norm, eps);
        lm_head(logits, head, h, round_input_f16);
        if (ids.buffer != nullptr) argmax(ids, logits);
    }
    // ids = argmax of the logits norm_lm_head would give, when nobody reads the logits (greedy
    // decoding): `logits` and `h` are scratch. The WebGPU backend streams the head with f32 sums and
    // recomputes exactly only the rows that can be the maximum, so the id is the exact head's.
    virtual void norm_lm_head_argmax(const Tensor & ids, const Tensor & logits, const Weight & head, const Tensor & h,
                                     const Tensor & x, const Weight & norm, float eps, bool round_input_f16) {
        norm_lm_head(logits, head, h, x, norm, eps, round_input_f16, ids);
    }
    // norm_lm_head's logits (one token) for a reader that looks only at the k largest (a sampler
    // whose first stage is top-k): rows that cannot be among the k largest may come back as -inf;
    // the k largest, and every row equal to the k-th largest, are exactly norm_lm_head's. The WebGPU
    // backend streams the greedy head's int8 copy and recomputes exactly only the rows whose bounds
    // reach the k-th largest lower bound.
    virtual void norm_lm_head_top_k(const Tensor & logits, const Weight & head, const Tensor & h, const Tensor & x,
                                    const Weight & norm, float eps, bool round_input_f16, int64_t k) {
        (void)k;
        norm_lm_head(logits, head, h, x, norm, eps, round_input_f16, Tensor{});
    }
    // The rows of `logits` that the last norm_lm_head_top_k into it left finite, as (row, value) in
    // any order, read without the rest: a GPU backend lists them on the device, so a sampler reads a
    // few KB instead of every logit. Returns false, leaving `rows` empty, when there is no such list
    // (the default; or any command ran since): the caller reads the logits.
    virtual bool read_top_k_rows(const Tensor & logits, std::vector<std::pair<int32_t, float>> & rows) {
        (void)logits;
        rows.clear();
        return false;
    }
    // Bytes of the head that norm_lm_head_argmax reads per token (the WebGPU backend streams an int8
    // copy of an F16 head, half its size).
    virtual size_t greedy_head_bytes(const Weight & head) const { return head.n_bytes; }

    // --- a whole decoder layer (BitNet b1.58: sub-norms before the o-proj and the down projection) ---
    struct LayerWeights {
        const Weight * attn_norm;
        const Weight * attn_qkv;
        const Weight * attn_sub_norm;
        const Weight * attn_output;
        const Weight * ffn_norm;
        const Weight * ffn_gate_up;
        const Weight * ffn_sub_norm;
        const Weight * ffn_down;
    };
    struct LayerTensors {
        Tensor        x;     // [n_embd, T] the residual stream, updated in place
        Tensor        q;     // [n_embd_q, T] scratch
        Tensor        attn;  // [n_embd_q, T] scratch
        Tensor        ffn;   // [n_ff, T] scratch
        QuantizedActs a_embd, a_q, a_ff;  // scratch activations of widths n_embd, n_embd_q, n_ff
    };
    // The five fused ops of one layer in order: norm_qkv_rope_kv_append, attention, norm_bitlinear
    // (o-proj, accumulating into x), norm_gate_up, norm_bitlinear (down, accumulating into x). The
    // WebGPU backend runs a one-token layer as one dispatch (layer_decode.wgsl); the scratch
    // tensors' contents afterwards are unspecified.
    virtual void transformer_layer(const LayerWeights & w, const LayerTensors & t, const KvLayer & kv, float eps,
                                   FfnActivation act, const AttentionShape & shape, int64_t pos0) {
        norm_qkv_rope_kv_append(t.q, kv, *w.attn_qkv, t.a_embd, t.x, *w.attn_norm, eps, shape, pos0);
        attention(t.attn, t.q, kv, shape, pos0);
        norm_bitlinear(t.x, *w.attn_output, t.a_q, t.attn, *w.attn_sub_norm, eps, /*accumulate=*/true);
        norm_gate_up(t.ffn, *w.ffn_gate_up, t.a_embd, t.x, *w.ffn_norm, eps, act);
        norm_bitlinear(t.x, *w.ffn_down, t.a_ff, t.ffn, *w.ffn_sub_norm, eps, /*accumulate=*/true);
    }

    virtual void end_step() = 0;    // submit recorded work; does not wait (optional for eager backends)
    // Steps per submit (device backends, greedy decoding): end_step() then submits every n-th step
    // only, for a submit costs time of its own (~25 us per extra submit on an H200, host and device
    // together; GPU timestamps put ~17.5 us of idle device between two command buffers);
    // submit_steps() submits what is recorded now (a read, write or synchronize() does too). 1, the
    // default: every step.
    virtual void set_steps_per_submit(int64_t /*n*/) {}
    virtual void submit_steps() {}
    // The device is idle and steps follow (device backends, greedy decoding): the next step may be
    // submitted in growing pieces, so that the device starts on it while the rest is recorded.
    virtual void start_from_idle() {}
    // Steps recorded ahead (device backends): hold_step() ends a step like end_step() but keeps it
    // unsubmitted; release_held_step() submits it, after anything written or read meanwhile (a
    // write of its input token, a read of the previous step's results); drop_held_step() discards
    // it. At most one held step, and nothing else recorded while it is held. hold_step() returns
    // false when it could not hold the whole step (its recording had to submit part of it, e.g.
    // to grow a table): then it submits the rest, and the step ran with whatever its inputs held.
    // An eager backend (the CPU) cannot: can_hold_steps() is false and the others must not be called.
    virtual bool can_hold_steps() const { return false; }
    virtual bool hold_step() {
        end_step();
        return false;
    }
    virtual void release_held_step() {}
    virtual void drop_held_step() {}
    virtual void synchronize() = 0; // wait for submitted work; rethrows device errors as Error(device)

    // Number of device dispatches recorded since the last call, for bench figures. Backends that run
    // ops eagerly (CPU) count nothing: counts_dispatches() is false and this returns 0.
    virtual int64_t take_dispatch_count() { return 0; }
    virtual bool    counts_dispatches() const { return false; }

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

    // What one dispatch costs in a chain of dependent dispatches (each waits for the previous one),
    // the fixed price every decode kernel pays: GPU seconds per dispatch for a tiny kernel of one
    // workgroup and of `wide_groups` workgroups, and host seconds to record and submit one.
    // Backends without dispatches (CPU) return all zeros.
    struct DispatchCost {
        double gpu_s_one = 0, gpu_s_wide = 0, host_s = 0;
        uint32_t wide_groups = 0;
    };
    virtual DispatchCost measure_dispatch_cost() { return {}; }

private:
    Tensor pending_read_;  // the default read_begin / read_end's read
    size_t pending_read_bytes_ = 0;
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
