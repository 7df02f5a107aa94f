#!/usr/bin/env bash
# One device command for a before/after comparison on the lent GPU: alternating rounds of
# .devicebin/tern (this tree: tools/device/pack_devicebin.sh) against .devicebin/BASE (an older build:
# tools/device/pack_base.sh COMMIT BASE) on tg128, pp512 and tg64 at a depth of 2048 of a synthetic
# BitNet b1.58 2B4T, the order of the two flipped every round; then the new build's GPU test suite
# and a greedy text comparison with the CPU backend. Logs and JSON go under $OUT; summary.txt has the
# per-round medians and, last, each test's range of medians per build.
# Carries what webgpu_gpu_run.sh carries (.gl and .devicebin; see its header).
# Usage (on the device): tools/device/tidy_ab.sh [ROUNDS (3)] [BASE (tern_base)]
# Stays within TIDY_AB_BUDGET_S seconds (default 510): rounds that would not fit are skipped, and
# the test suite gets what is left (at least 60 s).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rounds=${1:-3}
base=${2:-tern_base}
budget=${TIDY_AB_BUDGET_S:-510}
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
for bin in tern "$base" tern_webgpu_tests; do
    [ -x "$B/$bin" ] || { echo "tidy_ab: .devicebin/$bin is missing" | tee -a "$out/summary.txt"; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
model=/tmp/synth-2b4t.gguf
"$B/tern" synth bitnet-2b4t -o "$model" --seed 1 2>&1 | tail -1
tests=("tg128|-p 0 -n 128 -r 10" "pp512|-p 512 -n 0 -r 5" "tg64@d2048|-p 0 -n 64 -d 2048 -r 5")
round_s=0
for r in $(seq "$rounds"); do
    if [ "$round_s" -gt 0 ] && [ $((SECONDS + round_s + 90)) -gt "$budget" ]; then
        echo "tidy_ab: round $r skipped (budget ${budget}s, a round takes ~${round_s}s)" | tee -a "$out/summary.txt"
        break
    fi
    t0=$SECONDS
    arms=(tern "$base")
    [ $((r % 2)) -eq 0 ] && arms=("$base" tern)
    for t in "${tests[@]}"; do
        name=${t%%|*}
        args=${t#*|}
        for bin in "${arms[@]}"; do
            log="$out/${name//@/_}.$bin.r$r"
            # shellcheck disable=SC2086
            timeout 150 "$B/$bin" bench --backend webgpu -m "$model" $args --json > "$log.json" 2> "$log.err"
            python3 tools/device/bench_summary.py "round $r $bin" < "$log.json" | tee -a "$out/summary.txt" ||
                tail -3 "$log.err"
        done
    done
    round_s=$((SECONDS - t0))
done
python3 - "$out" "$base" <<'EOF' | tee -a "$out/summary.txt"
# Each test's per-round medians of tokens/s, per build: the range and every value.
import glob, json, os, statistics, sys
out, base = sys.argv[1], sys.argv[2]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*.r*.json"))):
    name, bin_, _ = os.path.basename(path)[: -len(".json")].rsplit(".", 2)
    try:
        tests = json.load(open(path))
    except (ValueError, OSError):
        continue
    for t in tests:
        rows.setdefault((name, bin_), []).append(statistics.median(t["samples_ts"]))
print("== medians of each round (tokens/s)")
for (name, bin_), meds in sorted(rows.items()):
    print(f"{name:<12} {bin_:<10} {min(meds):10.1f} - {max(meds):10.1f}   " + " ".join(f"{m:.1f}" for m in meds))
EOF
echo "== greedy text, webgpu vs cpu (default model)"
"$B/tern" run --backend webgpu -p "The ship" -n 48 --temp 0 --no-display-prompt > "$out/gpu.txt" 2> "$out/gpu.err"
"$B/tern" run --backend cpu -t 16 -p "The ship" -n 48 --temp 0 --no-display-prompt > "$out/cpu.txt" 2>/dev/null
cmp -s "$out/gpu.txt" "$out/cpu.txt" && echo "greedy text identical" || echo "greedy text differs (gpu.txt, cpu.txt)"
left=$((budget - SECONDS))
[ "$left" -lt 60 ] && left=60
echo "== GPU test suite of this build (${left}s at most)"
timeout "$left" "$B/tern_webgpu_tests" --gtest_brief=1 > "$out/gpu_tests.txt" 2>&1
echo "exit $?"
grep -E "FAILED|PASSED|SKIPPED \]" "$out/gpu_tests.txt" | head -20
