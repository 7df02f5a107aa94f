// WebGpuBackend::decode: the two pipelined decode streams (backend.h, DecodeStream).
//
// GreedyStream (the device chooses: the head's argmax): ids never leave the device between steps.
// Step i of a batch reads id slot i and writes slot i + 1 of one of two rings of batch + 1 slots,
// and a batch's first step reads the previous batch's last slot (in the other ring), so the next
// batch's first steps are recorded and submitted before this batch's ids are read back: the device
// never waits for the host to read, hand out ids and record between batches. Steps go out several
// per submit (a submit costs time of its own: ~25 us per extra submit on an H200, host and device
// together; GPU timestamps put ~17.5 us of idle device between two command buffers), in groups
// that start at one step and grow by one every k_group_ramp steps, so that the host, which records
// a step in a little less time than the device runs it, gets ahead before it holds steps back.
//
// With DecodeRequest.sampling the same stream samples instead: each step's head is followed by
// sample.wgsl, which reads the step's uniform from a ring of 2 (batch + 1) floats (indexed by the
// step's number: at most a batch and the next batch's first steps are in flight), written for the
// steps a read_batch records before it records them.
//
// PickedStream (the host picks from each step's logits, e.g. the sampler): each step is recorded
// while the one before runs, held (hold_step) until its token is written, then submitted.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace tern {
namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

// Greedy steps per submit (WebGpuTuning::steps_per_submit, submit_ramp). H200 tg128 by steps per
// submit (three alternating rounds): 1 950.2-955.0 tokens/s, 2 958.2-960.6, 4 963.3-965.0, 6
// 963.1-964.1, 8 963.0-965.1. (Groups that grew while the device stayed fed, judged from
// queue-done callbacks, gained 0.5% on some hosts and lost 7% on another: not kept.)

class GreedyStream final : public DecodeStream {
public:
    GreedyStream(WebGpuBackend & be, const DecodeRequest & r) : be_(be), r_(r) {
        TERN_ASSERT(r_.record != nullptr && r_.batch >= 1 && r_.logits.buffer != nullptr, "greedy decode request");
        per_ring_ = r_.batch + 1;
        rings_    = be_.decode_ids(2 * per_ring_);
        if (r_.sampling != nullptr) {
            TERN_ASSERT(r_.uniform != nullptr, "a sampled decode request without uniforms");
            uniforms_ = alloc_tensor(be_, DType::f32, {2 * per_ring_, 1, 1, 1}, "decode uniforms");
            u_host_.resize(static_cast<size_t>(2 * per_ring_));
        }
        host_.resize(static_cast<size_t>(r_.batch));
        be_.write(slot(0, 0, 1), &r_.first, sizeof r_.first);
        steps_ = std::min(r_.batch, r_.n_max);
        write_uniforms(steps_ + std::max<int64_t>(next_and_ahead().second, 0));  // (writes go before the ramp)
        be_.start_from_idle();
    }

    ~GreedyStream() override {
        if (done_ > 0) {
            // Where a stream's time goes (-v): the host recording and submitting steps, and waiting
            // for a batch's ids while the device runs (tern -vv adds each batch's time).
            const double per = 1e3 / static_cast<double>(done_);
            TERN_LOG_INFO("webgpu: %s decoding: %lld steps read back in batches of %lld, %lld recorded; host ms per "
                          "step: record %.3f, wait %.3f; %.2f ms per step in all",
                          r_.sampling != nullptr ? "sampled" : "greedy", static_cast<long long>(done_),
                          static_cast<long long>(r_.batch), static_cast<long long>(n_recorded_), host_s_ * per,
                          wait_s_ * per, seconds_since(began_) * per);
        }
        // Back to a submit per step, with nothing left unsubmitted.
        try {
            be_.submit_steps();
        } catch (...) {  // a device error surfaces at the next wait
        }
        be_.set_steps_per_submit(1);
    }

    size_t next(std::span<int32_t> ids) override {
        if (at_ == n_read_ && !read_batch()) return 0;
        const size_t n = std::min(ids.size(), n_read_ - at_);
        std::copy_n(host_.begin() + static_cast<std::ptrdiff_t>(at_), n, ids.begin());
        at_ += n;
        return n;
    }

