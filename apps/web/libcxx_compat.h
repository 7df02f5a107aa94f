// Force-included into every file of the browser build (cmake/tern_web.cmake), never the native one.
// Debian 12's Emscripten (3.1.6) ships libc++ 13, which lacks C++20's std::bit_cast; clang's
// builtin does the same thing, so the engine's sources stay as they are.
#pragma once

#include <bit>
#include <type_traits>

#if defined(_LIBCPP_VERSION) && _LIBCPP_VERSION < 14000
namespace std {
template <class To, class From>
    requires(sizeof(To) == sizeof(From) && is_trivially_copyable_v<To> && is_trivially_copyable_v<From>)
constexpr To bit_cast(const From & from) noexcept {
    return __builtin_bit_cast(To, from);
}
}  // namespace std
#endif
