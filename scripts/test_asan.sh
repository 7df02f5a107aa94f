#!/usr/bin/env bash
# Builds the parser-facing suites (GGUF malformed-file and mutation corpora, layouts, tokenizer,
# safetensors/convert, sampler, backend ops, server request validation, core file handling, model
# loading) and `tern` with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan (Debug), runs
# the suites, and then a short soak of `tern serve` (needs Node; scripts/test.sh calls this).
# A suite is one process (quicker than one per test); the two longest are split into gtest shards,
# and the pieces run as many at once as there are cores, longest first.
# Usage: scripts/test_asan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
if [ ! -f build-asan/CMakeCache.txt ]; then
    generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
    # -O0 with line tables only (-g1): the sanitizers' reports keep file:line; 7% less compile time
    # than -g. (-O1 ran the suites 2.8x faster but compiled 2.6x slower: a loss on CI's 2 cores.)
    cmake -S . -B build-asan "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
          -DCMAKE_C_FLAGS_DEBUG=-g1 -DTERN_SANITIZE=address,undefined >/dev/null
fi
suites=(tern_gguf_tests tern_quant_tests tern_backend_tests tern_tokenizer_tests tern_convert_tests
        tern_sampler_tests tern_server_tests tern_core_tests tern_model_tests)
cmake --build build-asan -j "$jobs" --target "${suites[@]}" tern

# <suite>:<shard>:<shards>, longest first (seconds on a 2-core VM, 2026-11-29: backend 264, model 86,
# tokenizer 57, convert 20, gguf 10, the rest under 5 each).
pieces=(tern_backend_tests:0:2 tern_backend_tests:1:2 tern_model_tests:0:1 tern_tokenizer_tests:0:1
        tern_convert_tests:0:1 tern_gguf_tests:0:1 tern_sampler_tests:0:1 tern_server_tests:0:1
        tern_quant_tests:0:1 tern_core_tests:0:1)
run_piece() {
    local suite shard shards filter=()
    IFS=: read -r suite shard shards <<< "$1"
    # The model suite's WebGPU cases run in the plain build (Dawn is not built with ASan).
    [ "$suite" = tern_model_tests ] && filter=(--gtest_filter=-*WebGpu*)
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard \
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        run_gtest_logged "asan: $suite (shard $((shard + 1)) of $shards)" "build-asan/$suite.$shard.log" \
        "build-asan/bin/$suite" --gtest_brief=1 "${filter[@]+"${filter[@]}"}"
}
source scripts/pool.sh
pool_run "$jobs" run_piece "${pieces[@]}"

if command -v node >/dev/null; then
    echo "asan: tern serve soak (300 requests, 8 clients; LeakSanitizer at exit)"
    TERN_BIN=$PWD/build-asan/bin/tern TERN_OUT_DIR=$PWD/build-asan/server-test-out SOAK_REQUESTS=300 \
        SOAK_CONCURRENCY=8 SOAK_RSS_CHECK=0 ASAN_OPTIONS=detect_leaks=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 node tests/server/js/soak.test.mjs
fi
