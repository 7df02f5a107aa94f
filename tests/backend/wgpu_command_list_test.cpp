// PassCommandList (the browser build's compute-pass command list): random sequences of compute-pass commands, with
// passes interleaved, objects released mid-pass and their ids handed to new objects (as the glue
// does), give every dispatch the same pipeline, bind groups, offsets and size when issued directly
// and when replayed from the words; repeated state is left out of the words, and a pass goes to
// JavaScript in one call.
#include "backend/webgpu/wgpu_command_list.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace tern {
namespace {

// What a dispatch runs with: objects by serial (ids are reused, serials are not).
struct Snapshot {
    uint64_t pipeline = 0;
    std::array<uint64_t, 6> groups{};
    std::array<std::vector<uint32_t>, 6> offsets;
    uint32_t x = 0, y = 0, z = 0;
    bool operator==(const Snapshot &) const = default;
};

// The glue's id table: freed ids go to the next object; each object gets a new serial.
struct Ids {
    std::vector<uint32_t> free;
    uint32_t next = 1;
    uint32_t make() {
        if (!free.empty()) {
            const uint32_t id = free.back();
            free.pop_back();
            return id;
        }
        return next++;
    }
};

TEST(WgpuCommandList, ReplayedPassesDispatchWhatDirectCallsDispatch) {
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        std::mt19937 rng(seed);
        const auto pick = [&rng](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
        Ids ids;                                   // one table for every kind, as the glue has
        std::map<uint32_t, uint64_t> live;         // id -> serial of the object it names now
        uint64_t next_serial = 1;
        const auto create = [&] { const uint32_t id = ids.make(); live[id] = next_serial++; return id; };
        const auto release = [&](uint32_t id) { live.erase(id); ids.free.push_back(id); };

        // Direct: each pass's state and dispatches as the calls arrive.
        std::map<uint64_t, Snapshot> direct_state, replay_state;
        std::map<uint64_t, std::vector<Snapshot>> direct, replayed;
        size_t replays = 0, words_total = 0;
        PassCommandList list([&](uint32_t pass, const uint32_t * w, size_t count) {
            ++replays;
            words_total += count;
            ASSERT_TRUE(live.count(pass)) << "words for a released pass";
            Snapshot & s = replay_state[live[pass]];
            for (size_t i = 0; i < count;) {
                const uint32_t op = w[i] & 0xFF;
                if (op == PassCommandList::op_set_pipeline) {
                    ASSERT_TRUE(live.count(w[i + 1])) << "a released pipeline in the words";
                    s.pipeline = live[w[i + 1]];
                    i += 2;
                } else if (op == PassCommandList::op_set_bind_group) {
                    const uint32_t index = (w[i] >> 8) & 0xFF, n = w[i] >> 16;
                    ASSERT_TRUE(live.count(w[i + 1])) << "a released bind group in the words";
                    s.groups[index]  = live[w[i + 1]];
                    s.offsets[index] = std::vector<uint32_t>(w + i + 2, w + i + 2 + n);
                    i += 2 + n;
                } else if (op == PassCommandList::op_dispatch_x || op == PassCommandList::op_dispatch_xy) {
                    const bool xy = op == PassCommandList::op_dispatch_xy;
                    s.x = w[i + 1], s.y = xy ? w[i + 2] : 1, s.z = 1;
                    ASSERT_TRUE(xy ? s.y != 1 : true) << "(x, 1, 1) as op 5";
                    replayed[live[pass]].push_back(s);
                    i += xy ? 3 : 2;
                } else {
                    ASSERT_EQ(op, PassCommandList::op_dispatch);
                    s.x = w[i + 1], s.y = w[i + 2], s.z = w[i + 3];
                    ASSERT_NE(s.z, 1u) << "a dispatch with z = 1 as op 3";
                    replayed[live[pass]].push_back(s);
                    i += 4;
                }
            }
        });

        std::vector<uint32_t> pipelines, groups, open;  // live objects, open passes (ids)
        for (int i = 0; i < 4; ++i) pipelines.push_back(create()), groups.push_back(create());
        size_t dispatches = 0;
        for (int step = 0; step < 3000; ++step) {
            const uint32_t what = pick(100);
            if (open.empty() || what < 4) {  // begin a pass (as wgpu_loader_web.cpp's rec_begin)
                list.flush();
                const uint32_t pass = create();
                list.closing(pass);
                open.push_back(pass);
                continue;
            }
            const uint32_t pass = open[pick(open.size())];  // passes interleave
            Snapshot & d = direct_state[live[pass]];
            if (what < 8) {  // end and release the pass
                list.closing(pass);
                list.closing(pass);
                release(pass);
                open.erase(std::find(open.begin(), open.end(), pass));
            } else if (what < 25) {
                const uint32_t p = pipelines[pick(pipelines.size() > 1 && what < 20 ? 2 : pipelines.size())];
                list.set_pipeline(pass, p);
                d.pipeline = live[p];
            } else if (what < 55) {
                const uint32_t index = pick(10) == 0 ? 5 : pick(3);
                const uint32_t g = groups[pick(groups.size() > 1 && what < 45 ? 2 : groups.size())];
                std::vector<uint32_t> offsets(pick(8) == 0 ? 5 : pick(3));
                for (uint32_t & o : offsets) o = 256 * pick(2);
                list.set_bind_group(pass, index, g, offsets.size(), offsets.data());
                d.groups[index]  = live[g];
                d.offsets[index] = offsets;
            } else if (what < 85) {
                d.x = 1 + pick(4), d.y = 1 + (pick(3) == 0 ? pick(3) : 0), d.z = 1 + pick(2);
                list.dispatch(pass, d.x, d.y, d.z);
                direct[live[pass]].push_back(d);
                ++dispatches;
            } else if (what < 92) {  // release a pipeline or a bind group mid-pass, then make another
                std::vector<uint32_t> & pool = what < 88 ? pipelines : groups;
                const size_t at = pick(pool.size());
                if (what < 88) list.releasing_pipeline(pool[at]); else list.releasing_bind_group(pool[at]);
                release(pool[at]);
                pool[at] = create();
            } else {
                std::vector<uint32_t> & pool = what < 96 ? pipelines : groups;
                if (pool.size() < 8) pool.push_back(create());
            }
        }
        for (uint32_t pass : open) list.closing(pass);
        EXPECT_EQ(list.pending_words(), 0u);
        ASSERT_EQ(replayed.size(), direct.size()) << "seed " << seed;
        for (const auto & [serial, want] : direct) {
            ASSERT_TRUE(replayed.count(serial)) << "seed " << seed;
            ASSERT_EQ(replayed[serial].size(), want.size()) << "seed " << seed;
            for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(replayed[serial][i] == want[i]) << "seed " << seed << " dispatch " << i;
        }
        EXPECT_GT(replays, 0u);
        EXPECT_GT(words_total, dispatches * 2);
    }
}

TEST(WgpuCommandList, RepeatedStateIsLeftOutAndChangedStateIsNot) {
    std::vector<uint32_t> words;
    size_t replays = 0;
    PassCommandList list([&](uint32_t pass, const uint32_t * w, size_t n) {
        EXPECT_EQ(pass, 7u);
        words.insert(words.end(), w, w + n);
        ++replays;
    });
    const uint32_t off0[] = {0}, off256[] = {256};
    list.set_pipeline(7, 3);
    list.set_bind_group(7, 0, 5, 1, off0);
    list.dispatch(7, 2, 1, 1);
    list.set_pipeline(7, 3);               // the same pipeline: left out
    list.set_bind_group(7, 0, 5, 1, off0);  // the same group and offset: left out
    list.dispatch(7, 4, 1, 1);
    list.set_bind_group(7, 0, 5, 1, off256);  // another offset: kept
    list.dispatch(7, 1, 1, 1);
    list.releasing_bind_group(5);           // flushes; group 5 may name another group next
    list.set_bind_group(7, 0, 5, 1, off256);  // kept
    list.closing(7);
    const std::vector<uint32_t> want = {1, 3, 2 | 1 << 16, 5, 0, 4, 2, 4, 4, 2 | 1 << 16, 5, 256, 4, 1, 2 | 1 << 16, 5, 256};
    EXPECT_EQ(words, want);
    EXPECT_EQ(replays, 2u) << "one call per pass, and one before the release";
}

TEST(WgpuCommandList, TrimmedDispatchesLeaveTrailingOnesOff) {
    std::vector<uint32_t> words;
    PassCommandList       list([&](uint32_t, const uint32_t * w, size_t n) { words.insert(words.end(), w, w + n); });
    list.dispatch(7, 5, 1, 1);
    list.dispatch(7, 5, 3, 1);
    list.dispatch(7, 5, 1, 2);  // z != 1: all three sizes
    list.dispatch(7, 1, 1, 1);
    list.closing(7);
    const std::vector<uint32_t> want = {4, 5, 5, 5, 3, 3, 5, 1, 2, 4, 1};
    EXPECT_EQ(words, want);
}

}  // namespace
}  // namespace tern
