#!/usr/bin/env bash
# Batched decoding (issue 53) and long-context decoding (issue 52) on the lent GPU machine (the
# `device` tool), in one call of about five minutes:
#   1. the GPU tests of the paged ops, the split attention, the batched head and the GEMMs (split
#      along K, tensor-core tilings) against the CPU reference;
#   2. single-stream decode at depth 0 and 4096 on `tern synth bitnet-2b4t` (`tern bench -p 0 -n 64
#      -d 0,4096`: issue 52 asks tg @ d4096 >= 70% of tg @ d0), the ratio, then tg @ d4096 again
#      for each split-attention tuning in $TUNES (one line each; the defaults are the first table);
#   3. the batched engine: `tern bench -p 0 -n 64 --parallel 1,8,32,64` (aggregate decode tokens/s
#      and ms per step, greedy on the device, no HTTP), then a per-kernel GPU profile of 16 steps at
#      64 streams (batch_profile64.txt; at depth D > 0 batch_profile64_dD.txt): decode steps only,
#      the prefill to depth D is not counted (Backend::restart_profile);
#   4. `tern serve` under load: tools/serve/serve_bench.py at 1, 8, 32 and 64 concurrent streams
#      (sampled at temperature 0.8, streamed over HTTP; per-stream ms/token) and the time to first
#      token of a 512-token prompt alone (twice) and while 8 streams decode, and the server's time
#      per step by phase (/metrics); then `tern run` on the same model, sampler and positions, the
#      figure one stream through the server should approach (batch_run_alone.txt).
# Prepare here: TERN_PACK_OLD_DAWN=0 tools/device/pack_devicebin.sh (tern, tern_webgpu_tests and the
# libraries, into .devicebin); .gl as tools/device/webgpu_gpu_run.sh says. Then run with
# carry [".gl", ".devicebin"] (about 25 MB with the 19 MB working tree under the 64 MiB limit):
#   tools/device/batch_run.sh
# Results: $OUT/batch_*.md, .json, .txt, and all of them in $OUT/batch.tgz. Environment: TUNES (space-separated TERN_WEBGPU_TUNE
# values for step 2), SPLIT_TUNES (the same for step 3a, at TUNE_STREAMS: 8,64, and TUNE_DEPTHS: 0), TESTS (step 1's
# gtest filter), SKIP_DEPTH=1 (no step 2), STREAMS (default 1,8,32,64), BATCH_DEPTHS (step 3's
# depths before the timed steps, default 0: serve_bench's streams decode at positions 16 to 2,047,
# e.g. 0,512 compares the engine there), SERVE_STREAMS (step 4's,
# default STREAMS), SERVE_TUNES (step 4 once more per arm, without the TTFT runs: an arm is comma-separated
# TERN_WEBGPU_TUNE items and tern serve flags, e.g. spin_us=20000,--threads-http=128; files batch_serve_ARM.*),
# BATCH_TG (step 3's tokens per stream, default 64: e.g. BATCH_DEPTHS=20 BATCH_TG=1040 sweeps the positions
# serve_bench's 10-second window decodes), BATCH_TUNES (step 3 once more per TERN_WEBGPU_TUNE value; file
# batch_engine_TUNE.md), PROFILE_STREAMS (step 3b's stream counts, default 64), PROFILE_DEPTHS (step 3b's
# depths before the profiled steps, default 0; e.g. 0,256,512), PROFILE_TUNES (step 3b once more per
# TERN_WEBGPU_TUNE value, at every PROFILE_DEPTHS; file batch_profileS_dD_TUNE.txt), REPS (steps 3 and 3a's
# repetitions, default 3), DURATION (serve_bench seconds per stream count,
# default 10), SERVE_PROFILE_STREAMS (stream counts of step 4c, a per-kernel GPU profile of the
# server under sampled load; default none), SKIP_TESTS=1, SKIP_SERVE=1, SKIP_ENGINE=1 (no
# step 3, 3b; 3a only where SPLIT_TUNES is set).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
export TERN_TEST_DATA_DIR=$PWD/tests/data  # the family suites convert tests/data/hf_parity (the build's own path is not on this machine)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
streams=${STREAMS:-1,8,32,64}
TUNE_STREAMS=${TUNE_STREAMS:-8,64}
PROFILE_DEPTHS=${PROFILE_DEPTHS:-0}
model=/tmp/synth-2b4t.gguf

