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

TEST(StealRanges, OwnTakesShrinkToSingleUnits) {
    // 2 threads over 20 units, up to 4 at a time from the own front (at most half of what is left
    // there, rounded up).
    StealRanges s;
    s.reset(2, 20);
    std::vector<std::pair<int64_t, int64_t>> got;
    int64_t                                  u = -1, c = -1;
    while (s.next(0, u, c, 4)) got.push_back({u, c});
    // Own [0, 10): [0, 4) (10 left: 4), [4, 7) (6 left: 3), [7, 9) (3 left: 2), [9, 10); then thread
    // 1's range from its back, one at a time.
    const std::vector<std::pair<int64_t, int64_t>> want = {{0, 4}, {4, 3}, {7, 2}, {9, 1}, {19, 1}, {18, 1}, {17, 1},
                                                           {16, 1}, {15, 1}, {14, 1}, {13, 1}, {12, 1}, {11, 1}, {10, 1}};
    EXPECT_EQ(got, want);
    EXPECT_FALSE(s.next(1, u, c, 4));
}

TEST(StealRanges, OwnerIsTheThreadWhoseRangeHoldsTheUnit) {
    // Awkward counts: fewer units than threads, one more than a multiple; each unit's owner and
    // range are the ones reset() gives (ThreadPool::chunk_range), checked against a thread's own walk.
    for (const int64_t n_units : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{97}}) {
        for (const int n_threads : {1, 2, 3, 5}) {
            StealRanges s;
            s.reset(n_threads, n_units);
            std::vector<int> walked(static_cast<size_t>(n_units), -1);
            for (int t = 0; t < n_threads; ++t) {
                int64_t b = 0, e = 0;
                ThreadPool::chunk_range(n_units, 1, n_threads, t, b, e);
                for (int64_t u = b; u < e; ++u) {
                    int64_t u_taken = -1;
                    ASSERT_TRUE(s.next(t, u_taken));  // its own front, in order
                    ASSERT_EQ(u_taken, u);
                    walked[static_cast<size_t>(u)] = t;
                }
            }
            for (int64_t u = 0; u < n_units; ++u) {
                int64_t   b = -1, e = -1;
                const int o = StealRanges::owner(n_threads, n_units, u, b, e);
                EXPECT_EQ(o, walked[static_cast<size_t>(u)]) << "unit " << u << " of " << n_units << ", " << n_threads;
                EXPECT_TRUE(b <= u && u < e) << "unit " << u << " in [" << b << ", " << e << ")";
                int64_t cb = 0, ce = 0;
                ThreadPool::chunk_range(n_units, 1, n_threads, o, cb, ce);
                EXPECT_EQ(b, cb);
                EXPECT_EQ(e, ce);
            }
        }
    }
}

TEST(StealRanges, ThreadsTakeEveryUnitOnce) {
    // Awkward counts (fewer units than threads, one more than a multiple), real threads racing.
    for (const int64_t n_units : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{997}, int64_t{20001}}) {
        for (const int n_threads : {2, 3, 4}) {
            ThreadPool                     pool(n_threads);
            StealRanges                    s;
            std::vector<std::atomic<int>> seen(static_cast<size_t>(n_units));
            for (const int64_t max_own : {int64_t{1}, int64_t{3}, int64_t{64}}) {
                for (auto & v : seen) v.store(0);
                s.reset(n_threads, n_units);
                pool.run([&](int t) {
                    for (int64_t u = 0, c = 0; s.next(t, u, c, max_own);) {
                        ASSERT_TRUE(c >= 1 && c <= max_own);
                        for (int64_t i = u; i < u + c; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
                    }
                });
                for (int64_t u = 0; u < n_units; ++u) {
                    ASSERT_EQ(seen[static_cast<size_t>(u)].load(), 1)
                        << "unit " << u << " of " << n_units << ", " << n_threads << " threads, up to " << max_own;
                }
            }
        }
    }
}

}  // namespace
}  // namespace tern
