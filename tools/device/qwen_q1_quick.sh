#!/usr/bin/env bash
# Issue 54 on qwen3-1.7b Q1_0 (Bonsai's type), within BUDGET_S seconds of device time (default 110;
# later steps are skipped, with a line saying so, once the budget is spent):
#   1. the Q1_0 / Q2_0 / PQ2_0 family suites (matvec_q8.wgsl WTYPE 7, its QOUT gate+up and ACTS down
#      and o-projection, matvec_q1_qkv.wgsl, the tiny qwen3 Q1_0 model) against the CPU reference on
#      this GPU;
#      skipped with SKIP_SUITES=1 (a call that only measures);
#   2. decode tg64 (--roofline) of a full synth qwen3-1.7b Q1_0 with the defaults, then with each
#      QWEN_TUNES entry (TERN_WEBGPU_TUNE values, space-separated; default none), the same file;
#   3. the per-kernel GPU profile (TERN_WEBGPU_PROFILE=gpu, 16 tokens) with the defaults, then with
#      PROFILE_TUNE (a TERN_WEBGPU_TUNE value) if it is set: the profile comes last so that the A/B
#      is not skipped for it.
# Carry .gl and .devicebin (tools/device/pack_devicebin.sh). Results: $OUT/qwen_q1_quick.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-/tmp/out}
out=/tmp/qwen_q1_quick_out  # (packed into one file at the end: the device tool brings back few files)
rm -rf "$out"
mkdir -p "$final" "$out"
trap 'tar czf "$final/qwen_q1_quick.tgz" -C "$out" .' EXIT
budget=${BUDGET_S:-110}
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
export TERN_TEST_DATA_DIR=$PWD/tests/data
SECONDS=0
left() { [ "$SECONDS" -lt "$1" ] || { echo "(skipped: ${SECONDS}s of the ${budget}s budget spent) $2"; return 1; }; }

if [ "${SKIP_SUITES:-0}" = 1 ]; then
    echo "== (suites skipped: SKIP_SUITES=1)"
else
    echo "== Q1_0 / Q2_0 / PQ2_0 family suites vs the CPU reference on this GPU"
    "$B/tern_webgpu_tests" --gtest_filter='Types/WebGpuFamilyDecode.*/q1_0:Types/WebGpuFamilyDecode.*/q2_0:Types/WebGpuFamilyDecode.*/pq2_0:WebGpuFamily.QkvMatvecQ1*:WebGpuFamily.Attention*:WebGpuFamily.TinyQwen3Q1*' \
        > "$out/tests.txt" 2>&1
    grep -E "FAILED|PASSED|first at|SKIPPED" "$out/tests.txt" | head -12
fi

m=/tmp/qwen3-q1_0.gguf
"$B/tern" synth qwen3-1.7b --type q1_0 --vocab "$B/qwen3/tokenizer.json" -o "$m" > /dev/null 2> "$out/synth.err" ||
    { echo "synth failed: $(tail -1 "$out/synth.err")"; exit 1; }
bench_line() {  # name [tune]: tg64 of the file, one line
    TERN_WEBGPU_TUNE=${2:-} "$B/tern" bench --backend webgpu -m "$m" --roofline -p 0 -n 64 -r 2 > "$out/bench_$1.md" 2>&1
    echo "$1 [${SECONDS}s]: $(grep -E '\| tg64 ' "$out/bench_$1.md" |
        awk -F'|' '{print $8 "t/s |" $11 " disp/tok |" $12 " MB/tok |" $14 "% copy BW |" $16 "% at the dispatch floor"}')"
}
profile() {  # name [tune]: the per-kernel profile of 16 tokens
    TERN_WEBGPU_TUNE=${2:-} TERN_WEBGPU_PROFILE=gpu timeout 30 "$B/tern" bench --backend webgpu -m "$m" -p 0 -n 16 -r 1 \
        > "$out/profile_$1.out" 2> "$out/profile_$1.txt"
    echo "-- profile $1"
    grep -E "^  (lm_head|head_q|matvec|act_q8|rope|attention|argmax|rms_norm|embed)|kernels ran" "$out/profile_$1.txt" | head -16
}
echo "== decode tg64, synth qwen3-1.7b Q1_0 [${SECONDS}s]"
bench_line default
for tune in ${QWEN_TUNES-}; do
    left $((budget - 40)) "tg64 with $tune" && bench_line "$tune" "$tune"
done
left $((budget - 25)) "profile" && profile default
[ -n "${PROFILE_TUNE-}" ] && left $((budget - 25)) "profile with $PROFILE_TUNE" && profile "$PROFILE_TUNE" "$PROFILE_TUNE"
echo "done in ${SECONDS}s"
