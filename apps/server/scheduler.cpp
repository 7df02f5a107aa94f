// The scheduler loop (see scheduler.h).
#include "scheduler.h"

#include "core/log.h"
#include "engine/session.h"
#include "stop_strings.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>

namespace tern::server {

using Clock = std::chrono::steady_clock;

bool Job::next(JobEvent & out, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
    out = std::move(events_.front());
    events_.pop_front();
    return true;
}

void Job::cancel() {
    if (cancelled_.exchange(true)) return;
    std::function<void()> wake;
    {
        std::lock_guard lock(mutex_);
        wake = wake_scheduler_;
    }
    if (wake) wake();
}

void Job::push(JobEvent e) {
    {
        std::lock_guard lock(mutex_);
        events_.push_back(std::move(e));
    }
    cv_.notify_all();
}

// A request running in a slot.
struct Scheduler::Slot {
    std::shared_ptr<Job>   job;
    SequenceId             seq = -1;
    Sampler                sampler;
    StreamingDecoder       decoder;
    size_t                 prompt_fed = 0;  // prompt tokens fed so far
    int32_t                last       = -1; // the token to feed next (generating)
    int64_t                n_generated = 0;
    std::string            text;            // everything generated (decoded)
    size_t                 sent = 0;        // text[0, sent) handed out
    std::vector<TokenLogprob> logprobs;     // tokens behind text not yet handed out
    std::vector<float>     logits;          // [n_vocab]
    std::vector<Candidate> rows;            // or (top_k_only) the step's top-k rows (BatchItem::top_rows)
    bool                   want_logits = false;  // this step's item asked for logits (or the argmax)
    // Greedy without penalties or logprobs: the device finds the argmax and no logits come back.
    bool                   greedy_on_device = false;
    // A sampler whose chain starts with top-k (and no logprobs, which need every logit): its k, the
    // head then computes only the rows that can be among them exactly (BatchItem::top_k); else 0.
    int64_t                top_k_only = 0;
    int32_t                next = -1;       // the step's token, sampled (or the device's argmax)
    std::optional<TokenLogprob> next_logprob;
    std::optional<std::string>  sample_error;
    bool                   scattered = false;  // its pages are no run: never decodes alone (decode_alone)

    Slot(std::shared_ptr<Job> j, SequenceId s, const Tokenizer & tok, int32_t n_vocab)
        : job(std::move(j)), seq(s), sampler(job->spec().sampling, n_vocab), decoder(tok),
          logits(static_cast<size_t>(n_vocab)) {
        const JobSpec &       spec = job->spec();
        const SamplerParams & sp   = spec.sampling;
        greedy_on_device = sp.temp <= 0.0f && spec.logprobs < 0 &&
                           (sp.repeat_last_n == 0 || (sp.repeat_penalty == 1.0f && sp.frequency_penalty == 0.0f &&
                                                      sp.presence_penalty == 0.0f));
        top_k_only = !greedy_on_device && spec.logprobs < 0 && sampler.starts_with_top_k() ? sp.top_k : 0;
    }
    bool prefilling() const { return prompt_fed < job->spec().prompt.size(); }
};

Scheduler::Scheduler(BatchEngine & engine, const Tokenizer & tokenizer, const SchedulerOptions & options)
    : engine_(engine), tokenizer_(tokenizer), options_(options),
      sampling_(std::clamp(options.n_sampling_threads > 0 ? options.n_sampling_threads : default_thread_count(), 1,
                           std::max(1, options.n_slots))) {
    stats_.slots_total    = options.n_slots;
    stats_.kv_pages_total = engine.pool().n_pages();
    thread_               = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
    shutdown();
    thread_.join();
}

void Scheduler::shutdown() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
}

std::shared_ptr<Job> Scheduler::submit(JobSpec spec) {
    auto job = std::make_shared<Job>(std::move(spec));
    job->wake_scheduler_ = [this] { cv_.notify_all(); };
    {
        std::lock_guard lock(mutex_);
        const int64_t idle = options_.n_slots - slots_busy_.load();
        if (stopping_ || queue_.size() >= options_.max_queue + static_cast<size_t>(std::max<int64_t>(0, idle))) {
            ++stats_.requests_rejected;
            throw ApiError(503, "server_error",
                           "the server is busy: all " + std::to_string(options_.n_slots) + " slots are in use and " +
                               std::to_string(options_.max_queue) + " requests are waiting; retry later",
                           "", "server_busy");
        }
        queue_.push_back(job);
    }
    cv_.notify_all();
    return job;
}

