// The scheduler: continuous batching over --parallel slots. One thread runs a loop that, per step,
// admits queued requests into free slots (when the KV pool can hold them), gives every prefilling
// slot a chunk of its prompt (at most n_prefill_per_step prompt tokens in all, so a long prompt does
// not stall the slots that are generating), gives every generating slot its last token, advances
// them all with one batched forward pass (BatchEngine::launch), then samples each slot's next
// token (the slots in parallel on sampling threads; greedy slots without penalties or logprobs take
// the device's argmax and read back no logits; a sampler whose chain starts with top-k, the default,
// reads back only the rows the device lists as able to be among its top k, BatchItem::top_rows,
// each slot's list unpacked on its sampling thread: SchedulerOptions::sampling_form) and
// hands the text to its HTTP handler through the request's Job. While every slot generates and
// nobody waits, the next step is recorded while the device runs this one (BatchEngine::record_ahead)
// and goes out as soon as the tokens are sampled, before they are handed out: the device waits only
// for the read-back and the sampling. (The release submits the held step, ~1.5 us of Dawn's time per
// dispatch, but in pieces: the device starts on the first.) A lone generating slot with nobody
// waiting decodes through the one-sequence path instead (decode_alone), so that one client gets
// what `tern run` gives. A cancelled Job (client gone) leaves its slot at the next step and its KV
// pages go back to the pool; a full queue answers 503.
#pragma once

#include "api_error.h"
#include "core/thread_pool.h"
#include "engine/batch_engine.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tern::server {

struct TokenLogprob {
    int32_t                               id      = -1;
    float                                 logprob = 0;
    std::vector<std::pair<int32_t, float>> top;  // the most likely alternatives, best first
};

// What a handler receives: new text, and at the end why generation stopped.
struct JobEvent {
    std::string               text;
    std::vector<TokenLogprob> logprobs;     // the tokens this text came from (when asked for)
    bool                      done = false;
    std::string               finish_reason;  // "stop" or "length" (done and no error)
    int64_t                   n_prompt    = 0;
    int64_t                   n_generated = 0;
    std::optional<ApiError>   error;          // the request failed (done)
};

// What the scheduler needs to run one request (the prompt already tokenized and checked).
struct JobSpec {
    std::vector<int32_t>     prompt;
    int64_t                  max_tokens = 1;  // >= 1; prompt + max_tokens fits the context
    SamplerParams            sampling;
    std::vector<std::string> stop;
    std::vector<int32_t>     stop_ids;        // end-of-turn tokens of the chat format (besides is_eog)
    int                      logprobs   = -1; // -1: none; else alternatives per token
    bool                     ignore_eos = false;
};

// One request's channel between its HTTP handler and the scheduler.
class Job {
public:
    explicit Job(JobSpec spec) : spec_(std::move(spec)) {}
    // Waits up to `timeout` for the next event; false on timeout.
    bool next(JobEvent & out, std::chrono::milliseconds timeout);
    // The client is gone: the scheduler frees the slot at its next step (idempotent).
    void cancel();
    bool cancelled() const { return cancelled_.load(); }
    const JobSpec & spec() const { return spec_; }

private:
    friend class Scheduler;
    void push(JobEvent e);

    JobSpec                 spec_;
    std::mutex              mutex_;
    std::condition_variable cv_;
    std::deque<JobEvent>    events_;
    std::atomic<bool>       cancelled_{false};
    std::function<void()>   wake_scheduler_;
};

struct SchedulerOptions {
    int     n_slots             = 4;    // --parallel
    size_t  max_queue           = 64;   // requests waiting for a slot; beyond that: 503
    int64_t n_prefill_per_step  = 256;  // prompt tokens per step over all prefilling slots
    int     n_sampling_threads  = 0;    // threads sampling the slots' next tokens (0: the machine's, at most n_slots)
    // How a step's results become tokens (--sampling-form): 0: the engine unpacks the device's
    // top-k lists on the scheduler thread (BatchEngine::collect), then the slots sample on the
    // sampling threads; 1: each slot's list is unpacked beside its sampling, on the sampling threads
    // (BatchEngine::Unpack::deferred). H200, 64 HTTP clients: 7,988.8 tok/s with 1, 7,927.2 with 0.
    int     sampling_form       = 1;
};