if [ -z "${SKIP_TESTS:-}" ]; then
    echo "== 1. GPU tests: paged ops, split and long attention vs the CPU reference"
    "$B/tern_webgpu_tests" --gtest_brief=1 --gtest_filter="${TESTS:-*Paged*:*Long*:*Attention*:*Batch*:WebGpuGemm*}" \
        > "$out/batch_gpu_tests.txt" 2>&1
    grep -E "PASSED|FAILED|Failure|tests ran" "$out/batch_gpu_tests.txt" | head -20
fi

"$B/tern" synth bitnet-2b4t -o "$model" --seed 1 2>&1 | tail -1

if [ -z "${SKIP_DEPTH:-}" ]; then
echo "== 2. single stream: tg64 at depth 0 and 4096"
"$B/tern" bench --backend webgpu -m "$model" -p 0 -n 64 -d 0,4096 -r 3 --json > "$out/batch_depth.json" \
    2> "$out/batch_depth.err"
python3 - "$out/batch_depth.json" <<'EOF' | tee "$out/batch_depth.md"
import json, sys
rows = json.load(open(sys.argv[1]))
for r in rows:
    print(f"| {r['test']} | {r['avg_ts']:.1f} ± {r['stddev_ts']:.1f} t/s | {r['ms_per_token']:.3f} ms/token | "
          f"{r['dispatches_per_token']} dispatches/token |")
d0 = [r for r in rows if r["n_depth"] == 0]
d4 = [r for r in rows if r["n_depth"] == 4096]
if d0 and d4:
    print(f"{d4[0]['test']} / {d0[0]['test']} = {100 * d4[0]['avg_ts'] / d0[0]['avg_ts']:.1f}% (issue 52: >= 70%)")
EOF
for t in ${TUNES:-attn_split_heads=4 attn_split_heads=2 attn_split_unroll=1 attn_split_unroll=8 attn_split_dims=4 attn_split_dims=16 attn_long_positions=1000000}; do
    printf '%s: ' "$t"
    TERN_WEBGPU_TUNE=$t "$B/tern" bench --backend webgpu -m "$model" -p 0 -n 64 -d 4096 -r 3 2>/dev/null | tail -1 |
        awk -F'|' '{print $7 ":", $8, "t/s,", $9, "ms/token"}'
done | tee "$out/batch_depth_tunes.txt"
fi

