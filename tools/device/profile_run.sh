#!/usr/bin/env bash
# Where the GPU time goes, per kernel (TERN_WEBGPU_PROFILE=gpu: GPU timestamps around each dispatch),
# for the cases the open issues are about: 2B4T decode at depth 0 and 4096 (#52), `tern run` with the
# default context (4096) against -c 600 (#52: run vs bench), 64 streams decoded together (#53), and
# llama-3.2-1b / phi-3-mini Q4_0 decode (#54). Plus plain timings of `tern run -n 512` at -c 600 and
# -c 4096 (two alternating rounds). About 4 minutes of device time.
# PARTS (default "timings base sampled families") picks sections: `sampled` profiles `tern run` with the
# default sampler and with --top-k 0 --top-p 0.9 beside greedy (#52); `families` adds qwen3-1.7b Q1_0.
# Carry .gl and .devicebin (tools/device/pack_devicebin.sh). Results: $OUT/profile_*.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-/tmp/out}
out=/tmp/profile_out  # (packed into $OUT/profile.tgz at the end: the device tool brings back few files)
rm -rf "$out" && mkdir -p "$out" "$final"
trap 'tar czf "$final/profile.tgz" -C "$out" .' EXIT
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
m=/tmp/synth-2b4t.gguf
"$B/tern" synth bitnet-2b4t -o "$m" --seed 1 2>&1 | tail -1
parts=" ${PARTS:-timings base sampled families} "
want() { [[ $parts == *" $1 "* ]]; }
prof() {  # name, then the tern command line
    local name=$1; shift
    TERN_WEBGPU_PROFILE=gpu timeout 120 "$B/tern" "$@" > "$out/profile_$name.out" 2> "$out/profile_$name.txt"
    echo "$name: rc $?"; grep -A3 "kernels ran" "$out/profile_$name.txt" | head -2
}
if want timings; then
echo "== plain timings: tern run -n 512 greedy, -c 600 vs -c 4096 (2 rounds)"
for r in 1 2; do
    for c in 600 4096; do
        "$B/tern" run --backend webgpu -m "$m" -p "Once upon a time" -n 512 --temp 0 -c $c --no-display-prompt \
            > /dev/null 2> "$out/run_c$c.r$r.err"
        echo "c=$c round $r: $(grep -E '^tern: load' "$out/run_c$c.r$r.err")"
    done
done
"$B/tern" bench --backend webgpu -m "$m" -p 0 -n 512 -r 2 2>&1 | tail -1
fi
echo "== GPU profiles"
if want sampled; then
    run=(run --backend webgpu -m "$m" -p "Once upon a time" -n 128 --no-display-prompt --seed 7)
    prof run_greedy "${run[@]}" --temp 0
    prof run_sampled_default "${run[@]}"
    prof run_sampled_topp "${run[@]}" --top-k 0 --top-p 0.9
fi
if want base; then
prof bench_tg64 bench --backend webgpu -m "$m" -p 0 -n 64 -r 1
prof run_c4096 run --backend webgpu -m "$m" -p "Once upon a time" -n 64 --temp 0 -c 4096 --no-display-prompt
prof run_c600 run --backend webgpu -m "$m" -p "Once upon a time" -n 64 --temp 0 -c 600 --no-display-prompt
prof bench_d4096 bench --backend webgpu -m "$m" -p 0 -n 32 -d 4096 -r 1
prof parallel64 bench --backend webgpu -m "$m" -p 0 -n 16 --parallel 64 -r 1
for shape in llama-3.2-1b phi-3-mini; do
    "$B/tern" synth "$shape" -o "/tmp/$shape.gguf" 2>&1 | tail -1
    prof "$shape" bench --backend webgpu -m "/tmp/$shape.gguf" -p 0 -n 32 -r 1
done
fi
if want families; then
    "$B/tern" synth qwen3-1.7b --type q1_0 -o /tmp/qwen3-1.7b-q1_0.gguf 2>&1 | tail -1
    prof qwen3-1.7b-q1_0 bench --backend webgpu -m /tmp/qwen3-1.7b-q1_0.gguf -p 0 -n 32 -r 1
fi
