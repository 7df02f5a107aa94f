#!/usr/bin/env bash
# Issue 54 on the lent GPU machine (the `device` tool): the llama / qwen3 / phi3 families on WebGPU.
#   1. tern_webgpu_tests' WebGpuFamily* suites: matmul (F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q6_K), matmul_glu,
#      the one-token matvec_q8 (linear / linear_glu with the fused norm), the Q-block LM head,
#      rope_kv_append, the tiny HF llama / qwen3 models (F32, Q8_0, Q4_0) and a paged batch of two
#      sequences (BatchEngine: rope_kv_append_paged) against the CPU reference, bit for bit, on this
#      GPU (its fma and division paths, not SwiftShader's);
#   2. greedy text, webgpu vs cpu, on 2-layer synth files of llama-3.2-1b and phi-3-mini (Q4_0),
#      llama-3.2-1b as Q1_0 (Bonsai's type; synth qwen3-1.7b needs the Qwen tokenizer files, which
#      the device lacks) and falcon3-1b (I2_S, Falcon3-1.58bit's; head_dim 256); a run that fails or
#      prints nothing counts as a difference;
#   3. decode and prompt tokens/s of the full synth llama-3.2-1b Q4_0 and phi-3-mini Q4_0 with
#      `tern bench --roofline` (GB/s as a % of the measured copy bandwidth; issue 54's target is
#      >= 45%), llama-3.2-1b as Q4_K, Q8_0, Q1_0 (decode); then llama-3.2-1b tg64 with matvec_q8's rows per workgroup
#      (family_rows) 4 / 16 / 32 and without its weight prefetch (family_prefetch=0) against the
#      defaults, two alternating rounds, and a per-kernel GPU profile of llama-3.2-1b decode
#      (TERN_WEBGPU_PROFILE=gpu, families_profile_llama.txt). About 4 minutes of device time.
# Carry .gl and .devicebin (tools/device/pack_devicebin.sh; see webgpu_gpu_run.sh for .gl).
# Usage (on the device): tools/device/families_run.sh [bench args...]   Results: $OUT/families_*.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
export TERN_PHI3_VOCAB=$PWD/tests/data/llama-vocab/ggml-vocab-phi-3.gguf TERN_TEST_DATA_DIR=$PWD/tests/data
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader

echo "== family kernels and tiny models vs the CPU reference on this GPU"
"$B/tern_webgpu_tests" --gtest_filter='*WebGpuFamily*' > "$out/families_tests.txt" 2>&1
grep -E "FAILED|PASSED|Failure|first at|SKIPPED" "$out/families_tests.txt" | head -20

echo "== greedy text, webgpu vs cpu (2-layer synth files)"
for spec in llama-3.2-1b:q4_0 phi-3-mini:q4_0 llama-3.2-1b:q1_0 falcon3-1b:i2_s; do
    shape=${spec%%:*} t=${spec##*:}
    m=/tmp/$shape-$t-2l.gguf
    "$B/tern" synth "$shape" --type "$t" --layers 2 -o "$m" 2>&1 | tail -1
    "$B/tern" run -m "$m" --backend webgpu -p "The ship" -n 16 --temp 0 -c 256 --no-display-prompt \
        > "$out/families_$shape-$t-gpu.txt" 2> "$out/families_$shape-$t-gpu.err"
    gpu_rc=$?
    # (Q1_0 with Q8_0 blocks: only the scalar reference on the CPU)
    isa=; [ "$t" = q1_0 ] && isa=ref
    ${isa:+env TERN_CPU_ISA=$isa} "$B/tern" run -m "$m" --backend cpu -t 16 -p "The ship" -n 16 --temp 0 -c 256 \
        --no-display-prompt > "$out/families_$shape-$t-cpu.txt" 2> "$out/families_$shape-$t-cpu.err"
    cpu_rc=$?
    tail -1 "$out/families_$shape-$t-gpu.err"
    if [ $gpu_rc -ne 0 ] || [ $cpu_rc -ne 0 ] || [ ! -s "$out/families_$shape-$t-gpu.txt" ]; then
        echo "$spec: a run failed (webgpu rc $gpu_rc, cpu rc $cpu_rc) or printed nothing"
    elif cmp -s "$out/families_$shape-$t-gpu.txt" "$out/families_$shape-$t-cpu.txt"; then
        echo "$spec: greedy text identical"
    else
        echo "$spec: greedy text differs"
    fi
done

echo "== bench (full synth files, Q4_0)"
[ $# -gt 0 ] || set -- -p 512 -n 128 -r 3
for shape in llama-3.2-1b phi-3-mini; do
    "$B/tern" synth "$shape" -o "/tmp/$shape.gguf" 2>&1 | tail -1
    "$B/tern" bench --backend webgpu -m "/tmp/$shape.gguf" --roofline "$@" 2>&1 | tee "$out/families_bench_$shape.md" | tail -6
done

echo "== llama-3.2-1b as Q4_K (matvec_q8k.wgsl), Q8_0 and Q1_0 (Bonsai's type), decode"
for t in q4_k q8_0 q1_0; do
    "$B/tern" synth llama-3.2-1b --type $t -o "/tmp/llama-$t.gguf" 2>&1 | tail -1
    "$B/tern" bench --backend webgpu -m "/tmp/llama-$t.gguf" --roofline -p 0 -n 64 -r 3 > "$out/families_bench_llama_$t.md" 2>&1
    tail -1 "$out/families_bench_llama_$t.md"
done

echo "== llama-3.2-1b, 1 and 8 streams in one batch (BatchEngine: rope_kv_append_paged, paged attention)"
"$B/tern" bench --backend webgpu -m /tmp/llama-3.2-1b.gguf -p 0 -n 32 -r 1 --parallel 1,8 > "$out/families_parallel.md" 2>&1
tail -4 "$out/families_parallel.md"

echo "== llama-3.2-1b tg64: matvec_q8 tunables (family_rows default 8, family_prefetch default 8), alternating"
for round in 1 2; do
    for tune in default family_rows=4 family_rows=16 family_rows=32 family_prefetch=0; do
        t=$tune; [ "$t" = default ] && t=
        TERN_WEBGPU_TUNE=$t "$B/tern" bench --backend webgpu -m /tmp/llama-3.2-1b.gguf -p 0 -n 64 -r 3 \
            > "$out/families_tune_${tune}_$round.md" 2>&1
        echo "round $round $tune: $(grep -E '\| tg64 ' "$out/families_tune_${tune}_$round.md" | awk -F'|' '{print $8}')"
    done
done

echo "== per-kernel GPU profile, llama-3.2-1b decode"
TERN_WEBGPU_PROFILE=gpu timeout 120 "$B/tern" bench --backend webgpu -m /tmp/llama-3.2-1b.gguf -p 0 -n 32 -r 1 \
    > "$out/families_profile_llama.out" 2> "$out/families_profile_llama.txt"
grep -E "^  [a-z_]+|kernels ran" "$out/families_profile_llama.txt" | head -30