int64_t Scheduler::slots_idle() const { return options_.n_slots - slots_busy_.load(); }

SchedulerStats Scheduler::stats() const {
    std::lock_guard lock(mutex_);
    SchedulerStats s = stats_;
    s.queue_depth    = static_cast<int64_t>(queue_.size());
    s.slots_busy     = slots_busy_.load();
    s.kv_pages_used  = kv_pages_used_.load();
    const auto now   = Clock::now();
    int64_t    n     = 0;
    for (const auto & [t, k] : recent_) {
        if (now - t <= std::chrono::seconds(10)) n += k;
    }
    s.tokens_per_second = static_cast<double>(n) / 10.0;
    return s;
}

void Scheduler::record_tokens(int64_t n) {
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    stats_.generated_tokens += n;
    recent_.emplace_back(now, n);
    while (!recent_.empty() && now - recent_.front().first > std::chrono::seconds(10)) recent_.pop_front();
}

void Scheduler::loop() {
    std::vector<std::unique_ptr<Slot>> slots;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            // Idle: sleep until a request, a cancellation or shutdown.
            cv_.wait(lock, [&] {
                return stopping_ || !slots.empty() ? true : !queue_.empty();
            });
            if (stopping_) break;
        }
        // Clients gone: free their slots now, before this step spends time on them.
        for (auto & s : slots) {
            if (s && s->job->cancelled()) {
                engine_.close(s->seq);
                std::lock_guard lock(mutex_);
                ++stats_.requests_cancelled;
                s.reset();
            }
        }
        std::erase_if(slots, [](const auto & s) { return !s; });
        admit(slots);
        slots_busy_    = static_cast<int64_t>(slots.size());
        kv_pages_used_ = engine_.pool().n_used();
        if (slots.empty()) {
            // Nothing runs: the queue holds only cancelled jobs (admit dropped them) or nothing.
            engine_.collect();  // (a step of slots all gone since)
            continue;
        }
        if (!decode_alone(slots)) run_step(slots);
        std::erase_if(slots, [](const auto & s) { return !s; });
        slots_busy_    = static_cast<int64_t>(slots.size());
        kv_pages_used_ = engine_.pool().n_used();
    }
    // Shutdown: everyone still waiting or running gets an answer.
    const ApiError bye(503, "server_error", "the server is shutting down", "", "server_shutdown");
    for (auto & s : slots) fail_slot(*s, bye);
    std::lock_guard lock(mutex_);
    for (auto & job : queue_) job->push({.done = true, .error = bye});
    queue_.clear();
}

void Scheduler::admit(std::vector<std::unique_ptr<Slot>> & slots) {
    const int32_t n_vocab = static_cast<int32_t>(engine_.model().config().n_vocab);
    for (;;) {
        std::shared_ptr<Job> job;
        {
            std::lock_guard lock(mutex_);
            while (!queue_.empty() && queue_.front()->cancelled()) {
                queue_.pop_front();
                ++stats_.requests_cancelled;
            }
            if (queue_.empty() || static_cast<int>(slots.size()) >= options_.n_slots) return;
            job = queue_.front();
        }
        const JobSpec &           spec = job->spec();
        std::optional<SequenceId> seq;
        try {
            seq = engine_.open(static_cast<int64_t>(spec.prompt.size()) + spec.max_tokens);
        } catch (const Error & e) {  // larger than the pool: the handler checks this first
            std::lock_guard lock(mutex_);
            queue_.pop_front();
            job->push({.done = true, .error = api_error_from(e)});
            continue;
        }
        if (!seq) return;  // first in, first served: wait until the pool has room for the head
        {
            std::lock_guard lock(mutex_);
            queue_.pop_front();
            // Busy from the moment it leaves the queue, under the same lock as submit()'s check: else
            // for a moment neither the queue nor the slots count it and one request too many gets in.
            slots_busy_ = static_cast<int64_t>(slots.size()) + 1;
            ++stats_.requests_started;
            stats_.prompt_tokens += static_cast<int64_t>(spec.prompt.size());
        }
        try {
            auto slot = std::make_unique<Slot>(job, *seq, tokenizer_, n_vocab);
            for (int32_t id : spec.prompt) slot->sampler.accept(id);  // penalties see the prompt, as `tern run`
            slots.push_back(std::move(slot));
        } catch (const Error & e) {
            engine_.close(*seq);
            job->push({.done = true, .error = api_error_from(e)});
        }
    }
}

