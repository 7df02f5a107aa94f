#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the whole ctest suite on a RelWithDebInfo
# build, then the parser-facing suites (GGUF malformed-file and mutation corpora, layouts, tokenizer,
# safetensors/convert, sampler, backend ops, server request validation, core file handling, model
# loading) again under AddressSanitizer + UndefinedBehaviorSanitizer and a short soak of `tern serve`
# built with them (scripts/test_asan.sh), every libFuzzer target for a bounded time (scripts/fuzz.sh:
# $TERN_FUZZ_SECONDS each, default 25), and on x86-64 the CPU kernel and model tests cross-compiled
# for ARM64 under qemu-user (scripts/test_arm64.sh). This is the command .ci/run calls.
# Usage: scripts/test.sh [--no-asan] [--no-fuzz] [--no-arm64] [extra ctest arguments, e.g. -L unit]
set -euo pipefail
cd "$(dirname "$0")/.."
asan=1
fuzz=1
arm64=1
[ "$(uname -m)" = x86_64 ] || arm64=0
ctest_args=()
for arg in "$@"; do
    case "$arg" in
        --no-asan) asan=0 ;;
        --no-fuzz) fuzz=0 ;;
        --no-arm64) arm64=0 ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) ctest_args+=("$arg") ;;
    esac
done
jobs=$(nproc)
# Wall time of each phase, printed at the end: CI must stay well under 40 minutes on 2 cores.
phases=()
phase_start=$SECONDS
phase_done() { phases+=("$1 $((SECONDS - phase_start)) s"); phase_start=$SECONDS; }

scripts/setup.sh
BUILD_DIR=build scripts/build.sh -DTERN_BUILD_BENCH=ON  # the micro-benchmarks are built (not run) so they keep compiling
phase_done "setup and build:"
# The browser build (WebAssembly, a couple of minutes): its tests under ctest (label web) skip without it.
if command -v emcc >/dev/null; then BUILD_DIR=build-web scripts/build-web.sh; else echo "test: no emcc; the browser-build tests will skip"; fi
phase_done "browser build:"

# GPU tests (label gpu) run on whatever Vulkan device there is; on a machine without one, on the
# SwiftShader CPU driver that setup.sh unpacked. Without either they report themselves as skipped.
swiftshader_icd=$PWD/.deps/swiftshader/usr/lib/chromium/vk_swiftshader_icd.json
if [ -z "${VK_ICD_FILENAMES:-}${VK_DRIVER_FILES:-}" ] && [ -f "$swiftshader_icd" ] && ! ls /dev/nvidia0 /dev/dri/renderD* >/dev/null 2>&1; then
    export VK_ICD_FILENAMES=$swiftshader_icd
    export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}  # quiets SwiftShader's window-system probe
    echo "test: WebGPU tests run on SwiftShader (VK_ICD_FILENAMES=$VK_ICD_FILENAMES)"
elif [ ! -f "$swiftshader_icd" ]; then
    echo "test: no SwiftShader in .deps; WebGPU tests run only if a GPU is present (else skipped)"
fi
ctest --test-dir build --output-on-failure -j "$jobs" "${ctest_args[@]+"${ctest_args[@]}"}"
phase_done "ctest:"

if [ "$asan" = 1 ]; then
    echo "test: parser-facing suites under AddressSanitizer + UBSan"
    scripts/test_asan.sh
    phase_done "sanitizer build and suites:"
fi

if [ "$fuzz" = 1 ]; then
    echo "test: fuzz targets, ${TERN_FUZZ_SECONDS:-25} s each"
    scripts/fuzz.sh "${TERN_FUZZ_SECONDS:-25}"
    phase_done "fuzz build and runs:"
fi
if [ "$arm64" = 1 ]; then
    echo "test: the CPU kernels on ARM64 (cross-compiled, under qemu-user)"
    scripts/test_arm64.sh
    phase_done "arm64 build and tests:"
fi
echo "test: all passed in $SECONDS s (${phases[*]/%/;})"
