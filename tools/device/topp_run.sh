#!/usr/bin/env bash
# Issue 52's top-p part on the lent GPU, about 2.5 minutes: `tern run --top-k 0 --top-p 0.9` against greedy on
# a synthetic BitNet b1.58 2B4T (tern synth bitnet-2b4t --seed 1, prompt "Once upon a time", -n 512): the exact
# F16 head lm_head_f16_teams.wgsl (WebGpuTuning head_exact_form 1, the default; 0 is lm_head_f16_decode), also
# with session 8's settings (10-word segments loaded then summed on two workgroups per unit, sample_scan in two
# dispatches: the arm "before"), and the sampler's passes over the vocabulary in sample_scan.wgsl (also with
# min-p 0):
#   1. the GPU tests of the exact heads and the device sampler (WebGpuExactHead, WebGpuSample,
#      WebGpuDecodeStream.SampledIds*, WebGpuHeadBatch; bounded to 150 s);
#   2. tools/run_bench.py, TOPP_RUN_ROUNDS (2) alternating rounds: greedy, the default sampler, top-p 0.9 (with
#      min-p 0.05, the default, and 0), top-p 0.9 with session 8's settings ("before"),
#      and TOPP_RUN_EXTRA arms ("name=flags", ;-separated);
#   3. per-kernel GPU times (TERN_WEBGPU_PROFILE=gpu) of 128 top-p tokens in those settings and the
#      TOPP_PROFILE_EXTRA ones ("name|tunes" or "name|--flags", ;-separated);
#   4. with TOPP_BATCH_TUNES, the batched head (issue 53) per tune: GPU profiles of a sampled
#      64-stream server and of greedy 64-stream steps.
# Carries .gl and .devicebin (TERN_PACK_OLD_DAWN=0 tools/device/pack_devicebin.sh). Logs in $OUT/topp.tgz,
# the figures in $OUT/summary.txt.
# Usage (on the device): tools/device/topp_run.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rounds=${TOPP_RUN_ROUNDS:-2}
final=${OUT:-/tmp/out}
out=/tmp/topp_out
rm -rf "$out" && mkdir -p "$out" "$final"
trap 'cp "$out/summary.txt" "$final/" 2>/dev/null; tar czf "$final/topp.tgz" -C "$out" .' EXIT
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
for bin in tern tern_webgpu_tests; do
    [ -x "$B/$bin" ] || { echo "topp_run: .devicebin/$bin is missing" | tee -a "$out/summary.txt"; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
model=/tmp/synth-2b4t.gguf
"$B/tern" synth bitnet-2b4t -o "$model" --seed 1 2>&1 | tail -1

echo "== 1. GPU tests: the exact head's forms, the device sampler" | tee -a "$out/summary.txt"
timeout 150 "$B/tern_webgpu_tests" --gtest_brief=1 \
    --gtest_filter='WebGpuExactHead.*:WebGpuSample.*:WebGpuDecodeStream.SampledIds*:WebGpuHeadBatch.*' > "$out/gpu_tests.txt" 2>&1
echo "exit $?" | tee -a "$out/summary.txt"
grep -E "FAILED|PASSED|Failure|mismatch|row " "$out/gpu_tests.txt" | head -20 | tee -a "$out/summary.txt"

echo "== 2. tern run -n 512, $rounds alternating rounds" | tee -a "$out/summary.txt"
mkdir -p "$out/text"
extra=()
IFS=';' read -r -a extra_arms <<< "${TOPP_RUN_EXTRA:-}"
for a in "${extra_arms[@]}"; do [ -n "$a" ] && extra+=(--arm "$a"); done
topp="--top-k 0 --top-p 0.9 --seed 1"
# Session 8's settings: 10-word segments, each loaded then summed, two workgroups per unit of an H100 / H200's
# 132, sample_scan's maximum in a pass of its own.
before=head_exact_ahead=0,head_exact_seg=10,head_exact_groups=264,sample_scan_fused=0
python3 tools/run_bench.py --tern "$B/tern" -m "$model" --backend webgpu --rounds "$rounds" --n 512 \
    --out "$out/text" \
    --arm "run-greedy=--temp 0" \
    --arm "run-sampled-default=--seed 1" \
    --arm "topp=$topp" \
    --arm "topp-minp0=$topp --min-p 0" \
    --arm "topp-before=TERN_WEBGPU_TUNE=$before $topp" \
    "${extra[@]}" 2>&1 | tee -a "$out/summary.txt"
for a in topp-before "${extra_arms[@]}"; do
    a=${a%%=*}
    [ -n "$a" ] || continue
    if cmp -s "$out/text/topp.r1.txt" "$out/text/$a.r1.txt"; then
        echo "topp and $a: same text" | tee -a "$out/summary.txt"
    else
        echo "topp and $a: DIFFERENT text" | tee -a "$out/summary.txt"
    fi
done

echo "== 3. GPU profiles of 128 top-p tokens (time per dispatch; each dispatch alone)" | tee -a "$out/summary.txt"
profiles=("default|" "minp0|--min-p 0" "before|$before")
IFS=';' read -r -a extra_profiles <<< "${TOPP_PROFILE_EXTRA:-}"
for a in "${extra_profiles[@]}"; do [ -n "$a" ] && profiles+=("$a"); done
for arm in "${profiles[@]}"; do
    name=${arm%%|*}
    val=${arm#*|}
    tune=""
    flags=""
    case $val in --*) flags=$val ;; *) tune=$val ;; esac
    # shellcheck disable=SC2086
    env ${tune:+TERN_WEBGPU_TUNE=$tune} TERN_WEBGPU_PROFILE=gpu timeout 60 "$B/tern" run --backend webgpu -m "$model" \
        -p "Once upon a time" -n 128 $topp $flags --no-display-prompt > /dev/null 2> "$out/profile_$name.txt"
    echo "-- $name (rc $?)" | tee -a "$out/summary.txt"
    grep -E "sample|lm_head|argmax|kernels ran" "$out/profile_$name.txt" | tee -a "$out/summary.txt"
