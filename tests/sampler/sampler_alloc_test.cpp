// Checks that Sampler::sample() and accept() do not touch the heap after construction, by counting
// calls to a replacement global operator new (this binary only).
#include "sampler/sampler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

// GCC pairs the inlined replacement new/delete with malloc/free and warns; they do match.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<long> g_news{0};
}

void * operator new(std::size_t n) {
    g_news.fetch_add(1, std::memory_order_relaxed);
    if (void * p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void * p) noexcept { std::free(p); }
void operator delete(void * p, std::size_t) noexcept { std::free(p); }

namespace tern {
namespace {

TEST(SamplerAlloc, SampleAndAcceptDoNotAllocate) {
    const int32_t      n_vocab = 5000;
    std::vector<float> logits(n_vocab);
    Rng                r(3);
    for (float & l : logits) l = static_cast<float>(r.next_double() * 10.0);
    for (int config = 0; config < 4; ++config) {
        SamplerParams p;
        p.seed              = 5;
        p.repeat_penalty    = 1.1f;
        p.frequency_penalty = 0.1f;
        p.top_k             = config == 1 ? 0 : 40;
        p.top_p             = config == 2 ? 1.0f : 0.9f;
        p.repeat_last_n     = config == 3 ? -1 : 16;
        Sampler    s(p, n_vocab);
        const long before = g_news.load();
        for (int i = 0; i < 100; ++i) s.accept(s.sample(logits));
        s.reset();
        EXPECT_EQ(g_news.load() - before, 0) << "config " << config;
    }
}

}  // namespace
}  // namespace tern