    double host_seconds() const override { return host_s_; }

private:
    // Slots [first, first + n) of ring `which`.
    Tensor slot(int which, int64_t first, int64_t n) const {
        Tensor t = rings_;
        t.offset += static_cast<size_t>(which * per_ring_ + first) * sizeof(int32_t);
        t.ne[0] = n;
        return t;
    }

    int64_t group_size() const { return group_size_at(n_recorded_); }
    // The group size once n steps are recorded.
    int64_t group_size_at(int64_t n) const {
        const WebGpuTuning & t = be_.tuning();
        return std::min<int64_t>(t.steps_per_submit, 1 + n / t.submit_ramp);
    }

    // One step at position pos, its id read from `in`, its argmax written to `out`.
    void record(int64_t pos, const Tensor & in, const Tensor & out) {
        be_.set_steps_per_submit(group_size());
        DecodeStep step;
        step.pos         = pos;
        step.token       = in;
        step.head.logits = r_.logits;
        step.head.ids    = out;
        if (r_.sampling != nullptr) {
            step.head.sampling = r_.sampling;
            step.head.uniform  = uniform_slot(n_recorded_);
        }
        be_.begin_step();
        r_.record(step);
        be_.end_step();
        ++n_recorded_;
    }

    Tensor uniform_slot(int64_t step) const {
        Tensor t = uniforms_.tensor;
        t.offset += static_cast<size_t>(step % (2 * per_ring_)) * sizeof(float);
        t.ne[0] = 1;
        return t;
    }

    // How far the next read_batch records: the next batch's size and its first steps recorded ahead.
    std::pair<int64_t, int64_t> next_and_ahead() const {
        const int64_t next = std::min(r_.batch, r_.n_max - done_ - steps_);
        // (the group size once this batch's steps are recorded)
        return {next, std::min(next, group_size_at(n_recorded_ + steps_ - recorded_) + 2)};
    }

    // Draws the uniforms of steps [u_written_, end) and writes them into the ring before those
    // steps are recorded (the steps in flight use other slots).
    void write_uniforms(int64_t end) {
        const int64_t n = end - u_written_;
        if (r_.sampling == nullptr || n <= 0) return;
        const int64_t ring = 2 * per_ring_;
        for (int64_t i = 0; i < n; ++i) u_host_[static_cast<size_t>((u_written_ + i) % ring)] = r_.uniform();
        const int64_t first = u_written_ % ring;
        u_written_ = end;
        const int64_t n1    = std::min(n, ring - first);
        Tensor        t     = uniforms_.tensor;
        t.offset += static_cast<size_t>(first) * sizeof(float);
        t.ne[0] = n1;
        be_.write(t, u_host_.data() + first, static_cast<size_t>(n1) * sizeof(float));
        if (n > n1) {
            t        = uniforms_.tensor;
            t.ne[0]  = n - n1;
            be_.write(t, u_host_.data(), static_cast<size_t>(n - n1) * sizeof(float));
        }
    }

    // Records the rest of the current batch and the next batch's first steps, reads the batch's ids.
    bool read_batch() {
        if (steps_ <= 0) return false;
        const auto    t0   = clock::now();
        const int64_t pos  = r_.pos0 + done_;
        const auto [next, ahead] = next_and_ahead();
        write_uniforms(n_recorded_ + steps_ - recorded_ + std::max<int64_t>(ahead, 0));
        for (int64_t i = recorded_; i < steps_; ++i) record(pos + i, slot(cur_, i, 1), slot(cur_, i + 1, 1));
        be_.read_begin(slot(cur_, 1, steps_), static_cast<size_t>(steps_) * sizeof(int32_t));
        if (next > 0) {  // the next batch's first steps, the first fed this batch's last id
            try {
                record(pos + steps_, slot(cur_, steps_, 1), slot(1 - cur_, 1, 1));
                for (int64_t i = 1; i < ahead; ++i) record(pos + steps_ + i, slot(1 - cur_, i, 1), slot(1 - cur_, i + 1, 1));
                be_.submit_steps();
            } catch (...) {
                try {  // leave no read in flight: the next read_begin would refuse
                    be_.read_end(host_.data());
                } catch (...) {
                }
                throw;
            }
        }
        host_s_ += seconds_since(t0);
        const auto t_wait = clock::now();
        be_.read_end(host_.data());
        wait_s_ += seconds_since(t_wait);
        TERN_LOG_DEBUG("webgpu: decode steps %lld-%lld read back %.2f ms after the stream began",
                       static_cast<long long>(done_), static_cast<long long>(done_ + steps_ - 1),
                       1e3 * seconds_since(began_));
        at_       = 0;
        n_read_   = static_cast<size_t>(steps_);
        done_    += steps_;
        cur_      = 1 - cur_;
        steps_    = std::max<int64_t>(next, 0);
        recorded_ = steps_ > 0 ? ahead : 0;
        return true;
    }