done

# 4. (TOPP_BATCH_TUNES: space-separated TERN_WEBGPU_TUNE values) the batched head of issue 53 under each
#    tune and the defaults: per-kernel GPU times of a sampled 64-stream server (3 s of load, as
#    batch_run.sh's step 4c) and of 16 greedy 64-stream steps (tern bench --parallel 64).
if [ -n "${TOPP_BATCH_TUNES:-}" ]; then
    echo "== 4. the batched head: sampled 64-stream server and greedy 64-stream steps, GPU profiles" | tee -a "$out/summary.txt"
    for t in - $TOPP_BATCH_TUNES; do
        tune=""; [ "$t" = - ] || tune=$t
        f=${t//[=,]/_}
        TERN_WEBGPU_TUNE=$tune TERN_WEBGPU_PROFILE=gpu PYTHONUNBUFFERED=1 timeout 150 python3 tools/serve/serve_bench.py \
            --bin "$B/tern" -m "$model" --backend webgpu --streams 64 --duration 3 --ttft-tokens 0 -c 2048 \
            > "$out/serve_profile_$f.md" 2> "$out/serve_profile_$f.txt"
        echo "-- serve 64, tune '$tune' (rc $?)" | tee -a "$out/summary.txt"
        grep -E "head_|lm_head|sample|kernels ran" "$out/serve_profile_$f.txt" | tee -a "$out/summary.txt"
        TERN_WEBGPU_TUNE=$tune TERN_WEBGPU_PROFILE=gpu timeout 120 "$B/tern" bench --backend webgpu -m "$model" -p 0 -n 16 \
            --parallel 64 -r 1 > "$out/batch_profile_$f.out" 2> "$out/batch_profile_$f.txt"
        echo "-- greedy 64, tune '$tune' (rc $?)" | tee -a "$out/summary.txt"
        grep -E "head_|lm_head|argmax|kernels ran" "$out/batch_profile_$f.txt" | tee -a "$out/summary.txt"
    done
fi
