// Force-included into every file of the browser build (cmake/tern_web.cmake), never the native one.
// Debian 12's Emscripten (3.1.6) ships libc++ 13, which lacks some of C++20's library: std::bit_cast
// (clang's builtin does the same thing) and operator<=> for std::string_view and std::array (which
// defaulted comparisons such as PipelineKey's need). The engine's sources stay as they are.
#pragma once

#include <array>
#include <bit>
#include <compare>
#include <cstddef>
#include <string_view>
#include <type_traits>

#if defined(_LIBCPP_VERSION) && _LIBCPP_VERSION < 14000
namespace std {
template <class To, class From>
    requires(sizeof(To) == sizeof(From) && is_trivially_copyable_v<To> && is_trivially_copyable_v<From>)
constexpr To bit_cast(const From & from) noexcept {
    return __builtin_bit_cast(To, from);
}

template <class C, class T>
constexpr strong_ordering operator<=>(basic_string_view<C, T> a, basic_string_view<C, T> b) noexcept {
    return a.compare(b) <=> 0;
}

template <class T, size_t N>
constexpr auto operator<=>(const array<T, N> & a, const array<T, N> & b) -> decltype(a[0] <=> b[0]) {
    for (size_t i = 0; i < N; ++i) {
        if (auto c = a[i] <=> b[i]; c != 0) return c;
    }
    return decltype(a[0] <=> b[0])::equivalent;
}
}  // namespace std
#endif
