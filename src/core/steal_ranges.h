// Per-thread ranges of units that a thread which finishes its own takes from the ends of the
// others' (issue 51: at 2 threads a one-token product's halves rarely end together; the first to
// finish waited for the other). Each thread walks its own range from the front, so its stream stays
// contiguous; a thief takes single units from the back of another thread's range. Which thread
// computes a unit changes from run to run, what it computes does not (every unit is computed once,
// by the same kernel): results stay bit-identical to the static split.
#pragma once

#include "core/thread_pool.h"

#include <algorithm>
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

    // The thread whose range (as reset() gives it) holds unit u of n_units, and that range [b, e).
    static int owner(int n_threads, int64_t n_units, int64_t u, int64_t & b, int64_t & e) {
        for (int t = 0; t < n_threads; ++t) {
            ThreadPool::chunk_range(n_units, 1, n_threads, t, b, e);
            if (u < e) return t;
        }
        return n_threads - 1;
    }

    // The next unit of thread t: its own range's front, then the backs of the others' (t + 1,
    // t + 2, ... in turn). False when none is left.
    bool next(int t, int64_t & unit) {
        int64_t count = 0;
        return next(t, unit, count, 1);
    }
    // The next units [unit, unit + count) of thread t: up to max_own from its own range's front, at
    // most half of what is left there (rounded up), so that its last takes shrink to single units
    // while a thief takes single units from the back; then single units from the backs of the
    // others'. Small units end a job's threads close together, taking several at once keeps the
    // calls as few as with large units.
    bool next(int t, int64_t & unit, int64_t & count, int64_t max_own) {
        if (take(t, max_own, unit, count)) return true;
        for (int i = 1; i < n_threads_; ++i) {
            if (take((t + i) % n_threads_, 0, unit, count)) return true;
        }
        return false;
    }

private:
    struct alignas(64) Slot {
        std::atomic<uint64_t> fb{0};  // front (high 32 bits) and back (low 32 bits): units [front, back) left
    };
    static uint64_t pack(int64_t f, int64_t b) { return (static_cast<uint64_t>(f) << 32) | static_cast<uint64_t>(b); }

    // From slot s's front up to max_front units (at most half of what is left, rounded up), or
    // with max_front 0 one unit from its back.
    bool take(int s, int64_t max_front, int64_t & unit, int64_t & count) {
        std::atomic<uint64_t> & fb  = slots_[s].fb;
        uint64_t                cur = fb.load(std::memory_order_relaxed);
        for (;;) {
            const int64_t f = static_cast<int64_t>(cur >> 32), b = static_cast<int64_t>(cur & 0xffffffffu);
            if (f >= b) return false;
            const int64_t  n   = max_front > 0 ? std::max<int64_t>(1, std::min(max_front, (b - f + 1) / 2)) : 1;
            const uint64_t nxt = max_front > 0 ? pack(f + n, b) : pack(f, b - 1);
            if (fb.compare_exchange_weak(cur, nxt, std::memory_order_relaxed)) {
                unit  = max_front > 0 ? f : b - 1;
                count = n;
                return true;
            }
        }
    }

    std::unique_ptr<Slot[]> slots_;
    int                     n_slots_ = 0, n_threads_ = 0;
};

}  // namespace tern