struct SchedulerStats {
    int64_t requests_started   = 0;  // admitted into a slot
    int64_t requests_finished  = 0;  // ended with stop/length
    int64_t requests_cancelled = 0;  // client gone
    int64_t requests_failed    = 0;  // server-side failure
    int64_t requests_rejected  = 0;  // queue full (503)
    int64_t prompt_tokens      = 0;
    int64_t generated_tokens   = 0;
    int64_t steps              = 0;
    double  tokens_per_second  = 0;  // generated, over the last 10 s
    int64_t queue_depth        = 0;
    int64_t slots_busy         = 0;
    int64_t slots_total        = 0;
    int64_t kv_pages_used      = 0;
    int64_t kv_pages_total     = 0;
    // The scheduler thread's time in the batched steps, summed (/metrics): BatchEngine::Timing's
    // recording, waiting for the device and unpacking, then sampling the slots and handing their
    // tokens out (text, stop strings, events); recording steps ahead (while the device runs the step
    // before: not waited for); passes that read every logit back; steps recorded ahead.
    double  record_seconds = 0, wait_seconds = 0, unpack_seconds = 0, sample_seconds = 0, deliver_seconds = 0;
    double  record_ahead_seconds = 0, release_seconds = 0;  // (release: of the steps recorded ahead)
    int64_t full_logit_reads = 0, steps_ahead = 0;
    int64_t listed_columns = 0, listed_rows = 0;  // BatchEngine::Timing's: the device's top-k lists
};

class Scheduler {
public:
    Scheduler(BatchEngine & engine, const Tokenizer & tokenizer, const SchedulerOptions & options);
    ~Scheduler();  // shutdown(), then waits for the loop to end

    // Ends the loop: queued and running jobs end with a 503, later submits get one (idempotent;
    // any thread, e.g. a signal handler's).
    void shutdown();

    // Queues a request. Throws ApiError(503) when the queue is full.
    std::shared_ptr<Job> submit(JobSpec spec);
    SchedulerStats       stats() const;
    int64_t              slots_idle() const;

private:
    struct Slot;
    void loop();
    void admit(std::vector<std::unique_ptr<Slot>> & slots);
    // One step's results: the step in flight (recorded ahead and released by the run_step before)
    // or one launched now for every slot; while it runs, the next one is recorded ahead where
    // can_record_ahead; its results are sampled, the step ahead released with those tokens, then
    // the tokens are handed out (while the device runs the step ahead).
    void run_step(std::vector<std::unique_ptr<Slot>> & slots);
    // Launches a step of every slot (BatchEngine::launch); false when it had to run whole (more
    // prompt tokens than one pass: BatchEngine::step).
    bool launch_step(std::vector<std::unique_ptr<Slot>> & slots);
    bool can_record_ahead(const std::vector<std::unique_ptr<Slot>> & slots);
    // Every slot that got logits (or an argmax) this step: its next token, in parallel.
    void sample_all(std::vector<std::unique_ptr<Slot>> & slots);
    // One slot's part of sample_all: (unpack: its top-k list first, BatchEngine::unpack) its next token.
    void sample_slot(Slot & s, bool unpack);
    // Takes the slot's next token (sample_all's); returns false when the slot is done. accepted:
    // its sampler has seen the token already.
    bool advance(Slot & s, bool accepted = false);
    // A lone slot that is generating, with nobody waiting: decodes it through the one-sequence
    // path (a Session over its pages, BatchEngine::contiguous_view: the device runs steps ahead and
    // chains the ids, as `tern run` does, where a batched step waits for each token) until it
    // ends, its client leaves or a request arrives. False (nothing done): the batched step instead.
    bool decode_alone(std::vector<std::unique_ptr<Slot>> & slots);
    void finish(Slot & s, std::string reason);
    void fail_slot(Slot & s, const ApiError & e);
    void record_tokens(int64_t n);

    BatchEngine &           engine_;
    const Tokenizer &       tokenizer_;
    SchedulerOptions        options_;
    mutable std::mutex      mutex_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    bool                    stopping_ = false;
    SchedulerStats          stats_;  // counters (under mutex_)
    std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;  // (time, tokens) of 10 s
    std::atomic<int64_t>    slots_busy_{0};
    std::atomic<int64_t>    kv_pages_used_{0};
    ThreadPool              sampling_;  // (declared before thread_: the loop uses it)
    std::thread             thread_;
};

}  // namespace tern::server