namespace {

// log softmax of the model's logits (before penalties and temperature) for the chosen token and
// the k most likely ones.
TokenLogprob logprobs_of(std::span<const float> logits, int32_t chosen, int k) {
    float mx = -INFINITY;
    for (float l : logits) mx = std::max(mx, l);
    double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
    const float   log_z = mx + static_cast<float>(std::log(sum));
    TokenLogprob  lp;
    lp.id      = chosen;
    lp.logprob = logits[static_cast<size_t>(chosen)] - log_z;
    if (k > 0) {
        std::vector<int32_t> ids(logits.size());
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
        const size_t kk = std::min(static_cast<size_t>(k), ids.size());
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kk), ids.end(), [&](int32_t a, int32_t b) {
            return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
                   (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
        });
        for (size_t i = 0; i < kk; ++i) lp.top.emplace_back(ids[i], logits[static_cast<size_t>(ids[i])] - log_z);
    }
    return lp;
}

}  // namespace

// A generating slot's item: its last token (or, recorded ahead, a token given at release), and
// where its outputs go.
static BatchItem generating_item(SequenceId seq, const int32_t * token, bool greedy_on_device, std::span<float> logits,
                                 int32_t * next, int64_t top_k_only, std::vector<Candidate> * rows) {
    return {seq, std::span(token, 1), greedy_on_device ? std::span<float>() : logits, greedy_on_device ? next : nullptr,
            top_k_only, top_k_only > 0 ? rows : nullptr};
}

bool Scheduler::launch_step(std::vector<std::unique_ptr<Slot>> & slots) {
    std::vector<BatchItem> items;
    int64_t                budget = options_.n_prefill_per_step;
    for (auto & s : slots) {
        const auto & prompt = s->job->spec().prompt;
        s->want_logits      = false;
        if (s->prefilling()) {
            const int64_t n = std::min<int64_t>(budget, static_cast<int64_t>(prompt.size() - s->prompt_fed));
            if (n <= 0) continue;
            budget -= n;
            s->want_logits = s->prompt_fed + static_cast<size_t>(n) == prompt.size();
            items.push_back({s->seq, std::span(prompt).subspan(s->prompt_fed, static_cast<size_t>(n)),
                             s->want_logits && !s->greedy_on_device ? std::span<float>(s->logits) : std::span<float>(),
                             s->want_logits && s->greedy_on_device ? &s->next : nullptr, s->top_k_only,
                             s->want_logits && s->top_k_only > 0 ? &s->rows : nullptr});
            s->prompt_fed += static_cast<size_t>(n);
        } else {
            s->want_logits = true;
            items.push_back(generating_item(s->seq, &s->last, s->greedy_on_device, s->logits, &s->next,
                                            s->top_k_only, &s->rows));
        }
    }
    // Prompts go first in the next step's budget by rotating the slot order: no slot starves.
    if (slots.size() > 1) std::rotate(slots.begin(), slots.begin() + 1, slots.end());
    // (a step of more tokens than a pass holds: BatchEngine::step's passes, one after the other)
    int64_t n_tokens = 0;
    for (const BatchItem & it : items) n_tokens += static_cast<int64_t>(it.tokens.size());
    if (n_tokens > engine_.n_chunk()) {
        engine_.step(items);
        return false;
    }
    engine_.launch(items);
    return true;
}

// Whether the next step can be recorded while this one runs: every slot is generating and gets its
// next token from this step, nobody waits for a slot (a new request makes the next step different),
// and each sequence has room for one more position (a slot that ends after this step wastes a
// column of the next one, which is discarded).
bool Scheduler::can_record_ahead(const std::vector<std::unique_ptr<Slot>> & slots) {
    if (slots.size() < 2) return false;  // (a lone slot decodes through decode_alone's path)
    for (const auto & s : slots) {
        if (!s->want_logits || s->prefilling() || s->job->cancelled()) return false;
        if (engine_.n_past(s->seq) + 1 > engine_.capacity(s->seq)) return false;
    }
    std::lock_guard lock(mutex_);
    return queue_.empty() && !stopping_;
}

