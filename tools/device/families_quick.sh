#!/usr/bin/env bash
# Issue 54, the short run (families_run.sh is the long one), within BUDGET_S seconds of device time
# (default 180: later steps are skipped, with a line saying so, once the budget is spent):
#   1. the newest family suites (WebGpuFamilyDecode: matvec_q8 / matvec_q8k / Q1_0 / ternary;
#      WebGpuFamilyHead: the Q-block head, its argmax and greedy ids; the attention's Q8_0 blocks for
#      the o-projection; the [q; k; v] matvec with the RoPE in its epilogue; the tiny llama / qwen3
#      models decoding) against the CPU reference on this GPU;
#   2. greedy text, webgpu vs cpu, on a 2-layer synth llama-3.2-1b Q4_0 (a run that fails or prints
#      nothing counts as a difference);
#   3. decode tg64 (--roofline) of the full synth llama-3.2-1b Q4_0, and its per-kernel GPU profile;
#   4. if time is left: decode tg64 of qwen3-1.7b Q1_0 (Bonsai's type), then phi-3-mini Q4_0, each with
#      its profile;
#   5. if time is left: llama-3.2-1b Q4_0 and phi-3-mini Q4_0 again with each TUNES entry
#      (TERN_WEBGPU_TUNE values, default "family_acts_loads=4": matvec_q8_acts.wgsl's lanes loading 4
#      blocks at a time instead of all of theirs; e.g. family_acts=2: the o-projection's Q8_0 blocks by
#      act_q8_0.wgsl instead of the attention; family_head_i8=0: the Q6_K head's exact logits + argmax
#      (lm_head_q.wgsl) instead of its int8 copy; empty: none), the same files, for the tunings' A/B; then
#      qwen3-1.7b Q1_0 with each QWEN_TUNES entry (default none; TUNES are not run on it); LLAMA_TUNES /
#      PHI3_TUNES, where set, replace TUNES for that model. An entry "-"
#      is none: the defaults again, e.g. TUNES="- key=a key=b -" to see the drift around the arms.
# TESTS (a gtest filter) narrows step 1 to those suites, e.g. TESTS='WebGpuFamily.QkvMatvec*'.
# SKIP_SUITES=1 skips steps 1-2 and SKIP_PROFILES=1 the profiles (a call that only measures A/B arms:
# e.g. SKIP_SUITES=1 SKIP_PROFILES=1 MODELS="llama phi3" TUNES="- key=a -").
# MODELS (default "llama qwen3 phi3") names the files steps 3-5 measure: e.g. MODELS="qwen3 phi3" leaves
# llama-3.2-1b out to spend the budget on the others' A/B.
# Carry .gl and .devicebin (tools/device/pack_devicebin.sh). Results: $OUT/families_quick.tgz (families_quick_*).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
final=${OUT:-/tmp/out}
out=/tmp/families_quick_out  # (packed into $OUT/families_quick.tgz at the end: the device tool brings back few files)
rm -rf "$out"
mkdir -p "$final"
trap 'tar czf "$final/families_quick.tgz" -C "$out" .' EXIT
budget=${BUDGET_S:-180}
tunes=${TUNES-family_acts_loads=4}
qwen_tunes=${QWEN_TUNES-}
models=" ${MODELS-llama qwen3 phi3} "
want() { [[ $models == *" $1 "* ]]; }
mkdir -p "$out"
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
export TERN_TEST_DATA_DIR=$PWD/tests/data TERN_PHI3_VOCAB=$PWD/tests/data/llama-vocab/ggml-vocab-phi-3.gguf
SECONDS=0
left() { [ "$SECONDS" -lt "$1" ] || { echo "(skipped: ${SECONDS}s of the ${budget}s budget spent) $2"; return 1; }; }

suites() {  # steps 1-2
    echo "== newest family suites vs the CPU reference on this GPU"
    "$B/tern_webgpu_tests" \
        --gtest_filter="${TESTS:-*WebGpuFamilyDecode*:*WebGpuFamilyHead*:WebGpuFamily.Attention*:WebGpuFamily.QkvMatvec*:WebGpuFamily.Tiny*}" \
        > "$out/families_quick_tests.txt" 2>&1
    grep -E "FAILED|PASSED|first at|SKIPPED" "$out/families_quick_tests.txt" | head -12

    echo "== greedy text, webgpu vs cpu (2-layer synth llama-3.2-1b Q4_0) [${SECONDS}s]"
    m=/tmp/llama-q4_0-2l.gguf
    "$B/tern" synth llama-3.2-1b --layers 2 -o "$m" > /dev/null 2>&1
    "$B/tern" run -m "$m" --backend webgpu -p "The ship" -n 16 --temp 0 -c 256 --no-display-prompt \
        > "$out/families_quick_gpu.txt" 2> "$out/families_quick_gpu.err"
    gpu_rc=$?
    "$B/tern" run -m "$m" --backend cpu -t 16 -p "The ship" -n 16 --temp 0 -c 256 --no-display-prompt \
        > "$out/families_quick_cpu.txt" 2> "$out/families_quick_cpu.err"
    cpu_rc=$?
    if [ $gpu_rc -ne 0 ] || [ $cpu_rc -ne 0 ] || [ ! -s "$out/families_quick_gpu.txt" ]; then
        echo "llama Q4_0: a run failed (webgpu rc $gpu_rc, cpu rc $cpu_rc) or printed nothing"; tail -2 "$out/families_quick_gpu.err"
    elif cmp -s "$out/families_quick_gpu.txt" "$out/families_quick_cpu.txt"; then
        echo "llama Q4_0: greedy text identical"
    else
        echo "llama Q4_0: greedy text differs"
    fi
}
if [ "${SKIP_SUITES:-0}" = 1 ]; then echo "== (suites and greedy text skipped: SKIP_SUITES=1)"; else suites; fi
profiles() { [ "${SKIP_PROFILES:-0}" != 1 ]; }

