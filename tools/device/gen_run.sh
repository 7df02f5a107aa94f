#!/usr/bin/env bash
# Issue 52 on the lent GPU, about 1 minute (one round): what `tern run` gives a user against what `tern bench`
# says, on a synthetic BitNet b1.58 2B4T (tern synth bitnet-2b4t --seed 1, prompt "Once upon a time"):
#   1. one `tern -vv run -n 512` each greedy (--temp 0), with the default sampler and with --top-k 0
#      --top-p 0.9: the load breakdown, the time of each batch of 32 decode steps (gen_timeline.py: a
#      batch far slower than the rest is a pipeline compiled mid-generation, which the warm-up is
#      there to prevent), the host's record and wait ms per step, steps drawn on the host;
#   2. tools/run_bench.py, alternating rounds: tern run -n 512 greedy (--temp 0), the default
#      sampler (--seed 1) and --top-k 0 --top-p 0.9 (--seed 1)
#      against tern bench tg512 (the positions tern run -n 512 decodes);
#   3. tg64 at depth 0 and 4096, and at 4096 with P·V by attention_split_pv (attn_split_tiles=0)
#      against the default (attention_split_pvt + combine), alternating;
#   4. the warm-up on a cold driver cache and tern cache (a fresh __GL_SHADER_DISK_CACHE_PATH and
#      TERN_CACHE_DIR: a machine's first run) and then warm (the second): one tern -v run -n 16 each, its
#      "warm-up" figure;
#   5. (unless GEN_RUN_PROFILE=0) per-kernel GPU times (TERN_WEBGPU_PROFILE=gpu) of tg16 at depth 4096
#      and of 512 tokens of tern run with the default sampler and with --top-k 0 --top-p 0.9 (the
#      positions part 2 decodes: kernels whose work depends on the logits, e.g. the top-k rows);
#   6. (GEN_RUN_TESTS=1) the same seed on the CPU and GPU backends (48 tokens of five sampler
#      settings) and the GPU test suite (GEN_RUN_TESTS_S bounds it, default 200 s).
# Carries what webgpu_gpu_run.sh carries (.gl and .devicebin, see its header); pack .devicebin with
# tools/device/pack_devicebin.sh. Logs in $OUT/gen.tgz; $OUT/summary.txt holds the figures.
# GEN_RUN_TESTS_FILTER (a gtest filter) bounds the GPU test suite of part 6. GEN_RUN_SAMPLED_AB=1 adds to
# part 2 the default sampler with more argmax_exact workgroups (exact_groups=1024) and more int8-head
# workgroups (head_groups=528 and 1024: more lower bounds, so fewer rows can be in the top k).
# Usage (on the device): tools/device/gen_run.sh [ROUNDS (1)]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rounds=${1:-1}
final=${OUT:-/tmp/out}
out=/tmp/gen_out  # (packed into $OUT/gen.tgz at the end, summary.txt beside it: the device tool brings back few files)
rm -rf "$out" && mkdir -p "$out" "$final"
trap 'cp "$out/summary.txt" "$final/" 2>/dev/null; tar czf "$final/gen.tgz" -C "$out" .' EXIT
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
for bin in tern tern_webgpu_tests; do
    [ -x "$B/$bin" ] || { echo "gen_run: .devicebin/$bin is missing" | tee -a "$out/summary.txt"; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
model=/tmp/synth-2b4t.gguf
"$B/tern" synth bitnet-2b4t -o "$model" --seed 1 2>&1 | tail -1

echo "== 1. one tern -vv run -n 512 each, greedy (--temp 0), the default sampler and --top-k 0 --top-p 0.9: load" \
     "breakdown, ms per decode step of each batch of 32, the host's ms per step" | tee -a "$out/summary.txt"
for arm in "greedy|--temp 0" "sampled-default|--seed 1" "topk0-topp0.9|--top-k 0 --top-p 0.9 --seed 1"; do
    name=${arm%%|*}
    # shellcheck disable=SC2086
    "$B/tern" -vv run --backend webgpu -m "$model" -p "Once upon a time" -n 512 --no-display-prompt ${arm#*|} \
        > /dev/null 2> "$out/timeline.$name.err"
    echo "-- $name" | tee -a "$out/summary.txt"
    grep -E "^tern: load|^load: " "$out/timeline.$name.err" | tee -a "$out/summary.txt"
    python3 tools/device/gen_timeline.py timeline "$out/timeline.$name.err" | tee -a "$out/summary.txt"
done

echo "== 2. tern run -n 512 (streamed to a file) against tern bench tg512, $rounds alternating rounds" | tee -a "$out/summary.txt"
mkdir -p "$out/text"
sampled_ab=()
if [ -n "${GEN_RUN_SAMPLED_AB:-}" ]; then
    sampled_ab=(--arm "sampled-exact-groups-1024=TERN_WEBGPU_TUNE=exact_groups=1024 --seed 1"
                --arm "sampled-head-groups-528=TERN_WEBGPU_TUNE=head_groups=528 --seed 1"
                --arm "sampled-head-groups-1024=TERN_WEBGPU_TUNE=head_groups=1024 --seed 1")
fi
python3 tools/run_bench.py --tern "$B/tern" -m "$model" --backend webgpu --rounds "$rounds" --n 512 \
    --out "$out/text" \
    --arm "run-greedy=--temp 0" \
    --arm "run-sampled-default=--seed 1" \
    --arm "run-topk0-topp0.9=--top-k 0 --top-p 0.9 --seed 1" \
    "${sampled_ab[@]}" \
    --bench "bench-tg512=-p 0 -n 512 -r 3" 2>&1 | tee -a "$out/summary.txt"

echo "== 3. tg64 at depth 0 and 4096; depth 4096 with attn_split_tiles=0 (attention_split_pv)" | tee -a "$out/summary.txt"
"$B/tern" bench --backend webgpu -m "$model" -p 0 -n 64 -d 0,4096 -r 3 2>&1 | grep -E "^\| .*tg" | tee -a "$out/summary.txt"
for r in $(seq "$rounds"); do
    for tiles in 0 1; do
        echo -n "round $r attn_split_tiles=$tiles " | tee -a "$out/summary.txt"
        TERN_WEBGPU_TUNE="attn_split_tiles=$tiles" "$B/tern" bench --backend webgpu -m "$model" -p 0 -n 64 -d 4096 -r 3 \
            2>&1 | grep -E "^\| .*tg" | tee -a "$out/summary.txt"
    done
done

echo "== 4. warm-up: cold driver and tern caches (fresh __GL_SHADER_DISK_CACHE_PATH, TERN_CACHE_DIR), then warm" | tee -a "$out/summary.txt"
cache=$(mktemp -d) tern_cache=$(mktemp -d)
for state in cold warm; do
    __GL_SHADER_DISK_CACHE_PATH=$cache TERN_CACHE_DIR=$tern_cache "$B/tern" -v run --backend webgpu -m "$model" -p "Once upon a time" -n 16 \
        --no-display-prompt --seed 1 > /dev/null 2> "$out/warmup.$state.err"
    echo "$state: $(grep -E "^tern: load" "$out/warmup.$state.err" | head -1)" | tee -a "$out/summary.txt"
done

if [ "${GEN_RUN_PROFILE:-1}" != 0 ]; then
    echo "== 5. GPU profiles (kernel, count, time per dispatch; each dispatch alone, so slower than above)" | tee -a "$out/summary.txt"
    prof() {  # name, then the tern command line
        local name=$1; shift
        TERN_WEBGPU_PROFILE=gpu timeout 120 "$B/tern" "$@" > /dev/null 2> "$out/profile_$name.txt"
        echo "-- $name (rc $?)" | tee -a "$out/summary.txt"
        grep -E "attention_split|sample|lm_head|argmax_exact|kernels ran" "$out/profile_$name.txt" | tee -a "$out/summary.txt"
    }
    prof bench_d4096 bench --backend webgpu -m "$model" -p 0 -n 16 -d 4096 -r 1
    prof run_sampled_default run --backend webgpu -m "$model" -p "Once upon a time" -n 512 --seed 1 --no-display-prompt
    prof run_sampled_topp run --backend webgpu -m "$model" -p "Once upon a time" -n 512 --top-k 0 --top-p 0.9 --seed 1 \
        --no-display-prompt
fi

if [ -n "${GEN_RUN_TESTS:-}" ]; then
    echo "== 6. same seed, CPU and GPU backends (48 tokens); the GPU test suite" | tee -a "$out/summary.txt"
    settings=("greedy|--temp 0" "default|--seed 7" "topk0-topp0.9|--top-k 0 --top-p 0.9 --seed 7"
              "temp-only|--top-k 0 --top-p 1 --min-p 0 --temp 0.9 --seed 7" "min-p-only|--top-k 0 --top-p 1 --min-p 0.1 --seed 7")
    for s in "${settings[@]}"; do
        name=${s%%|*}
        args=${s#*|}
        for be in webgpu cpu; do
            # shellcheck disable=SC2086
            timeout 200 "$B/tern" run --backend "$be" -t 16 -m "$model" -p "Once upon a time" -n 48 --no-display-prompt \
                $args > "$out/same_seed.$name.$be.txt" 2> "$out/same_seed.$name.$be.err"
        done
        if cmp -s "$out/same_seed.$name.webgpu.txt" "$out/same_seed.$name.cpu.txt"; then
            echo "$name: same text" | tee -a "$out/summary.txt"
        else
            echo "$name: DIFFERENT text (same_seed.$name.*.txt)" | tee -a "$out/summary.txt"
        fi
    done
    timeout "${GEN_RUN_TESTS_S:-200}" "$B/tern_webgpu_tests" --gtest_brief=1 --gtest_filter="${GEN_RUN_TESTS_FILTER:-*}" \
        > "$out/gpu_tests.txt" 2>&1
    echo "exit $?" | tee -a "$out/summary.txt"
    grep -E "FAILED|PASSED|Failure" "$out/gpu_tests.txt" | head -20 | tee -a "$out/summary.txt"
fi
