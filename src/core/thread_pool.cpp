// ThreadPool: workers spin on a generation counter for a short while after each job, then sleep
// on it (a futex through std::atomic::wait); the caller wakes sleepers only when there are any.
#include "core/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__linux__)
#include <sched.h>
#endif

namespace tern {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Spin iterations before a worker sleeps: ~50-100 us on current x86 cores (a pause is 10-140
// cycles), long enough to bridge the gaps between the ops of a decode step and short enough that
// an idle pool stops competing for the cores almost at once.
constexpr int k_spin_before_sleep = 4096;
// Spins between yields while waiting for other threads (a barrier, the end of a job): on a busy
// machine the thread we wait for may be descheduled.
constexpr int k_spin_before_yield = 256;

}  // namespace

int default_thread_count() {
    const unsigned hc       = std::thread::hardware_concurrency();
    const int      fallback = hc == 0 ? 1 : static_cast<int>(hc);
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return fallback;
    std::set<std::pair<std::string, std::string>> cores;  // (package, core) of each allowed CPU
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &set)) continue;
        const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
        std::ifstream     core(dir + "core_id"), pkg(dir + "physical_package_id");
        std::string       c, p;
        if (!(core >> c) || !(pkg >> p)) return std::max(1, std::min(fallback, CPU_COUNT(&set)));
        cores.insert({p, c});
    }
    return cores.empty() ? fallback : static_cast<int>(cores.size());
#else
    return fallback;
#endif
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_thread_count()) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    generation_.fetch_add(1);
    generation_.notify_all();
    for (auto & w : workers_) w.join();
}

void ThreadPool::chunk_range(int64_t n, int64_t grain, int k, int t, int64_t & begin, int64_t & end) {
    const int64_t n_grains = (n + grain - 1) / grain;
    const int64_t per      = n_grains / k;
    const int64_t extra    = n_grains % k;
    const int64_t g_begin  = t * per + std::min<int64_t>(t, extra);
    const int64_t g_end    = g_begin + per + (t < extra ? 1 : 0);
    begin                  = std::min(n, g_begin * grain);
    end                    = std::min(n, g_end * grain);
}

void ThreadPool::run(FunctionRef<void(int)> fn) {
    if (n_threads_ == 1) {
        fn(0);
        return;
    }
    job_ = &fn;
    done_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1);                  // seq_cst: pairs with the sleepers' check
    if (sleepers_.load() > 0) generation_.notify_all();
    fn(0);
    wait_for_workers();
    job_ = nullptr;
}

void ThreadPool::wait_for_workers() {
    for (int spins = 0; done_.load(std::memory_order_acquire) != n_threads_ - 1; ++spins) {
        if (spins < k_spin_before_yield) {
            cpu_relax();
        } else {
            std::this_thread::yield();
            spins = 0;
        }
    }
}

void ThreadPool::barrier() {
    if (n_threads_ == 1) return;
    const uint32_t phase = barrier_phase_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_phase_.fetch_add(1, std::memory_order_release);
        return;
    }
    for (int spins = 0; barrier_phase_.load(std::memory_order_acquire) == phase; ++spins) {
        if (spins < k_spin_before_yield) {
            cpu_relax();
        } else {
            std::this_thread::yield();
            spins = 0;
        }
    }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t, int)> fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    if (n_threads_ == 1 || n <= grain) {
        fn(0, n, 0);
        return;
    }
    run([&](int t) {
        int64_t begin = 0, end = 0;
        chunk_range(n, grain, n_threads_, t, begin, end);
        if (begin < end) fn(begin, end, t);
    });
}

void ThreadPool::worker_loop(int index) {
    uint32_t seen = 0;
    for (;;) {
        uint32_t g     = 0;
        int      spins = 0;
        while ((g = generation_.load(std::memory_order_acquire)) == seen) {
            if (++spins < k_spin_before_sleep) {
                cpu_relax();
                continue;
            }
            sleepers_.fetch_add(1);  // seq_cst: the caller either sees us here or we see its bump
            if (generation_.load() == seen) generation_.wait(seen);
            sleepers_.fetch_sub(1);
            spins = 0;
        }
        seen = g;
        if (stop_.load()) return;
        (*job_)(index);
        done_.fetch_add(1, std::memory_order_release);
    }
}

}  // namespace tern