    WebGpuBackend &      be_;
    DecodeRequest        r_;
    int64_t              per_ring_ = 0;
    Tensor               rings_;               // [2 per_ring_] i32
    std::vector<int32_t> host_;                // the last batch read back
    size_t               at_ = 0, n_read_ = 0;  // host_[at_, n_read_) not given out yet
    int64_t              done_       = 0;      // ids of the batches read so far
    int64_t              steps_      = 0;      // steps of the current batch
    int64_t              recorded_   = 0;      // of them, recorded ahead during the batch before
    int64_t              n_recorded_ = 0;      // steps recorded in all, for the groups' ramp
    int                  cur_        = 0;      // the current batch's ring
    double               host_s_     = 0;
    double               wait_s_     = 0;      // in read_end: the device runs, the host waits
    clock::time_point    began_      = clock::now();
    OwnedTensor          uniforms_;            // sampling: [2 per_ring_] f32, step i's at i % (2 per_ring_)
    std::vector<float>   u_host_;
    int64_t              u_written_ = 0;       // steps whose uniforms are in the ring
};

class PickedStream final : public DecodeStream {
public:
    PickedStream(WebGpuBackend & be, const DecodeRequest & r)
        : be_(be), r_(r), token_(alloc_tensor(be, DType::i32, {1, 1, 1, 1}, "decode token")) {
        TERN_ASSERT(r_.record != nullptr && r_.logits.buffer != nullptr, "picked decode request");
        logits_.resize(static_cast<size_t>(r_.logits.ne[0]));
        const auto t0 = clock::now();
        be_.write(token_.tensor, &r_.first, sizeof r_.first);
        record(r_.pos0, false);  // runs while the caller hands `first` out
        host_.submit += seconds_since(t0);
    }

    ~PickedStream() override {
        try {
            if (held_) be_.drop_held_step();
        } catch (...) {
        }
        if (given_ > 0) {
            const double per = 1e3 / static_cast<double>(given_);
            TERN_LOG_INFO("sampled decoding: %lld tokens (%lld steps run twice: not held); host ms per token: "
                          "record %.3f, read %.3f, pick %.3f, submit %.3f", static_cast<long long>(given_),
                          static_cast<long long>(reruns_), host_.record * per, host_.read * per, host_.pick * per,
                          host_.submit * per);
        }
    }

    size_t next(std::span<int32_t> ids) override {
        if (given_ >= r_.n_max || ids.empty()) return 0;
        try {
            ids[0] = step();
        } catch (...) {
            if (held_) be_.drop_held_step();  // (a held step left behind would block the next one)
            held_ = false;
            throw;
        }
        return 1;
    }

    double host_seconds() const override { return host_.record + host_.submit; }

private:
    // The step at pos, fed the token tensor; held: kept unsubmitted until its token is written
    // (returns whether it could be held).
    bool record(int64_t pos, bool hold) {
        DecodeStep step;
        step.pos         = pos;
        step.token       = token_.tensor;
        step.head.logits = r_.logits;
        step.head.top_k  = r_.top_k;
        be_.begin_step();
        r_.record(step);
        if (hold) return be_.hold_step();
        be_.end_step();
        return false;
    }

