#!/usr/bin/env bash
# Issue 54, a lean A/B of tuning keys on the families' decode, within BUDGET_S seconds of device time
# (default 160; later arms are skipped, with a line saying so, once the budget is spent): decode tg64
# (--roofline) of the full synth llama-3.2-1b Q4_0 and phi-3-mini Q4_0 with each ARMS entry
# (TERN_WEBGPU_TUNE values, "-": none; default "- -"), the models' arms interleaved, no profiles
# (families_quick.sh runs the suites and profiles too). MODELS (default "llama phi3"). TESTS: a gtest
# filter of tern_webgpu_tests to run first (e.g. the arms' bit-exactness; default none).
# (Session 14 measured each kernel class's live time with it: docs/perf-log.md, family_twice.)
# Carry .gl and .devicebin (tools/device/pack_devicebin.sh). Results: $OUT/families_ab.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-/tmp/out}
out=/tmp/families_ab_out
rm -rf "$out"
mkdir -p "$final" "$out"
trap 'tar czf "$final/families_ab.tgz" -C "$out" .' EXIT
budget=${BUDGET_S:-160}
arms=${ARMS:-- -}
models=${MODELS:-llama phi3}
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
export TERN_TEST_DATA_DIR=$PWD/tests/data TERN_PHI3_VOCAB=$PWD/tests/data/llama-vocab/ggml-vocab-phi-3.gguf
SECONDS=0
if [ -n "${TESTS-}" ]; then  # a gtest filter of tern_webgpu_tests run first (e.g. the arms' bit-exactness)
    "$B/tern_webgpu_tests" --gtest_filter="$TESTS" > "$out/tests.txt" 2>&1
    echo "tests ($TESTS) [${SECONDS}s]: $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests.txt" | tr '\n' ' ')"
    grep -E "first at|Failure" "$out/tests.txt" | head -6
fi
for m in $models; do
    case $m in llama) shape=llama-3.2-1b ;; phi3) shape=phi-3-mini ;; *) echo "unknown model $m"; exit 2 ;; esac
    "$B/tern" synth "$shape" --type q4_0 -o "/tmp/ab_$m.gguf" > /dev/null 2> "$out/synth_$m.err" ||
        echo "$m: synth failed: $(tail -1 "$out/synth_$m.err")"
done
i=0
for tune in $arms; do
    i=$((i + 1))
    for m in $models; do
        [ -f "/tmp/ab_$m.gguf" ] || continue
        [ "$SECONDS" -lt $((budget - 8)) ] || { echo "(skipped: ${SECONDS}s of ${budget}s spent) $m $tune"; continue; }
        t=$tune
        [ "$t" = - ] && t=
        TERN_WEBGPU_TUNE=$t "$B/tern" bench --backend webgpu -m "/tmp/ab_$m.gguf" --roofline -p 0 -n 64 -r 2 \
            > "$out/bench_${i}_$m.md" 2>&1
        echo "$m ${tune} [${SECONDS}s]: $(grep -E '\| tg64 ' "$out/bench_${i}_$m.md" |
            awk -F'|' '{print $8 "t/s |" $11 " disp/tok |" $12 " MB/tok |" $14 "% copy BW"}')"
    done
done
echo "done in ${SECONDS}s"
