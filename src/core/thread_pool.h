// A fixed pool of worker threads running parallel_for over an index range. Work is split into
// contiguous chunks, one per thread, so results never depend on scheduling (every output element is
// computed by exactly one thread with the same arithmetic as a single-threaded run).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tern {

class ThreadPool {
public:
    // n_threads <= 0 picks the hardware concurrency.
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool &)             = delete;
    ThreadPool & operator=(const ThreadPool &) = delete;

    int n_threads() const { return n_threads_; }

    // Calls fn(begin, end, thread_index) on disjoint sub-ranges covering [0, n). Blocks until done.
    // Ranges are multiples of `grain` except the last. Not reentrant.
    void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)> & fn);

private:
    void worker_loop(int index);

    int                      n_threads_;
    std::vector<std::thread> workers_;
    std::mutex               mutex_;
    std::condition_variable  start_cv_;
    std::condition_variable  done_cv_;
    uint64_t                 generation_ = 0;
    int                      pending_    = 0;
    bool                     stop_       = false;
    const std::function<void(int64_t, int64_t, int)> * job_ = nullptr;
    int64_t                  job_n_     = 0;
    int64_t                  job_grain_ = 1;
};

int default_thread_count();

}  // namespace tern
