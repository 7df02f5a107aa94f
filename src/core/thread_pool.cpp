// ThreadPool: workers sleep on a condition variable; each job is split into one chunk per thread.
#include "core/thread_pool.h"

#include <algorithm>

namespace tern {

int default_thread_count() {
    const unsigned hc = std::thread::hardware_concurrency();
    return hc == 0 ? 1 : static_cast<int>(hc);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_thread_count()) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (auto & w : workers_) w.join();
}

namespace {
// Chunk t of n elements split over k threads, aligned to grain.
void chunk_range(int64_t n, int64_t grain, int k, int t, int64_t & begin, int64_t & end) {
    const int64_t n_grains  = (n + grain - 1) / grain;
    const int64_t per       = n_grains / k;
    const int64_t extra     = n_grains % k;
    const int64_t g_begin   = t * per + std::min<int64_t>(t, extra);
    const int64_t g_end     = g_begin + per + (t < extra ? 1 : 0);
    begin = std::min(n, g_begin * grain);
    end   = std::min(n, g_end * grain);
}
}  // namespace

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)> & fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    if (n_threads_ == 1 || n <= grain) {
        fn(0, n, 0);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_       = &fn;
        job_n_     = n;
        job_grain_ = grain;
        pending_   = n_threads_ - 1;
        ++generation_;
    }
    start_cv_.notify_all();
    int64_t begin = 0, end = 0;
    chunk_range(n, grain, n_threads_, 0, begin, end);
    if (begin < end) fn(begin, end, 0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int64_t, int64_t, int)> * job = nullptr;
        int64_t n = 0, grain = 1;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen  = generation_;
            job   = job_;
            n     = job_n_;
            grain = job_grain_;
        }
        int64_t begin = 0, end = 0;
        chunk_range(n, grain, n_threads_, index, begin, end);
        if (begin < end) (*job)(begin, end, index);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (--pending_ == 0) done_cv_.notify_one();
        }
    }
}

}  // namespace tern
