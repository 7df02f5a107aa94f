#!/usr/bin/env bash
# Builds tern for the browser: the engine's libraries compiled to WebAssembly with Debian's Emscripten
# (3.1.6; why Emscripten: README "In the browser"), and a static site in $BUILD_DIR/site (default
# build-web/site): web/'s page, worker and JavaScript API, tern.js + tern.wasm, and the shipped model
# under models/. Serve it with scripts/serve-web.sh. Needs what scripts/setup.sh installs (emscripten,
# nlohmann-json3-dev, PCRE2's Debian source in .deps/pcre2-src); PCRE2 is built once per build folder.
# Usage: scripts/build-web.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${BUILD_DIR:-build-web}
jobs=${JOBS:-$(nproc)}

command -v emcc >/dev/null || { echo "error: emcc not found; run scripts/setup.sh (installs Debian's emscripten)" >&2; exit 1; }
# Debian's emscripten runs its JavaScript tools with the system's Node; acorn comes from node-acorn.
export NODE_PATH=${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs
pcre2_src=$(ls -d .deps/pcre2-src/pcre2-* 2>/dev/null | head -n 1 || true)
[ -n "$pcre2_src" ] || { echo "error: no PCRE2 source in .deps/pcre2-src; run scripts/setup.sh" >&2; exit 1; }
utf8proc_src=$(ls -d .deps/utf8proc-src/utf8proc-* 2>/dev/null | head -n 1 || true)
[ -f "$utf8proc_src/utf8proc.c" ] || { echo "error: no utf8proc source in .deps/utf8proc-src; run scripts/setup.sh" >&2; exit 1; }
[ -f /usr/include/nlohmann/json.hpp ] || { echo "error: nlohmann/json.hpp missing; run scripts/setup.sh" >&2; exit 1; }
generator=(); command -v ninja >/dev/null && generator=(-G Ninja)

mkdir -p "$out/include"
ln -sfn /usr/include/nlohmann "$out/include/nlohmann"

if [ ! -f "$out/pcre2/lib/libpcre2-8.a" ]; then
    echo "build-web: PCRE2 ($pcre2_src) for wasm32"
    emcmake cmake -S "$pcre2_src" -B "$out/pcre2-build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_INSTALL_PREFIX="$PWD/$out/pcre2" -DBUILD_SHARED_LIBS=OFF -DPCRE2_BUILD_PCRE2_8=ON \
        -DPCRE2_SUPPORT_UNICODE=ON -DPCRE2_SUPPORT_JIT=OFF -DPCRE2_BUILD_PCRE2GREP=OFF -DPCRE2_BUILD_TESTS=OFF \
        >"$out/pcre2-configure.log" 2>&1 || { cat "$out/pcre2-configure.log" >&2; exit 1; }
    cmake --build "$out/pcre2-build" -j "$jobs" --target install >/dev/null
fi

echo "build-web: tern -> $out/bin/tern.js, tern.wasm"
emcmake cmake -S . -B "$out" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTERN_WEB_PCRE2_PREFIX="$PWD/$out/pcre2" -DTERN_WEB_NLOHMANN_INCLUDE="$PWD/$out/include" \
    -DTERN_WEB_UTF8PROC_SRC="$PWD/$utf8proc_src" >"$out/configure.log" 2>&1 \
    || { cat "$out/configure.log" >&2; exit 1; }
cmake --build "$out" -j "$jobs" --target tern_web

site=$out/site
rm -rf "$site"
mkdir -p "$site/models"
cp web/index.html web/style.css web/app.js web/worker.js web/tern-engine.js "$out/bin/tern.js" "$out/bin/tern.wasm" "$site/"
cp share/models/tern-32m-en.gguf "$site/models/"
echo "build-web: site in $site ($(du -sh "$site" | cut -f1)); serve it with scripts/serve-web.sh"
