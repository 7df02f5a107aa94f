// Shared by the libFuzzer targets: the rule every target checks (untrusted input may only fail
// with a tern::Error that has a message; anything else escaping, or a sanitizer report, is a finding).
#pragma once

#include "core/error.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace tern::fuzz {

[[noreturn]] inline void finding(const char * what) {
    std::fprintf(stderr, "fuzz: %s\n", what);
    std::abort();
}

// Runs fn; a tern::Error of an allowed kind with a message is a normal rejection.
template <typename Fn>
void expect_clean(Fn && fn, bool allow_unsupported = true) {
    try {
        fn();
    } catch (const Error & e) {
        if (std::string_view(e.what()).empty()) finding("an error without a message");
        if (e.kind() == ErrorKind::internal) finding("an internal error");
        if (e.kind() == ErrorKind::unsupported && !allow_unsupported) finding("unexpected unsupported");
    }
}

}  // namespace tern::fuzz
