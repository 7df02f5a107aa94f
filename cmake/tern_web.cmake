# The browser build (Emscripten; scripts/build-web.sh configures it): the engine's libraries from the
# same sources and apps/web, nothing else (no CLI, server, convert or tests). Dependencies that the
# native build finds with pkg-config come from the script: PCRE2 built for wasm32 from Debian's source
# (TERN_WEB_PCRE2_PREFIX) and nlohmann-json's headers (TERN_WEB_NLOHMANN_INCLUDE, a folder holding
# only nlohmann/, so the host's /usr/include stays out of the wasm sysroot).
set(TERN_WEB_PCRE2_PREFIX "" CACHE PATH "PCRE2 (libpcre2-8) built for wasm32")
set(TERN_WEB_NLOHMANN_INCLUDE "" CACHE PATH "a folder with nlohmann/json.hpp")
if(NOT EXISTS "${TERN_WEB_PCRE2_PREFIX}/lib/libpcre2-8.a" OR NOT EXISTS "${TERN_WEB_NLOHMANN_INCLUDE}/nlohmann/json.hpp")
    message(FATAL_ERROR "the browser build needs TERN_WEB_PCRE2_PREFIX and TERN_WEB_NLOHMANN_INCLUDE: use scripts/build-web.sh")
endif()

# -fwasm-exceptions: tern::Error is thrown across the engine and caught at the JavaScript boundary,
# as WebAssembly exceptions (JavaScript-based ones would put JS frames between a wait and the engine's
# entry point, which JSPI cannot suspend across).
# -msimd128: the CPU kernels are compiled for WASM SIMD128 (every current browser has it).
# apps/web/libcxx_compat.h: what Emscripten 3.1.6's libc++ 13 lacks (std::bit_cast).
add_compile_options(-fwasm-exceptions -msimd128 "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include ${PROJECT_SOURCE_DIR}/apps/web/libcxx_compat.h>")
add_link_options(-fwasm-exceptions)

# Single-threaded (no -pthread, so no SharedArrayBuffer and no cross-origin isolation is needed).
add_library(Threads::Threads INTERFACE IMPORTED)
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${TERN_WEB_NLOHMANN_INCLUDE}")
add_library(PkgConfig::PCRE2 STATIC IMPORTED)
set_target_properties(PkgConfig::PCRE2 PROPERTIES
    IMPORTED_LOCATION "${TERN_WEB_PCRE2_PREFIX}/lib/libpcre2-8.a"
    INTERFACE_INCLUDE_DIRECTORIES "${TERN_WEB_PCRE2_PREFIX}/include"
    INTERFACE_COMPILE_DEFINITIONS "PCRE2_STATIC")

# utf8proc (NFC for Qwen tokenizers) from Debian's source: one C file that includes its data table.
set(TERN_WEB_UTF8PROC_SRC "" CACHE PATH "utf8proc's source folder (utf8proc.c, utf8proc.h)")
if(NOT EXISTS "${TERN_WEB_UTF8PROC_SRC}/utf8proc.c")
    message(FATAL_ERROR "the browser build needs TERN_WEB_UTF8PROC_SRC: use scripts/build-web.sh")
endif()
enable_language(C)
add_library(tern_web_utf8proc STATIC "${TERN_WEB_UTF8PROC_SRC}/utf8proc.c")
target_include_directories(tern_web_utf8proc PUBLIC "${TERN_WEB_UTF8PROC_SRC}")
target_compile_definitions(tern_web_utf8proc PUBLIC UTF8PROC_STATIC)
add_library(PkgConfig::UTF8PROC ALIAS tern_web_utf8proc)

add_subdirectory(src)
add_subdirectory(apps/web)
