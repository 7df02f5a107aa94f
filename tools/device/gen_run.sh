#!/usr/bin/env bash
# Issue 52 on the lent GPU: what `tern run` gives a user against what `tern bench` says, on a
# synthetic BitNet b1.58 2B4T (tern synth bitnet-2b4t --seed 1, prompt "Once upon a time"):
#   0. why run decodes slower than bench: nvidia-smi's clocks every 20 ms (clocks.csv) while, after
#      3 s idle each, `tern -vv run -n 512 --temp 0` (its read-backs time each batch of 32 steps),
#      the same with a 1 s warm-up (warm_up_ms=1000), and `tern bench -p 0 -n 512` run;
#      gen_timeline.py summarizes both (timeline.txt, clocks.txt); -v's lines say where the load's
#      time goes;
#   1. tools/run_bench.py, alternating rounds: tern run -n 512 greedy (--temp 0) with the warm-up
#      as built, with warm_up_ms=300 and 1000, the default sampler (--seed 1), --top-k 0 --top-p 0.9
#      (--seed 1), and tern bench tg128, tg512 (tg512 decodes the positions tern run -n 512 does) and
#      tg512 --as-run --temp 0 (generated as tern run does, after bench's warm-up);
#      each run arm's whole summary line once more (load, warm-up, prompt, generation);
#   2. tg at depth 0 and 4096 (tern bench -p 0 -n 64 -d 0,4096), split attention's P·V by
#      superblocks (attention_split_pvs, the default) and in one workgroup per column (attn_split_super=0);
#   3. the same seed on the CPU and the GPU backends: the first 48 tokens of each setting (greedy,
#      default sampler, top-k 0 top-p 0.9, temperature only, min-p only) must be the same text;
#   4. the GPU test suite of this build (tern_webgpu_tests).
# Carries what webgpu_gpu_run.sh carries (.gl and .devicebin, see its header); pack .devicebin with
# tools/device/pack_devicebin.sh. Logs under $OUT; summary.txt holds the figures.
# Usage (on the device): tools/device/gen_run.sh [ROUNDS (3)]
# Environment: GEN_RUN_NO_TESTS=1 skips step 4; GEN_RUN_TESTS_S bounds it (default 200 s).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rounds=${1:-3}
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
for bin in tern tern_webgpu_tests; do
    [ -x "$B/$bin" ] || { echo "gen_run: .devicebin/$bin is missing" | tee -a "$out/summary.txt"; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
model=/tmp/synth-2b4t.gguf
"$B/tern" synth bitnet-2b4t -o "$model" --seed 1 2>&1 | tail -1
run512() { "$B/tern" run --backend webgpu -m "$model" -p "Once upon a time" -n 512 --no-display-prompt "$@"; }

echo "== 0. clocks and per-batch timelines: run, run with a 1 s warm-up, bench tg512" | tee -a "$out/summary.txt"
fields=timestamp,pstate,clocks.sm,clocks.mem,power.draw,utilization.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader -i 0 > /dev/null 2>&1 ||
    fields=timestamp,pstate,clocks.sm,clocks.mem,power.draw,utilization.gpu
nvidia-smi --query-gpu=$fields --format=csv,noheader,nounits -i 0 -lms 20 > "$out/clocks.csv" 2> "$out/clocks.err" &
smi=$!
mark() { echo "$(date '+%Y/%m/%d %H:%M:%S.%3N') $*" >> "$out/marks.txt"; }
sleep 3
mark start run-default
"$B/tern" -vv run --backend webgpu -m "$model" -p "Once upon a time" -n 512 --no-display-prompt --temp 0 \
    > /dev/null 2> "$out/timeline.run-default.err"
mark end run-default
sleep 3
mark start run-warm1000
TERN_WEBGPU_TUNE=warm_up_ms=1000 "$B/tern" -vv run --backend webgpu -m "$model" -p "Once upon a time" -n 512 \
    --no-display-prompt --temp 0 > /dev/null 2> "$out/timeline.run-warm1000.err"
mark end run-warm1000
sleep 3
mark start bench-tg512
"$B/tern" bench --backend webgpu -m "$model" -p 0 -n 512 -r 2 2>&1 | tail -1 | tee -a "$out/summary.txt"
mark end bench-tg512
kill "$smi" 2> /dev/null
wait "$smi" 2> /dev/null
for f in run-default run-warm1000; do
    grep -E "^tern: load|^load: " "$out/timeline.$f.err" | sed "s/^/$f: /" | tee -a "$out/summary.txt"
done
python3 tools/device/gen_timeline.py timeline "$out"/timeline.*.err | tee "$out/timeline.txt" | tee -a "$out/summary.txt"
python3 tools/device/gen_timeline.py clocks "$out/clocks.csv" "$out/marks.txt" | tee "$out/clocks.txt" | tee -a "$out/summary.txt"

echo "== 1. tern run -n 512 (streamed to a file) against tern bench, $rounds alternating rounds" | tee -a "$out/summary.txt"
mkdir -p "$out/text"
python3 tools/run_bench.py --tern "$B/tern" -m "$model" --backend webgpu --rounds "$rounds" --n 512 \
    --out "$out/text" \
    --arm "run-greedy=--temp 0" \
    --arm "run-greedy-warm300=TERN_WEBGPU_TUNE=warm_up_ms=300 --temp 0" \
    --arm "run-greedy-warm1000=TERN_WEBGPU_TUNE=warm_up_ms=1000 --temp 0" \
    --arm "run-sampled-default=--seed 1" \
    --arm "run-topk0-topp0.9=--top-k 0 --top-p 0.9 --seed 1" \
    --bench "bench-tg128=-p 0 -n 128 -r 5" \
    --bench "bench-tg512=-p 0 -n 512 -r 3" \
    --bench "bench-tg512-as-run=-p 0 -n 512 -r 3 --as-run --temp 0" 2>&1 | tee -a "$out/summary.txt"
# One run's whole summary line per arm (load, warm-up, prompt, generation).
for arm in run-greedy run-sampled-default run-topk0-topp0.9; do
    case $arm in
        run-greedy) args="--temp 0" ;;
        run-sampled-default) args="--seed 1" ;;
        *) args="--top-k 0 --top-p 0.9 --seed 1" ;;
    esac
    # shellcheck disable=SC2086
    run512 $args > /dev/null 2> "$out/$arm.err"
    echo "$arm: $(grep -E '^tern: load' "$out/$arm.err")" | tee -a "$out/summary.txt"
done

echo "== 2. tg64 at depth 0 and 4096; P·V by superblocks (as built) and in one workgroup per column (attn_split_super=0), 2 alternating rounds" | tee -a "$out/summary.txt"
for r in 1 2; do
    for super in 1 0; do
        TERN_WEBGPU_TUNE=attn_split_super=$super "$B/tern" bench --backend webgpu -m "$model" -p 0 -n 64 -d 0,4096 -r 3 \
            2>&1 | grep -E "^\| .*tg" | sed "s/^/round $r attn_split_super=$super /" | tee -a "$out/summary.txt"
    done
done

echo "== 3. same seed, CPU and GPU backends (48 tokens)" | tee -a "$out/summary.txt"
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

if [ -z "${GEN_RUN_NO_TESTS:-}" ]; then
    echo "== 4. GPU test suite of this build" | tee -a "$out/summary.txt"
    timeout "${GEN_RUN_TESTS_S:-200}" "$B/tern_webgpu_tests" --gtest_brief=1 > "$out/gpu_tests.txt" 2>&1
    echo "exit $?" | tee -a "$out/summary.txt"
    grep -E "FAILED|PASSED|Failure" "$out/gpu_tests.txt" | head -20 | tee -a "$out/summary.txt"
fi
