#!/usr/bin/env bash
# Runs tern's WebGPU backend on the lent NVIDIA machine (the `device` tool): kernel tests against the
# CPU reference, a greedy comparison with the CPU backend, and `tern bench` on a synthetic 2B4T.
# The machine has NVIDIA's Vulkan driver but no Vulkan loader and no package registry, so the call
# carries: .gl (Debian's .debs of libvulkan1 and of glvnd, which NVIDIA's Vulkan ICD library needs:
# libglvnd0 libgl1 libglx0 libegl1 libgles2 libopengl0; with libvulkan1 alone the loader finds no
# driver) and .devicebin (tern, tern_webgpu_tests, libpcre2-8.so.0, dawn.node.gz from npm webgpu,
# libwebgpu_wrapper.so.gz from npm bun-webgpu-linux-x64, the Llama-3 tokenizer.json.gz). Make .gl
# once: mkdir -p .gl /tmp/amd64/partial; o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64
# -oDir::State::Lists=/tmp/amd64'; apt-get $o update; (cd .gl && apt-get $o download libvulkan1
# libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2). Make .devicebin with
# tools/device/pack_devicebin.sh. Results go to $OUT.
# Usage (on the device): tools/device/webgpu_gpu_run.sh [bench args...]
# Environment: TERN_DEVICE_NO_TESTS=1 skips the GPU test suite; TERN_DEVICE_VARIANTS /
# TERN_DEVICE_PP_VARIANTS list settings (e.g. "TERN_WEBGPU_TUNE=decode_wg=128
# TERN_WEBGPU_TUNE=steps_per_submit=1") for one extra tg / pp512 run each; TERN_DEVICE_PROFILE=1
# adds a serialized per-kernel profile (wall time), TERN_DEVICE_PROFILE=gpu one from GPU timestamps
# (TERN_WEBGPU_PROFILE=gpu);
# TERN_DEVICE_DEFAULT_BENCH=1 also benches the shipped default model.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader

echo "== kernels vs CPU reference on this GPU"
[ -n "${TERN_DEVICE_NO_TESTS:-}" ] || "$B/tern_webgpu_tests" --gtest_brief=1 > "$out/gpu_tests.txt" 2>&1
grep -E "numerics|logit rows|FAILED|PASSED|Failure|actual|greedy step" "$out/gpu_tests.txt" | head -40
echo "== default model, greedy, webgpu vs cpu"
"$B/tern" run --backend webgpu -p "The ship" -n 48 --temp 0 --no-display-prompt > "$out/gpu.txt" 2> "$out/gpu.err"; tail -2 "$out/gpu.err"
"$B/tern" run --backend cpu -t 16 -p "The ship" -n 48 --temp 0 --no-display-prompt > "$out/cpu.txt" 2>/dev/null
cmp -s "$out/gpu.txt" "$out/cpu.txt" && echo "greedy text identical" || { echo "greedy text differs:"; cat "$out/gpu.txt" "$out/cpu.txt"; }
echo "== synth bitnet-2b4t"
"$B/tern" synth bitnet-2b4t -o /tmp/synth-2b4t.gguf --seed 1 2>&1 | tail -1
echo "== bench"
[ $# -gt 0 ] || set -- -p 512 -n 128 -r 3
# GPU clocks and power sampled every 50 ms during the bench (are the clocks up during decode?).
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv,noheader -lms 50 \
    > "$out/clocks.csv" 2>/dev/null &
smi=$!
"$B/tern" bench --backend webgpu -m /tmp/synth-2b4t.gguf "$@" 2>&1 | tee "$out/bench.md" | tail -8
kill $smi 2>/dev/null
echo "GPU SM clock during the bench (MHz): $(cut -d, -f2 "$out/clocks.csv" | sort -n | uniq -c | sort -rn | head -5 | tr '\n' ' ')"
# Tuning variants: $TERN_DEVICE_VARIANTS holds space-separated environment settings (e.g.
# "TERN_WEBGPU_TUNE=decode_wg=128 TERN_WEBGPU_TUNE=steps_per_submit=1"); each gets one tg run.
for v in ${TERN_DEVICE_VARIANTS:-}; do
    echo "== variant $v"
    env "$v" "$B/tern" bench --backend webgpu -m /tmp/synth-2b4t.gguf -p 0 -n 128 -r 2 2>&1 | tail -1
done
if [ "${TERN_DEVICE_PROFILE:-}" = gpu ]; then
    echo "== per-kernel GPU time (TERN_WEBGPU_PROFILE=gpu: timestamps around every dispatch; tg128, warm-up included)"
    TERN_WEBGPU_PROFILE=gpu "$B/tern" bench --backend webgpu -m /tmp/synth-2b4t.gguf -p 0 -n 128 -r 1 2>&1 | grep -v "^|" | head -60
elif [ -n "${TERN_DEVICE_PROFILE:-}" ]; then
    echo "== per-kernel wall time (TERN_WEBGPU_PROFILE=1 serializes every dispatch: ratios only)"
    TERN_WEBGPU_PROFILE=1 "$B/tern" bench --backend webgpu -m /tmp/synth-2b4t.gguf -p 0 -n 16 -r 1 2>&1 | grep -v "^|" | head -40
fi
# $TERN_DEVICE_DEFAULT_BENCH=1: the same bench on the shipped default model too.
if [ -n "${TERN_DEVICE_DEFAULT_BENCH:-}" ]; then
    echo "== bench, default model"
    "$B/tern" bench --backend webgpu "$@" 2>&1 | tail -2
fi
# $TERN_DEVICE_PP_VARIANTS: the same for prompt processing (pp512 only).
for v in ${TERN_DEVICE_PP_VARIANTS:-}; do
    echo "== pp variant $v"
    env "$v" "$B/tern" bench --backend webgpu -m /tmp/synth-2b4t.gguf -p 512 -n 0 -r 2 2>&1 | tail -1
done