if [ -z "${SKIP_ENGINE:-}" ]; then
for bt in - ${BATCH_TUNES:-}; do
    f=batch_engine; tune=""; [ "$bt" = - ] || { f=${f}_${bt//[=,]/_}; tune=$bt; }
    echo "== 3. batched engine: tern bench --parallel $streams -d ${BATCH_DEPTHS:-0}${tune:+ with TERN_WEBGPU_TUNE=$tune}"
    TERN_WEBGPU_TUNE=$tune "$B/tern" bench --backend webgpu -m "$model" -p 0 -n "${BATCH_TG:-64}" --parallel "$streams" \
        -d "${BATCH_DEPTHS:-0}" -r "${REPS:-3}" 2>&1 | tee "$out/$f.md"
done

fi

if [ -z "${SKIP_ENGINE:-}" ] || [ -n "${SPLIT_TUNES:-}" ]; then
echo "== 3a. $TUNE_STREAMS streams under other tunings (head_mma_rows 0: the dot4 head; attn_paged_tiles 0: attention_split_pv for a paged batch's P·V)"
for t in ${SPLIT_TUNES:-head_mma_rows=0 head_mma_rows=1 head_mma_rows=3 attn_paged_tiles=0}; do
    TERN_WEBGPU_TUNE=$t "$B/tern" bench --backend webgpu -m "$model" -p 0 -n 64 --parallel "$TUNE_STREAMS" -r "${REPS:-3}" \
        -d "${TUNE_DEPTHS:-0}" 2>/dev/null | grep ' tg64 x' | awk -F'|' -v t="$t" '{print t ":", $5 ":", $7, "t/s,", $8, "ms/step"}'
done | tee "$out/batch_split_tunes.txt"

fi

if [ -z "${SKIP_ENGINE:-}" ]; then
for ps in ${PROFILE_STREAMS:-64}; do
for pd in ${PROFILE_DEPTHS//,/ }; do
for pt in - ${PROFILE_TUNES:-}; do
    f=batch_profile$ps; [ "$pd" = 0 ] || f=${f}_d$pd; [ "$pt" = - ] || f=${f}_${pt//[=,]/_}
    tune=""; [ "$pt" = - ] || tune=$pt
    echo "== 3b. where a $ps-stream decode step's GPU time goes at depth $pd ${tune:+($tune) }(TERN_WEBGPU_PROFILE=gpu)"
    TERN_WEBGPU_TUNE=$tune TERN_WEBGPU_PROFILE=gpu timeout 120 "$B/tern" bench --backend webgpu -m "$model" -p 0 -n 16 \
        --parallel "$ps" -d "$pd" -r 1 > "$out/$f.out" 2> "$out/$f.txt"
    grep -E "^ +[a-z_]+" "$out/$f.txt" | awk '{print $(NF-1), $0}' | sort -rn | cut -d' ' -f2- | head -14
    grep "kernels ran" "$out/$f.txt"
done
done
done
fi

if [ -z "${SKIP_SERVE:-}" ]; then
    for st in - ${SERVE_TUNES:-}; do
    # An arm: comma-separated TERN_WEBGPU_TUNE items and `tern serve` flags (--name=value).
    f=batch_serve; tune=""; flags=()
    if [ "$st" != - ]; then
        f=${f}_$(printf '%s' "$st" | tr -c 'A-Za-z0-9_' '_')
        IFS=, read -ra items <<< "$st"
        for it in "${items[@]}"; do
            if [[ $it == --* ]]; then flags+=("$it"); else tune=${tune:+$tune,}$it; fi
        done
    fi
    echo "== 4. tern serve under load (serve_bench.py)${tune:+ with TERN_WEBGPU_TUNE=$tune}${flags[*]:+ and ${flags[*]}}"
    TERN_WEBGPU_TUNE=$tune PYTHONUNBUFFERED=1 python3 tools/serve/serve_bench.py --bin "$B/tern" -m "$model" \
        --backend webgpu --streams "${SERVE_STREAMS:-$streams}" --duration "${DURATION:-10}" -c 2048 \
        $([ "$st" = - ] || echo --ttft-tokens 0) --json "$out/$f.json" ${flags[*]:+-- "${flags[@]}"} \
        2> "$out/$f.log" | tee "$out/$f.md"
    done
    echo "== 4b. tern run beside it: one stream, the server's default sampler (temperature 0.8, top-k 40), the"
    echo "   positions serve_bench's streams decode (a short prompt, then up to 2,031 tokens of a 2,048 context)"
    "$B/tern" run --backend webgpu -m "$model" -p "The ship" -n 2031 -c 2048 --temp 0.8 --seed 1 --json 2>/dev/null |
        python3 -c 'import json, sys; d = json.load(sys.stdin)
print("tern run: %.1f tok/s over %d tokens (%s)" % (d["timings"]["decode_tokens_per_second"], d["n_generated_tokens"], d["stop"]))' |
        tee "$out/batch_run_alone.txt"
    for ps in ${SERVE_PROFILE_STREAMS:-}; do
        echo "== 4c. where a sampled $ps-stream server's GPU time goes (TERN_WEBGPU_PROFILE=gpu, 3 s of load)"
        TERN_WEBGPU_PROFILE=gpu PYTHONUNBUFFERED=1 timeout 150 python3 tools/serve/serve_bench.py --bin "$B/tern" \
            -m "$model" --backend webgpu --streams "$ps" --duration 3 --ttft-tokens 0 -c 2048 \
            > "$out/batch_serve_profile$ps.md" 2> "$out/batch_serve_profile$ps.txt"
        grep -E "^ +[a-z_]+" "$out/batch_serve_profile$ps.txt" | awk '{print $(NF-1), $0}' | sort -rn | cut -d' ' -f2- | head -16
        grep "kernels ran" "$out/batch_serve_profile$ps.txt"
        grep -A3 "^| streams | server tokens" "$out/batch_serve_profile$ps.md"
    done
fi
# Everything in one tarball as well (the device tool brings back what is under $OUT).
(cd "$out" && tar -czf batch.tgz batch_*)