void Scheduler::run_step(std::vector<std::unique_ptr<Slot>> & slots) {
    bool                   ahead = false;
    std::vector<BatchItem> next;       // the step recorded ahead, and its slots in item order
    std::vector<Slot *>    next_slots;
    std::vector<int32_t>   next_tokens;
    double                 sampled   = 0;      // seconds from the step's results to its tokens
    try {
        // The step in flight: recorded ahead last time and released, or launched now.
        if (!engine_.launched() && !launch_step(slots)) {
            // (ran whole: BatchEngine::step)
        } else if (can_record_ahead(slots)) {
            for (auto & s : slots) {
                next.push_back(generating_item(s->seq, &s->next, s->greedy_on_device, s->logits, &s->next,
                                               s->top_k_only, &s->rows));
                next_slots.push_back(s.get());
            }
            ahead = engine_.record_ahead(next);
        }
        engine_.collect(options_.sampling_form == 0 ? BatchEngine::Unpack::now : BatchEngine::Unpack::deferred);
    } catch (const Error & e) {
        TERN_LOG_ERROR("server: a decoding step failed: %s", e.what());
        engine_.drop_ahead();
        const ApiError err = api_error_from(e);
        for (auto & s : slots) {
            fail_slot(*s, err.status >= 500 ? err : ApiError(500, "server_error", err.what()));
            s.reset();
        }
        return;
    }
    // Pages are taken as tables grow (inside the step): count them before any handler hears of it.
    kv_pages_used_ = engine_.pool().n_used();
    {
        const auto t0 = Clock::now();
        sample_all(slots);
        sampled = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (ahead) {
        // The next step goes to the device before the tokens are handed out (which it overlaps). A
        // slot that could not sample feeds token 0 there: it fails below, the column is discarded.
        for (Slot * s : next_slots) next_tokens.push_back(s->sample_error || s->next < 0 ? 0 : s->next);
        try {
            engine_.release_ahead(next_tokens);
        } catch (const Error & e) {
            TERN_LOG_ERROR("server: a decoding step failed: %s", e.what());
            ahead = false;
        }
    }
    const auto t2 = Clock::now();
    for (auto & s : slots) {
        if (!s->want_logits) continue;
        if (s->sample_error) {
            fail_slot(*s, ApiError(500, "server_error", *s->sample_error));
            s.reset();
        } else if (!advance(*s)) {
            s.reset();
        }
    }
    const auto                  t3 = Clock::now();
    const BatchEngine::Timing & et = engine_.timing();
    std::lock_guard             lock(mutex_);
    ++stats_.steps;
    stats_.steps_ahead        = et.passes_ahead;
    stats_.record_seconds     = et.record_s;
    stats_.record_ahead_seconds = et.record_ahead_s;
    stats_.release_seconds      = et.release_s;
    stats_.wait_seconds       = et.wait_s;
    stats_.unpack_seconds     = et.unpack_s;
    stats_.full_logit_reads   = et.full_logit_reads;
    stats_.listed_columns     = et.listed_columns;
    stats_.listed_rows        = et.listed_rows;
    stats_.sample_seconds += sampled;
    stats_.deliver_seconds += std::chrono::duration<double>(t3 - t2).count();
}

// Each slot's next token (and its logprobs): the samplers are independent (each its own state and
// seed), so the slots are spread over the sampling threads and every result is what one thread
// would give. (With 64 streams of a 128k vocabulary one thread spent longer on this than the GPU on
// the step.)
void Scheduler::sample_slot(Slot & s, bool unpack) {
    try {
        if (unpack) engine_.unpack(s.seq);  // (distinct sequences on each thread: BatchEngine::unpack)
        if (s.greedy_on_device) return;     // (its argmax is the device's, or its list's)
        // (the rows the device listed, where it did: the same token as from every logit)
        s.next = s.rows.empty() ? s.sampler.sample(s.logits) : s.sampler.sample_top_k(s.rows);
        const int k = s.job->spec().logprobs;
        if (k >= 0) s.next_logprob = logprobs_of(s.logits, s.next, k);
    } catch (const std::exception & e) {  // (a worker thread must not throw)
        s.sample_error = e.what();
    }
}

void Scheduler::sample_all(std::vector<std::unique_ptr<Slot>> & slots) {
    // Form 0: the greedy slots' argmax is there already; else each slot's list is unpacked here.
    const bool          unpack = options_.sampling_form != 0;
    std::vector<Slot *> ready;
    for (auto & s : slots) {
        if (s->want_logits && (unpack || !s->greedy_on_device)) ready.push_back(s.get());
    }
    sampling_.parallel_for(static_cast<int64_t>(ready.size()), 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) sample_slot(*ready[static_cast<size_t>(i)], unpack);
    });
}

