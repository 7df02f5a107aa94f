// BatchEngine: many sequences advanced together, the engine API under the server's continuous
// batching. Each step() feeds every listed sequence some tokens at its own position (one token
// while it generates, a chunk of its prompt while it prefills) and returns the logits of each
// one's last token. The KV cache is one KvPagePool; a sequence holds a page table from open() to
// close().
//
//   BatchEngine eng(model, {.n_pages = 64});
//   SequenceId a = *eng.open(prompt_a.size() + 32), b = *eng.open(prompt_b.size() + 32);
//   eng.step({{a, prompt_a, logits_a}, {b, prompt_b, logits_b}});   // both prefill
//   eng.step({{a, {&next_a, 1}, logits_a}, {b, {&next_b, 1}, logits_b}});  // both decode one token
//
// A step is one batched forward pass (BitnetModel::forward_batch): the items' tokens form one batch
// of columns, so each layer's ternary matmuls run once for every sequence, and attention reads each
// sequence's own pages through its page table (backend.h: KvBatch). Results per sequence are the
// bits of decoding it alone in a Session (the reference's fixed summation orders make that
// possible; tests/server/batch_engine_test.cpp checks it). A step with more tokens than n_chunk
// runs as several passes, a sequence's tokens split between them in order.
#pragma once

#include "model/bitnet_model.h"
#include "model/kv_cache.h"
#include "sampler/sampler.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>

namespace tern {

struct BatchEngineOptions {
    int64_t n_pages   = 64;           // KV pool size in pages
    int64_t page_size = 256;          // positions per page (KvPagePool)
    int64_t n_chunk   = 256;          // most tokens per forward pass (all sequences together)
    int64_t max_seqs  = 16;           // most sequences open at once (the server's slots)
    DType   type_k    = DType::f16;
    DType   type_v    = DType::f16;
    // As SessionOptions: round the final hidden state to f16 before an f16 head; default when the
    // K cache is f16.
    std::optional<bool> round_head_input_f16;
};

using SequenceId = int64_t;

struct BatchItem {
    SequenceId               seq = -1;
    std::span<const int32_t> tokens;  // fed at positions n_past(seq).. ; at least one
    std::span<float>         logits;  // [n_vocab]: the logits after the last token; empty: not wanted
    // Where set: the argmax of those logits (lowest id on ties). When no item of a step wants
    // logits, the backend may find the ids without producing logits at all (greedy decoding).
    int32_t * argmax = nullptr;
    // > 0: whoever reads `logits` looks only at their top_k largest (a sampler whose chain starts
    // with top-k): rows that cannot be among them may come back -inf (HeadOutput::top_k), the
    // others are exact. A step's head takes the largest such k when every item with logits sets one.
    int64_t top_k = 0;
    // With top_k > 0, optional: the engine may hand over here, instead of writing `logits`, the rows
    // that can be among the top_k largest (exact logits, in any order; every other row counts as
    // -inf: Sampler::sample_top_k's input), found and listed on the device (HeadOutput::top_rows),
    // so that a few rows come back instead of n_vocab floats. After the step, non-empty: `logits`
    // was not written; empty: it was (the backend lists nothing, or the rows did not fit the list).
    std::vector<Candidate> * top_rows = nullptr;
};

class BatchEngine {
public:
    // Throws Error(invalid_argument) for options out of range (see KvPagePool).
    BatchEngine(const BitnetModel & model, const BatchEngineOptions & options);

    const BitnetModel & model() const { return model_; }
    const KvPagePool &  pool() const { return pool_; }
    int64_t             n_chunk() const { return buf_.n_batch; }
    int64_t             n_open() const { return static_cast<int64_t>(seqs_.size()); }

    // A new sequence with room for n_positions positions (>= 1; its pages are reserved and taken as
    // it grows), or nullopt when the pool cannot hold it now or max_seqs sequences are open (another
    // must close first). Throws Error(invalid_argument) when it could never fit (more positions than
    // the pool has).
    std::optional<SequenceId> open(int64_t n_positions);
    // Ends a sequence; its pages go back to the pool. Unknown ids are a bug (asserted).
    void close(SequenceId seq);
    int64_t n_past(SequenceId seq) const;    // positions filled so far
    int64_t capacity(SequenceId seq) const;  // positions it may fill (>= what open() asked for)

