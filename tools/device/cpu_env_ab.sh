#!/usr/bin/env bash
# A/B of CPU-backend arms chosen by environment variables (e.g. TERN_CPU_PAGE_AHEAD=0) on the lent
# GPU machine's CPU (issue 51: a quieter ruler than a shared development VM): alternating rounds of
# `.devicebin/tern bench --roofline --json` on a synthetic BitNet b1.58 2B4T, each arm pinned to the
# same cores, the arms' order rotated every round. One line per run (arm, t/s, GB/s, % of the read
# bursts around it) in $OUT/cpu_env_ab.txt, then each arm's median; raw JSON in $OUT/cpu_env_ab.jsonl.
# Carries .devicebin (tools/device/pack_devicebin.sh; only tern is used, no GPU).
# Usage (on the device): ARMS="TERN_X=0 TERN_X=1" tools/device/cpu_env_ab.sh
# Environment: ARMS (space-separated; an arm is VAR=VALUE[,VAR=VALUE...] or - for none; required),
# BENCH (default "-t 1 -p 0 -n 64 -r 1"), CPUS (taskset list, default 2), ROUNDS (default 3),
# BUDGET_S (default 150: no run starts after it).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-/tmp/out}
mkdir -p "$out"
B=$PWD/.devicebin
[ -f "$B/tern.gz" ] && gunzip -kf "$B/tern.gz"
chmod +x "$B/tern" 2>/dev/null
[ -x "$B/tern" ] || { echo "cpu_env_ab: .devicebin/tern is missing" | tee -a "$out/cpu_env_ab.txt"; exit 2; }
[ -n "${ARMS:-}" ] || { echo "cpu_env_ab: set ARMS" | tee -a "$out/cpu_env_ab.txt"; exit 2; }
read -r -a arms <<< "$ARMS"
bench=${BENCH:--t 1 -p 0 -n 64 -r 1}
budget=${BUDGET_S:-150}
lscpu | grep -E "Model name|^CPU\(s\)|L2|L3" > "$out/lscpu.txt"
model=/tmp/synth-2b4t.gguf
[ -f "$model" ] || "$B/tern" synth bitnet-2b4t -o "$model" --seed 1 2>&1 | tail -1
: > "$out/cpu_env_ab.jsonl"
n=${#arms[@]}
for r in $(seq "${ROUNDS:-3}"); do
    for k in $(seq 0 $((n - 1))); do
        [ "$SECONDS" -ge "$budget" ] && { echo "(budget ${budget}s reached in round $r)" | tee -a "$out/cpu_env_ab.txt"; break 2; }
        arm=${arms[$(((k + r - 1) % n))]}
        env_args=()
        [ "$arm" != "-" ] && IFS=, read -r -a env_args <<< "$arm"
        # shellcheck disable=SC2086
        j=$(env "${env_args[@]}" taskset -c "${CPUS:-2}" "$B/tern" bench -m "$model" $bench --roofline --json 2>/dev/null)
        echo "$j" | python3 -c '
import json, sys
arm = sys.argv[1]
r = [x for x in json.load(sys.stdin) if x.get("n_gen", 0) > 0][0]
print(json.dumps({"arm": arm, **r}), file=open(sys.argv[2], "a"))
print("%-28s %.2f t/s  %.2f GB/s  %.1f%% of read BW (bursts %s GB/s)" % (arm, r["avg_ts"], r["gbps"],
      r["pct_read_bandwidth_median"], " ".join("%.1f" % x for x in r["read_gbps_around_runs"])))' "$arm" "$out/cpu_env_ab.jsonl" \
            | tee -a "$out/cpu_env_ab.txt" || echo "$arm FAILED" | tee -a "$out/cpu_env_ab.txt"
    done
done
python3 - "$out/cpu_env_ab.jsonl" <<'PY' | tee -a "$out/cpu_env_ab.txt"
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for arm in dict.fromkeys(r["arm"] for r in rows):
    v = [r for r in rows if r["arm"] == arm]
    print("median %-28s %.2f t/s  %.1f%% of read BW  (n=%d)" % (arm, st.median(r["avg_ts"] for r in v),
          st.median(r["pct_read_bandwidth_median"] for r in v), len(v)))
PY