bool Scheduler::decode_alone(std::vector<std::unique_ptr<Slot>> & slots) {
    if (slots.size() != 1 || engine_.launched()) return false;  // (a step in flight: run_step collects it)
    Slot & s = *slots[0];
    if (s.prefilling() || s.scattered || s.job->spec().logprobs >= 0 || s.job->cancelled()) return false;
    {
        std::lock_guard lock(mutex_);
        if (!queue_.empty() || stopping_) return false;
    }
    std::optional<KvCache> view = engine_.contiguous_view(s.seq);
    if (!view) {
        s.scattered = true;
        return false;
    }
    const int64_t n_past = engine_.n_past(s.seq);
    bool          ended  = false;  // the slot finished (advance closed its sequence)
    int64_t       taken  = 0;
    // Each id as the batched step's would be taken; false (stop) once the slot ends, its client
    // leaves or a request waits (it joins the batch at the next step).
    auto take = [&](int32_t id) {
        ++taken;
        s.next = id;
        if (!advance(s, /*accepted=*/!s.greedy_on_device)) {
            ended = true;
            return false;
        }
        if (s.job->cancelled()) return false;
        std::lock_guard lock(mutex_);
        return queue_.empty() && !stopping_;
    };
    try {
        SessionOptions so;
        so.n_batch              = 1;
        so.round_head_input_f16 = engine_.round_head_input_f16();
        Session alone(engine_.model(), so, std::move(*view), n_past);
        if (s.greedy_on_device) {
            // (ids come back 16 at a time: a request that arrives waits at most that many steps)
            alone.decode_greedy(s.last, s.job->spec().max_tokens - s.n_generated, take, 16);
        } else {
            alone.decode_sampled_after(s.sampler, s.last, take);
        }
        if (!ended) engine_.mark_fed(s.seq, alone.n_past() - n_past);
        if (!ended && taken == 0) s.scattered = true;  // (no progress: the batched steps go on instead)
    } catch (const Error & e) {
        TERN_LOG_ERROR("server: decoding a lone request failed: %s", e.what());
        const ApiError err = api_error_from(e);
        if (!ended) fail_slot(s, err.status >= 500 ? err : ApiError(500, "server_error", err.what()));
        ended = true;
    }
    if (ended) slots[0].reset();
    return true;
}

bool Scheduler::advance(Slot & s, bool accepted) {
    const JobSpec & spec = s.job->spec();
    const int32_t   id   = s.next;
    if (!accepted) s.sampler.accept(id);
    const bool end_of_turn = tokenizer_.is_eog(id) ||
                             std::find(spec.stop_ids.begin(), spec.stop_ids.end(), id) != spec.stop_ids.end();
    if (end_of_turn && !spec.ignore_eos) {
        s.text += s.decoder.flush();
        finish(s, "stop");
        return false;
    }
    ++s.n_generated;
    record_tokens(1);
    if (s.next_logprob) s.logprobs.push_back(std::move(*s.next_logprob));
    s.next_logprob.reset();
    s.text += s.decoder.push(id);
    s.last = id;
    const bool last = s.n_generated >= spec.max_tokens;
    if (last) s.text += s.decoder.flush();
    const StopScan scan = scan_stops(s.text, s.sent, spec.stop);
    if (scan.found) {
        s.text.resize(scan.end);
        finish(s, "stop");
        return false;
    }
    if (last) {
        finish(s, "length");
        return false;
    }
    if (scan.end > s.sent || !s.logprobs.empty()) {
        JobEvent e;
        e.text = s.text.substr(s.sent, scan.end - s.sent);
        e.logprobs.swap(s.logprobs);
        s.sent = scan.end;
        s.job->push(std::move(e));
    }
    return true;
}

void Scheduler::finish(Slot & s, std::string reason) {
    engine_.close(s.seq);
    JobEvent e;
    e.text = s.text.substr(std::min(s.sent, s.text.size()));
    e.logprobs.swap(s.logprobs);
    e.done          = true;
    e.finish_reason = std::move(reason);
    e.n_prompt      = static_cast<int64_t>(s.job->spec().prompt.size());
    e.n_generated   = s.n_generated;
    {
        std::lock_guard lock(mutex_);  // counted before the handler hears of it
        ++stats_.requests_finished;
    }
    s.job->push(std::move(e));
}

void Scheduler::fail_slot(Slot & s, const ApiError & err) {
    engine_.close(s.seq);
    {
        std::lock_guard lock(mutex_);
        ++stats_.requests_failed;
    }
    s.job->push({.done = true, .error = err});
}

}  // namespace tern::server