    // A sequence's cache as one contiguous block (position p = column p of each layer's view, as a
    // Session's own cache), so that a sequence decoding alone can take the one-sequence decode path
    // (a Session over this view: the device runs steps ahead and chains the ids, where step()
    // waits for each step): its table is grown to its whole reservation (steps run ahead write
    // only its own pages), and the view exists when its pages are consecutive (a sequence that
    // started in an empty pool: KvPagePool::release), else nullopt. Positions filled through the
    // view are counted with mark_fed.
    std::optional<KvCache> contiguous_view(SequenceId seq);
    // n positions of seq were filled outside step() (through contiguous_view's view).
    void mark_fed(SequenceId seq, int64_t n);
    // Session::warm_up (with `sampler`) for a sequence of n_positions over a view of the pool, so
    // that a backend that compiles kernels at first use (WebGPU) does so before a lone request
    // decodes through the one-sequence path. Only while no sequence is open; the rows it writes
    // are written again before they are read.
    void warm_up(int64_t n_positions, const Sampler * sampler);
    bool round_head_input_f16() const { return round_head_; }

    // Feeds every item's tokens to its sequence at n_past(seq) and advances it; a sequence appears
    // at most once per step. Throws Error(invalid_argument) for a token outside the vocabulary or
    // tokens past the sequence's capacity (nothing is fed then). step() = launch() + collect().
    void step(std::span<const BatchItem> items);

    // Pipelined steps (the server's steady state), so that the host records a step while the device
    // runs the one before instead of after it:
    //   eng.launch(items);                  // step n recorded and submitted, results not read
    //   bool ahead = eng.record_ahead(next); // step n+1 recorded while n runs; its tokens unknown
    //   eng.collect();                      // n's results into its items (waits for the device)
    //   ... pick each sequence's next token from them ...
    //   if (ahead) eng.release_ahead(tokens); else eng.launch(next with its tokens);
    //   eng.collect(); ...
    // launch(): one pass (the items' tokens fit n_chunk), checked as step(); collect() before the
    // next launch(). record_ahead(): every item one token (`tokens` is not read; release_ahead's
    // i-th token goes to item i), each item's outputs as for step(); false (nothing recorded) when
    // the backend cannot hold a step (Backend::can_hold_steps: eager backends) or the items do not
    // fit one pass. A sequence closed after its step was launched or recorded ahead is skipped by
    // collect() (its outputs are not written; the rows the step wrote into its pages lie past what
    // it kept, and a sequence that gets those pages writes each row before it reads it). A sequence
    // that ends (e.g. at a stop token) after a step ahead was recorded thus costs one wasted column,
    // not a wait. drop_ahead() discards a step recorded ahead (nothing of it runs).
    //
    // collect(Unpack::deferred): the columns whose rows the device listed (BatchItem::top_rows, or an
    // argmax taken from such a list) are read back but left for unpack(seq), so that the caller can
    // spread that work (~700 rows a column at 64 streams) over its threads, each sequence unpacked
    // beside its sampling: unpack() may run on several threads at once for distinct sequences, and
    // every sequence of the step must be unpacked (a no-op for one with nothing left) before the
    // next launch(), step(), record_ahead() or release_ahead(). That time is not in Timing::unpack_s.
    enum class Unpack { now, deferred };
    void launch(std::span<const BatchItem> items);
    bool record_ahead(std::span<const BatchItem> items);
    void release_ahead(std::span<const int32_t> tokens);
    void drop_ahead();
    void collect(Unpack unpack = Unpack::now);
    void unpack(SequenceId seq);
    bool launched() const { return inflight_.live; }
    bool ahead() const { return ahead_.live; }

