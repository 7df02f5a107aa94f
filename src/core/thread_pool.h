// A fixed pool of worker threads for the CPU backend's kernels. The caller is thread 0; workers
// wait for a job by spinning for a short while (a decode step starts a new job every few
// microseconds) and then sleeping on a futex, so an idle pool costs nothing. Work is split into
// contiguous chunks, one per thread, so results never depend on scheduling (every output element
// is computed by exactly one thread with the same arithmetic as a single-threaded run).
// Nothing here allocates per job: jobs are passed as FunctionRef (a pointer and a trampoline).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace tern {

// A non-owning reference to a callable (the callable must outlive the call).
template <class Sig> class FunctionRef;
template <class R, class... Args> class FunctionRef<R(Args...)> {
public:
    template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
    FunctionRef(F && f)  // NOLINT(google-explicit-constructor): used like std::function
        : obj_(const_cast<void *>(static_cast<const void *>(&f))),
          call_([](void * o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F> *>(o))(std::forward<Args>(a)...); }) {}
    R operator()(Args... a) const { return call_(obj_, std::forward<Args>(a)...); }

private:
    void * obj_;
    R (*call_)(void *, Args...);
};

class ThreadPool {
public:
    // n_threads <= 0 picks default_thread_count().
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool &)             = delete;
    ThreadPool & operator=(const ThreadPool &) = delete;

    int n_threads() const { return n_threads_; }

    // Calls fn(thread_index) once on every thread (the caller runs index 0) and returns when all
    // have returned. Inside fn, barrier() synchronizes all of them. Not reentrant.
    void run(FunctionRef<void(int)> fn);
    // Waits until every thread of the running job has reached it (only from inside run()).
    void barrier();

    // Calls fn(begin, end, thread_index) on disjoint sub-ranges covering [0, n). Blocks until done.
    // Ranges are multiples of `grain` except the last. Not reentrant.
    void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t, int)> fn);

    // The sub-range [begin, end) of [0, n) that thread t of k gets in parallel_for (grain-aligned).
    static void chunk_range(int64_t n, int64_t grain, int k, int t, int64_t & begin, int64_t & end);

private:
    void worker_loop(int index);
    void wait_for_workers();

    int                      n_threads_;
    std::vector<std::thread> workers_;
    // A job: generation_ is bumped (release) after job_ is set; workers run it and count done_.
    FunctionRef<void(int)> * job_ = nullptr;
    alignas(64) std::atomic<uint32_t> generation_{0};
    alignas(64) std::atomic<int>      done_{0};
    alignas(64) std::atomic<int>      sleepers_{0};  // workers blocked in generation_.wait()
    alignas(64) std::atomic<int>      barrier_count_{0};
    alignas(64) std::atomic<uint32_t> barrier_phase_{0};
    std::atomic<bool>                 stop_{false};
};

// Physical cores this process may run on (hyper-threads of one core count once); the
// hardware concurrency where the topology cannot be read. The default of `-t`.
int default_thread_count();

}  // namespace tern