    // The step at pos0 + given_ runs: record the next one held, read this one's logits, pick the
    // id, write it, release the next step.
    int32_t step() {
        const int64_t pos  = r_.pos0 + given_;
        auto          t0   = clock::now();
        const bool    feed = given_ + 1 < r_.n_max;  // the id picked now is fed at pos + 1
        if (feed) {
            held_ = record(pos + 1, true);
            if (!held_) {
                // The backend could not hold that step (part of it was submitted while it was
                // recorded, e.g. to grow a table): it ran with this step's token and overwrote the
                // results. Run this step again to read them; the next one is recorded afresh.
                record(pos, false);
                ++reruns_;
            }
        }
        host_.record += seconds_since(t0);
        t0 = clock::now();
        StepLogits l;
        if (r_.top_k > 0 && be_.read_top_k_rows(r_.logits, rows_)) {
            l.rows = rows_;
        } else {
            be_.read(r_.logits, logits_.data(), logits_.size() * sizeof(float));
            l.all = logits_;
        }
        host_.read += seconds_since(t0);
        t0 = clock::now();
        const int32_t id = r_.pick(l);
        ++given_;
        host_.pick += seconds_since(t0);
        t0 = clock::now();
        if (feed) {
            be_.write(token_.tensor, &id, sizeof id);  // after the step before, before the held one
            if (held_) {
                be_.release_held_step();
                held_ = false;
            } else {
                record(pos + 1, false);
            }
        }
        host_.submit += seconds_since(t0);
        return id;
    }

    WebGpuBackend &       be_;
    DecodeRequest         r_;
    OwnedTensor           token_;  // [1] i32: the id the next step embeds, written before it runs
    std::vector<float>    logits_;
    std::vector<LogitRow> rows_;
    int64_t               given_  = 0;
    int64_t               reruns_ = 0;
    bool                  held_   = false;
    struct {
        double record = 0, read = 0, pick = 0, submit = 0;
    } host_;
};

}  // namespace

void WebGpuBackend::set_steps_per_submit(int64_t n) { steps_per_submit_ = std::max<int64_t>(1, n); }

// The first step after the device idled goes out in pieces of 8, 16, 32 and 64 dispatches (then
// the rest with the step): the device starts after the first few dispatches are recorded instead
// of after the whole step (the host records a dispatch in about half the time the device runs it,
// so each piece is recorded while the device runs the one before). H100 tg128 (three alternating
// rounds): 910.7-912.8 tokens/s against 905.7-909.6 on a machine whose host took 0.87-1.05 ms per
// step; within noise (907.0-909.7 either way) on one whose host took 0.6-0.9 ms; pieces from 4
// or 16 no better (WebGpuTuning::first_submit).
void WebGpuBackend::start_from_idle() {
    if (tune_.first_submit > 0) step_->ramp_submits(tune_.first_submit, 8 * size_t{tune_.first_submit});
}

bool WebGpuBackend::hold_step() {
    step_->ramp_submits(0, 0);  // (start_from_idle's pieces end with the step, held or not)
    if (step_->submits() != step_submits_at_begin_) {
        // Part of the step was submitted while it was recorded: it cannot wait for its input.
        step_->flush();
        top_k_pending_.clear();
        return false;
    }
    step_->hold();
    return true;
}

void WebGpuBackend::drop_held_step() {
    if (!step_->holding()) return;
    step_->drop_held();
    // The held step's head (recorded last) will not run.
    if (!top_k_pending_.empty()) top_k_pending_.pop_back();
}

std::unique_ptr<DecodeStream> WebGpuBackend::decode(const DecodeRequest & request) {
    if (!request.pick) return std::make_unique<GreedyStream>(*this, request);
    if (!can_hold_steps()) return Backend::decode(request);  // a profile serializes every dispatch anyway
    return std::make_unique<PickedStream>(*this, request);
}

const Tensor & WebGpuBackend::decode_ids(int64_t n) {
    if (!decode_ids_.buffer || decode_ids_.tensor.ne[0] < n) {
        step_->run_deferred();  // (a deferred argmax may write the old buffer)
        decode_ids_ = alloc_tensor(*this, DType::i32, {n, 1, 1, 1}, "decode ids");
    }
    return decode_ids_.tensor;
}

}  // namespace tern
