#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: GGUF, safetensors, config.json, tokenizer.json,
# tokenizer, load-and-run) with clang + AddressSanitizer + UBSan in build-fuzz, writes their seed
# corpora, and runs each for a bounded time, as many at once as there are cores (one core each). A
# crash, a sanitizer report or a broken invariant fails the run; the input that did it is left in
# build-fuzz/ (crash-*, leak-*, timeout-*).
# Usage: scripts/fuzz.sh [seconds per target, default 25] [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-25}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf_fuzz safetensors_fuzz hf_config_fuzz tokenizer_json_fuzz tokenizer_fuzz model_fuzz)
command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing (scripts/setup.sh installs it)" >&2; exit 1; }
jobs=$(nproc)

if [ ! -f build-fuzz/CMakeCache.txt ]; then
    generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
    launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    CC=clang CXX=clang++ cmake -S . -B build-fuzz "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DTERN_FUZZ=ON -DTERN_SANITIZE=address,undefined -DTERN_WEBGPU=OFF >/dev/null
fi
cmake --build build-fuzz -j "$jobs" --target fuzz_seeds "${targets[@]}"
rm -rf build-fuzz/seeds && build-fuzz/bin/fuzz_seeds build-fuzz/seeds

# Inputs the fuzzers find are kept in build-fuzz/corpus/<target> between runs; seeds are re-made.
# One fuzzer is one process on one core: $jobs of them run at once, each for the same seconds.
fuzz_one() {
    local t=$1 name=${1%_fuzz} extra=()
    mkdir -p "build-fuzz/corpus/$t"
    [ "$t" = gguf_fuzz ] && extra=(-max_len=4096 -dict=../tests/gguf/gguf_fuzz.dict)
    echo "fuzz: $t for ${seconds} s"
    if ! (cd build-fuzz && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            "bin/$t" "corpus/$t" "seeds/$name" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
            -print_final_stats=1 "${extra[@]}" > "fuzz-$t.log" 2>&1); then
        echo "fuzz: $t FAILED; the log is build-fuzz/fuzz-$t.log:" >&2
        tail -n 40 "build-fuzz/fuzz-$t.log" >&2
        return 1
    fi
    echo "fuzz: $t: $(grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build-fuzz/fuzz-$t.log" | tr -s ' \n' ' ')"
}
source scripts/pool.sh
pool_run "$jobs" fuzz_one "${targets[@]}"
