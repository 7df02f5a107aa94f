// Replacement global operator new/delete (malloc/free with a thread-local tally): see alloc_counter.h.
// Every plain and nothrow form is replaced, so that sanitizer builds (whose runtime defines them
// all) see malloc paired with free. The aligned forms are left alone: the runtime's or library's
// aligned new is always paired with its own aligned delete.
#include "alloc_counter.h"

#include <cstdlib>
#include <new>

namespace {
thread_local tern::test::AllocTally t_tally;

void * counted_malloc(std::size_t n) {
    ++t_tally.calls;
    t_tally.bytes += n;
    if (void * p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
}  // namespace

tern::test::AllocTally tern::test::alloc_tally() { return t_tally; }

void * operator new(std::size_t n) { return counted_malloc(n); }
void * operator new[](std::size_t n) { return counted_malloc(n); }
void * operator new(std::size_t n, const std::nothrow_t &) noexcept {
    try {
        return counted_malloc(n);
    } catch (...) {
        return nullptr;
    }
}
void * operator new[](std::size_t n, const std::nothrow_t & t) noexcept { return operator new(n, t); }
void   operator delete(void * p, const std::nothrow_t &) noexcept { std::free(p); }
void   operator delete[](void * p, const std::nothrow_t &) noexcept { std::free(p); }
void   operator delete(void * p) noexcept { std::free(p); }
void   operator delete[](void * p) noexcept { std::free(p); }
void   operator delete(void * p, std::size_t) noexcept { std::free(p); }
void   operator delete[](void * p, std::size_t) noexcept { std::free(p); }
