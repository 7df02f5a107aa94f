#!/usr/bin/env bash
# Alternating bench runs of tern builds and settings on the lent GPU (the `device` tool), for A/B
# figures that slow repetitions and clock states cannot bias: every arm runs once per round.
# $AB_BENCH sets the bench arguments (default "-p 0 -n 128 -r 10": tg128; "-p 512 -n 0 -r 5": pp512);
# each arm prints the median and the slowest repetition (tools/device/bench_summary.py).
# Carries what webgpu_gpu_run.sh carries; extra binaries go into .devicebin too (e.g. a tern built
# from an older commit as .devicebin/tern_old: tools/device/pack_base.sh COMMIT tern_old).
# Usage (on the device): tools/device/webgpu_ab.sh ROUNDS ARM... where an ARM is
#   BINARY[:VAR=value[,VAR=value...]]   e.g. tern  tern_old  tern:TERN_WEBGPU_TUNE=decode_wg_long=256
# where a '+' in a value stands for a comma (tern:TERN_WEBGPU_TUNE=decode_wg=128+steps_per_submit=2).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rounds=$1
shift
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
"$B/tern" synth bitnet-2b4t -o /tmp/synth-2b4t.gguf --seed 1 2>&1 | tail -1
for r in $(seq "$rounds"); do
    for arm in "$@"; do
        bin=${arm%%:*}
        vars=()
        [ "$arm" != "$bin" ] && IFS=, read -ra vars <<< "${arm#*:}"
        vars=("${vars[@]//+/,}")
        # shellcheck disable=SC2086
        env "${vars[@]}" "$B/$bin" bench --backend webgpu -m /tmp/synth-2b4t.gguf ${AB_BENCH:--p 0 -n 128 -r 10} --json 2>/tmp/ab_stderr.txt |
            python3 tools/device/bench_summary.py "round $r $arm" || tail -3 /tmp/ab_stderr.txt
    done
done
