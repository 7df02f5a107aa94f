// Per-thread ranges of units that a thread which finishes its own takes from the ends of the
// others' (issue 51: at 2 threads a one-token product's halves rarely end together; the first to
// finish waited for the other). Each thread walks its own range from the front, so its stream stays
// contiguous; a thief takes single units from the back of another thread's range. Which thread
// computes a unit changes from run to run, what it computes does not (every unit is computed once,
// by the same kernel): results stay bit-identical to the static split.
#pragma once

#include "core/thread_pool.h"

#include <atomic>
#include <cstdint>
#include <memory>

namespace tern {

class StealRanges {
public:
    // Thread t's range is ThreadPool::chunk_range(n_units, 1, n_threads, t). Call before the job
    // starts (not from inside it); n_units < 2^31.
    void reset(int n_threads, int64_t n_units) {
        if (n_threads > n_slots_) {
            slots_   = std::make_unique<Slot[]>(static_cast<size_t>(n_threads));
            n_slots_ = n_threads;
        }
        n_threads_ = n_threads;
        for (int t = 0; t < n_threads; ++t) {
            int64_t b = 0, e = 0;
            ThreadPool::chunk_range(n_units, 1, n_threads, t, b, e);
            slots_[t].fb.store(pack(b, e), std::memory_order_relaxed);
        }
    }

    // The next unit of thread t: its own range's front, then the backs of the others' (t + 1,
    // t + 2, ... in turn). False when none is left.
    bool next(int t, int64_t & unit) {
        if (take(t, true, unit)) return true;
        for (int i = 1; i < n_threads_; ++i) {
            if (take((t + i) % n_threads_, false, unit)) return true;
        }
        return false;
    }

private:
    struct alignas(64) Slot {
        std::atomic<uint64_t> fb{0};  // front (high 32 bits) and back (low 32 bits): units [front, back) left
    };
    static uint64_t pack(int64_t f, int64_t b) { return (static_cast<uint64_t>(f) << 32) | static_cast<uint64_t>(b); }

    bool take(int s, bool front, int64_t & unit) {
        std::atomic<uint64_t> & fb  = slots_[s].fb;
        uint64_t                cur = fb.load(std::memory_order_relaxed);
        for (;;) {
            const int64_t f = static_cast<int64_t>(cur >> 32), b = static_cast<int64_t>(cur & 0xffffffffu);
            if (f >= b) return false;
            const uint64_t nxt = front ? pack(f + 1, b) : pack(f, b - 1);
            if (fb.compare_exchange_weak(cur, nxt, std::memory_order_relaxed)) {
                unit = front ? f : b - 1;
                return true;
            }
        }
    }

    std::unique_ptr<Slot[]> slots_;
    int                     n_slots_ = 0, n_threads_ = 0;
};

}  // namespace tern
