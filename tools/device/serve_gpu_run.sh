#!/usr/bin/env bash
# tern serve on the lent GPU machine (the `device` tool), issue 53: tools/serve/serve_bench.py on
# `tern synth bitnet-2b4t` with --backend webgpu (aggregate decode tokens/s at 1, 8, 32 and 64
# concurrent streams with per-stream ms/token, and the time to first token of a 512-token prompt while
# 8 streams decode), then the same at one stream on the shipped model. Carry .gl and .devicebin (made
# by tools/device/pack_devicebin.sh, which packs tern and the cpp-httplib libraries it needs); the
# machine's python3 runs the load script. Results: $OUT/serve_bench_*.md and .json.
# Usage (on the device): tools/device/serve_gpu_run.sh        Environment: STREAMS (default
# 1,8,32,64), DURATION (seconds per stream count, default 15), CTX (-c per request, default 2048).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
"$B/tern" synth bitnet-2b4t -o /tmp/synth-2b4t.gguf --seed 1 2>&1 | tail -1
PYTHONUNBUFFERED=1 python3 tools/serve/serve_bench.py --bin "$B/tern" -m /tmp/synth-2b4t.gguf --backend webgpu \
    --streams "${STREAMS:-1,8,32,64}" --duration "${DURATION:-15}" -c "${CTX:-2048}" \
    --json "$out/serve_bench_2b4t.json" 2> "$out/serve_bench_2b4t.log" | tee "$out/serve_bench_2b4t.md"
PYTHONUNBUFFERED=1 python3 tools/serve/serve_bench.py --bin "$B/tern" --backend webgpu --streams 1,8 --duration 10 \
    -c 1024 --ttft-tokens 512 --json "$out/serve_bench_32m.json" 2> "$out/serve_bench_32m.log" | tee "$out/serve_bench_32m.md"