tg() {  # shape type file [synth flags...]: tg64 of a full synth file, one line
    local shape=$1 type=$2 file=$3
    shift 3
    "$B/tern" synth "$shape" --type "$type" "$@" -o "$file" > /dev/null 2> "$out/families_quick_synth_$shape-$type.err" ||
        { echo "$shape $type: synth failed: $(tail -1 "$out/families_quick_synth_$shape-$type.err")"; return; }
    bench_line "$shape-$type" "$file"
}
bench_line() {  # name file: tg64 of a file, one line (TERN_WEBGPU_TUNE as the caller set it)
    "$B/tern" bench --backend webgpu -m "$2" --roofline -p 0 -n 64 -r 2 > "$out/families_quick_bench_$1.md" 2>&1
    echo "$1 [${SECONDS}s]: $(grep -E '\| tg64 ' "$out/families_quick_bench_$1.md" |
        awk -F'|' '{print $8 "t/s |" $11 " disp/tok |" $12 " MB/tok |" $14 "% copy BW |" $16 "% at the dispatch floor"}')"
}
echo "== decode tg64 (full synth files) [${SECONDS}s]"
want llama && tg llama-3.2-1b q4_0 /tmp/llama-q4_0.gguf
if want llama && profiles && left $((budget - 15)) "profile"; then
    TERN_WEBGPU_PROFILE=gpu timeout 30 "$B/tern" bench --backend webgpu -m /tmp/llama-q4_0.gguf -p 0 -n 16 -r 1 \
        > "$out/families_quick_profile.out" 2> "$out/families_quick_profile.txt"
    grep -E "^  (lm_head|head_q|matvec|act_q8|rope|attention|argmax|rms_norm|embed)|kernels ran" "$out/families_quick_profile.txt" | head -20
fi
want qwen3 && left $((budget - 60)) "qwen3-1.7b q1_0" &&
    tg qwen3-1.7b q1_0 /tmp/qwen3-q1_0.gguf --vocab "$B/qwen3/tokenizer.json"
if want qwen3 && profiles && [ -f /tmp/qwen3-q1_0.gguf ] && left $((budget - 50)) "qwen3-1.7b q1_0 profile"; then
    TERN_WEBGPU_PROFILE=gpu timeout 30 "$B/tern" bench --backend webgpu -m /tmp/qwen3-q1_0.gguf -p 0 -n 16 -r 1 \
        > "$out/families_quick_profile_qwen3.out" 2> "$out/families_quick_profile_qwen3.txt"
    grep -E "^  (lm_head|head_q|matvec|act_q8|rope|attention|argmax|rms_norm|embed)|kernels ran" "$out/families_quick_profile_qwen3.txt" | head -16
fi
want phi3 && left $((budget - 45)) "phi-3-mini q4_0" && tg phi-3-mini q4_0 /tmp/phi3-q4_0.gguf
if want phi3 && profiles && [ -f /tmp/phi3-q4_0.gguf ] && left $((budget - 40)) "phi-3-mini q4_0 profile"; then
    TERN_WEBGPU_PROFILE=gpu timeout 30 "$B/tern" bench --backend webgpu -m /tmp/phi3-q4_0.gguf -p 0 -n 16 -r 1 \
        > "$out/families_quick_profile_phi3.out" 2> "$out/families_quick_profile_phi3.txt"
    grep -E "^  (lm_head|head_q|matvec|act_q8|rope|attention|argmax|rms_norm|embed)|kernels ran" "$out/families_quick_profile_phi3.txt" | head -20
fi
for model in llama phi3 qwen3; do
    want "$model" || continue
    case $model in llama) file=/tmp/llama-q4_0.gguf ;; phi3) file=/tmp/phi3-q4_0.gguf ;; qwen3) file=/tmp/qwen3-q1_0.gguf ;; esac
    [ -f "$file" ] || continue
    name=$(basename "$file" .gguf)
    list=$tunes
    [ "$model" = llama ] && list=${LLAMA_TUNES-$tunes}
    [ "$model" = phi3 ] && list=${PHI3_TUNES-$tunes}
    [ "$model" = qwen3 ] && list=$qwen_tunes
    for tune in $list; do
        t=$tune
        [ "$t" = - ] && t=
        left $((budget - 12)) "$name with $tune" && TERN_WEBGPU_TUNE=$t bench_line "$name-$tune" "$file"
    done
done
echo "done in ${SECONDS}s"