    // Where the steps' host time went, summed since construction (for `tern serve`'s /metrics):
    // recording and submitting the forward passes, waiting for and reading back their results,
    // unpacking them into the items; passes, and passes that read every logit back (no device
    // list, or a column whose list overflowed).
    // record_ahead_s: recording steps ahead (while the device ran the step before: not waited for);
    // release_s: releasing them (the token write and the submits of the held pieces: Dawn's ~1.5 us
    // per dispatch, while the device runs the first pieces);
    // passes_ahead: passes recorded ahead and released; listed_columns, listed_rows: the output
    // columns whose top-k list the device wrote, and the rows those lists counted (fitting or not).
    struct Timing {
        double  record_s = 0, wait_s = 0, unpack_s = 0, record_ahead_s = 0, release_s = 0;
        int64_t passes = 0, full_logit_reads = 0, passes_ahead = 0, listed_columns = 0, listed_rows = 0;
    };
    const Timing & timing() const { return timing_; }

private:
    struct Sequence {
        KvPageTable table;
        int64_t     capacity = 0;  // positions reserved
        int64_t     n_past   = 0;
    };
    Sequence &       get(SequenceId seq);
    const Sequence & get(SequenceId seq) const;
    // One forward pass over parts of the items (PassPart: tokens [from, from + n) of item i).
    struct PassPart {
        size_t  item = 0;
        int64_t from = 0, n = 0;
    };
    // A pass as recorded: what it feeds (in column order) and where its outputs go (in output
    // column order), kept until collect() reads them.
    struct Pass {
        struct Feed {
            SequenceId seq = -1;
            int64_t    pos = 0, n = 0;  // n tokens at positions pos.. (n_past before the pass)
        };
        struct Out {
            SequenceId               seq = -1;
            std::span<float>         logits;
            int32_t *                argmax   = nullptr;
            std::vector<Candidate> * top_rows = nullptr;
        };
        std::vector<Feed>    feeds;
        std::vector<int32_t> tokens;  // in column order
        std::vector<Out>     outs;
        bool                 any_logits = false;
        int64_t              top_k      = 0;  // the head's (HeadOutput::top_k); -1: an item needs every logit
        bool                 listed     = false;  // the device listed the top-k rows (HeadOutput::rows_listed)
        bool                 live       = false;  // recorded, not yet collected (or released)
    };
    void check(std::span<const BatchItem> items, bool tokens_known) const;
    void check_unpacked() const;
    Pass make_pass(std::span<const BatchItem> items, std::span<const PassPart> parts) const;
    // Records p at its feeds' positions and advances them; hold: kept unsubmitted, its tokens not
    // written (returns whether it was held).
    bool record(Pass & p, bool hold);
    void read(Pass & p, Unpack unpack);
    // Output column o's top-k list (row_words_) into its item: top_rows and / or argmax.
    void unpack_column(const Pass::Out & out, int64_t o) const;

    const BitnetModel &                      model_;
    KvPagePool                               pool_;
    ForwardBuffers                           buf_;
    KvBatchTables                            tables_;
    OwnedTensor                              head_cols_;  // [max_seqs] i32: the columns the head reads
    OwnedTensor                              head_ids_;   // [max_seqs] i32: their argmax
    // [k_list_stride, max_seqs] u32: each output column's top-k rows (HeadOutput::top_rows).
    OwnedTensor                              head_rows_;
    std::vector<uint32_t>                    row_words_;  // head_rows_ read back
    std::vector<int32_t>                     cols_, ids_;
    std::vector<float>                       logits_;     // [n_vocab][outputs] read back
    int64_t                                  max_seqs_   = 0;
    bool                                     round_head_ = false;
    SequenceId                               next_id_    = 1;
    Timing                                   timing_;
    Pass                                     inflight_, ahead_;  // launch() / record_ahead()
    // collect(Unpack::deferred)'s columns left to unpack(): (sequence, output column), by sequence,
    // with the output each goes to; how many are not unpacked yet.
    struct Pending {
        SequenceId seq = -1;
        int64_t    col = 0;
        Pass::Out  out;
    };
    std::vector<Pending>                     pending_;
    std::atomic<int64_t>                     n_pending_{0};
    bool                                     rerun_inflight_ = false;  // a failed hold clobbered its results
    std::unordered_map<SequenceId, Sequence> seqs_;
};

}  // namespace tern
