// Counts the calls of the global operator new (and the bytes asked for) on the calling thread, for
// tests that bound allocations instead of timing. alloc_counter.cpp replaces operator new/delete
// for the whole test binary with malloc/free plus a thread-local tally.
#pragma once

#include <cstddef>

namespace tern::test {

struct AllocTally {
    size_t calls = 0;
    size_t bytes = 0;
};

// The calling thread's tally since it started.
AllocTally alloc_tally();

// The allocations `fn` makes on this thread.
template <typename Fn> AllocTally count_allocations(Fn && fn) {
    const AllocTally before = alloc_tally();
    fn();
    const AllocTally after = alloc_tally();
    return {after.calls - before.calls, after.bytes - before.bytes};
}

}  // namespace tern::test
