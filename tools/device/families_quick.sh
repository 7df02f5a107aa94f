#!/usr/bin/env bash
# Issue 54, the short run (about 2.5 minutes of device time; families_run.sh is the long one):
#   1. tern_webgpu_tests' WebGpuFamily* suites against the CPU reference on this GPU;
#   2. greedy text, webgpu vs cpu, on 2-layer synth llama-3.2-1b files as Q4_0 and Q1_0 (Bonsai's
#      type; the CPU side is the scalar reference, the only CPU path for Q1_0 with Q8_0 blocks) — a
#      run that fails or prints nothing counts as a difference;
#   3. decode (tg64, --roofline) of the full synth llama-3.2-1b as Q4_0, Q4_K and Q1_0, and phi-3-mini
#      Q4_0;
#   4. a per-kernel GPU profile of llama-3.2-1b Q4_0 decode (families_quick_profile.txt).
# Carry .gl and .devicebin (tools/device/pack_devicebin.sh). Results: $OUT/families_quick_*.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
export TERN_TEST_DATA_DIR=$PWD/tests/data TERN_PHI3_VOCAB=$PWD/tests/data/llama-vocab/ggml-vocab-phi-3.gguf
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader

echo "== family kernels vs the CPU reference on this GPU"
"$B/tern_webgpu_tests" --gtest_filter='*WebGpuFamily*' > "$out/families_quick_tests.txt" 2>&1
grep -E "FAILED|PASSED|first at|SKIPPED" "$out/families_quick_tests.txt" | head -20

echo "== greedy text, webgpu vs cpu (2-layer synth llama-3.2-1b)"
for t in q4_0 q1_0; do
    m=/tmp/llama-$t-2l.gguf
    "$B/tern" synth llama-3.2-1b --type "$t" --layers 2 -o "$m" > /dev/null 2>&1
    isa=; [ "$t" = q1_0 ] && isa=ref
    "$B/tern" run -m "$m" --backend webgpu -p "The ship" -n 16 --temp 0 -c 256 --no-display-prompt \
        > "$out/families_quick_$t-gpu.txt" 2> "$out/families_quick_$t-gpu.err"
    gpu_rc=$?
    ${isa:+env TERN_CPU_ISA=$isa} "$B/tern" run -m "$m" --backend cpu -t 16 -p "The ship" -n 16 --temp 0 -c 256 \
        --no-display-prompt > "$out/families_quick_$t-cpu.txt" 2> "$out/families_quick_$t-cpu.err"
    cpu_rc=$?
    tail -1 "$out/families_quick_$t-gpu.err"
    if [ $gpu_rc -ne 0 ] || [ $cpu_rc -ne 0 ] || [ ! -s "$out/families_quick_$t-gpu.txt" ]; then
        echo "llama $t: a run failed (webgpu rc $gpu_rc, cpu rc $cpu_rc) or printed nothing"
    elif cmp -s "$out/families_quick_$t-gpu.txt" "$out/families_quick_$t-cpu.txt"; then
        echo "llama $t: greedy text identical"
    else
        echo "llama $t: greedy text differs"
    fi
done

echo "== decode tg64 (full synth files)"
for spec in llama-3.2-1b:q4_0 llama-3.2-1b:q4_k llama-3.2-1b:q1_0 phi-3-mini:q4_0; do
    shape=${spec%%:*} t=${spec##*:}
    m=/tmp/$shape-$t.gguf
    "$B/tern" synth "$shape" --type "$t" -o "$m" > /dev/null 2>&1 || echo "$spec: synth failed"
    "$B/tern" bench --backend webgpu -m "$m" --roofline -p 0 -n 64 -r 3 > "$out/families_quick_bench_$shape-$t.md" 2>&1
    echo "$spec: $(grep -E '\| tg64 ' "$out/families_quick_bench_$shape-$t.md" | awk -F'|' '{print $8 "t/s |" $11 " disp/tok |" $12 " MB/tok |" $14 "% copy BW"}')"
done

echo "== per-kernel GPU profile, llama-3.2-1b Q4_0 decode"
TERN_WEBGPU_PROFILE=gpu timeout 60 "$B/tern" bench --backend webgpu -m /tmp/llama-3.2-1b-q4_0.gguf -p 0 -n 16 -r 1 \
    > "$out/families_quick_profile.out" 2> "$out/families_quick_profile.txt"
grep -E "^  [a-z_]+|kernels ran" "$out/families_quick_profile.txt" | head -30
