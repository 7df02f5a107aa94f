// StealRanges: every unit is taken exactly once, each thread's own units front to back, and a
// thread that finishes takes the others' from their backs.
#include "core/steal_ranges.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace tern {
namespace {

TEST(StealRanges, OneThreadTakesItsUnitsInOrder) {
    StealRanges s;
    s.reset(1, 5);
    std::vector<int64_t> got;
    for (int64_t u = 0; s.next(0, u);) got.push_back(u);
    EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2, 3, 4}));
    s.reset(1, 0);
    int64_t u = -1;
    EXPECT_FALSE(s.next(0, u));
}

TEST(StealRanges, AThreadThatFinishesTakesTheOthersBacks) {
    // 3 threads over 10 units: ranges [0, 4), [4, 7), [7, 10). Thread 2 takes its own 3 units,
    // then thread 0's back (3, 2, 1, 0) once thread 0 has started: the owner keeps its front.
    StealRanges s;
    s.reset(3, 10);
    int64_t u = -1;
    ASSERT_TRUE(s.next(0, u));
    EXPECT_EQ(u, 0);
    std::vector<int64_t> t2;
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(s.next(2, u));
        t2.push_back(u);
    }
    EXPECT_EQ(t2, (std::vector<int64_t>{7, 8, 9, 3, 2}));
    ASSERT_TRUE(s.next(0, u));
    EXPECT_EQ(u, 1);
    EXPECT_TRUE(s.next(0, u));  // thread 0's range is used up: thread 1's back
    EXPECT_EQ(u, 6);
    std::vector<int64_t> t1;
    while (s.next(1, u)) t1.push_back(u);
    EXPECT_EQ(t1, (std::vector<int64_t>{4, 5}));
    EXPECT_FALSE(s.next(0, u));
    EXPECT_FALSE(s.next(2, u));
}

TEST(StealRanges, ThreadsTakeEveryUnitOnce) {
    // Awkward counts (fewer units than threads, one more than a multiple), real threads racing.
    for (const int64_t n_units : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{997}, int64_t{20001}}) {
        for (const int n_threads : {2, 3, 4}) {
            ThreadPool                     pool(n_threads);
            StealRanges                    s;
            std::vector<std::atomic<int>> seen(static_cast<size_t>(n_units));
            s.reset(n_threads, n_units);
            pool.run([&](int t) {
                for (int64_t u = 0; s.next(t, u);) seen[static_cast<size_t>(u)].fetch_add(1);
            });
            for (int64_t u = 0; u < n_units; ++u) {
                ASSERT_EQ(seen[static_cast<size_t>(u)].load(), 1)
                    << "unit " << u << " of " << n_units << ", " << n_threads << " threads";
            }
        }
    }
}

}  // namespace
}  // namespace tern
