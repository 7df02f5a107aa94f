#!/usr/bin/env bash
# Issue 55 on the lent GPU: the browser build's speed on a real GPU. Chromium cannot be carried there,
# so the page's engine (tern.wasm + web/tern-engine.js + web/webgpu-library.js: the same WGSL, the
# same webgpu.h on navigator.gpu, JSPI waits) runs under Node with navigator.gpu from Dawn's Node
# bindings (tools/web_node_run.mjs), next to native `tern run` on the same file, alternating:
#   1. a synthetic BitNet b1.58 2B4T (tern synth bitnet-2b4t --seed 1; with `all` also the shipped
#      tern-32m-en), 128 tokens after "Once upon a time", greedy and sampled (--temp 0.7 --seed 42:
#      the default chain, sampled on the device): decode tokens/s (tokens 2..n over the decode steps,
#      as `tern run` reports) of the wasm engine against native, ROUNDS alternating rounds;
#   2. the same text from both for each setting (greedy and seeded sampling);
#   3. native `tern bench` tg128 on the 2B4T file for reference;
#   4. the wasm engine in steady state, as `tern bench` measures native: 2 s of untimed generation
#      first (pipelines, GPU clocks, V8's optimizing tier), then 3 timed runs each of greedy and
#      sampled, with the main thread's CPU profile of the load and of the timed runs summed up by
#      tools/cpuprofile_summary.mjs (web.prof/*.txt: wasm, webgpu.h calls into dawn.node, GC, idle);
#   4b. with a base build packed along (pack_webbin.sh BASE_WEB_DIR=...): step 4 for it, unprofiled;
#   5. step 4 again without the profiler (the figures to compare with 4b and 6);
#   6. the same with Dawn's robustness off, 8 runs each (native runs with it and validation off; a
#      browser cannot; of the three features, the one whose arm had no slow runs on 2026-11-28);
#   7. the GPU's clocks (nvidia-smi every 50 ms through the whole script) during each timed run, next to
#      its tokens/s, the host's ms per step recording, the main thread's and the process's CPU time and
#      the cgroup's throttled time (tools/device/clocks_by_run.mjs): whether the ~500 and ~800 tokens/s
#      modes go with the GPU's clocks (2026-11-28: no, fixed at 1980 MHz) or with the host.
# Carry [".gl", ".webbin"] (pack .webbin here with tools/device/pack_webbin.sh). summary.txt holds the
# figures; every log (and web.prof/: profiles and their summaries) is in $OUT/web.tgz.
# Usage (on the device): tools/device/web_run.sh [ROUNDS (1)] [TOKENS (128)] [big | all | smoke | causes | ab | timedawn | glue | pin]
# big (default): the 2B4T file only, about 130 s of device time; all: the shipped model too; smoke:
# the small model only, on whatever adapter there is (SwiftShader too): a check of this script on a
# machine without a GPU (with VK_ICD_FILENAMES set to SwiftShader's), before device time is spent;
# causes: only the arms that look for the slow host mode's cause (the block below; ~100 s);
# ab: steps 1-3, then this build and the base build (BASE_WEB_DIR) alternating, 8 greedy steady-state
# runs each, and this build with dawn.node's calls timed (web_node_run.mjs --time-dawn), with and
# without the driver's shader disk cache, twice (~170 s); timedawn: per round, 8 greedy runs each with
# dawn.node's calls timed, with the driver's cache as it is and a fresh one, and untimed; a table of
# ms per step by call and arm (tools/device/dawn_calls_table.mjs; 2 rounds ~150 s); glue: per round, the
# TERN_WEBGPU_TUNE settings in GLUE_ARMS (default: the defaults alone), each untimed and
# (GLUE_TIMED=1, default) timed, native tern bench per round, each arm's greedy text against native's
# (2 rounds of 2 arms ~110 s; GLUE_TIMED=0 ~65 s; STEP_COST=N first runs N rounds of
# tools/dawn_step_cost.mjs, a step's host cost by bind-group layout and dispatch form); pin: per round, every CPU's speed at host_probe.mjs's
# probes (cpu_scan.mjs), then 8 greedy runs each with the main thread on the fastest CPU, on the
# slowest and unpinned, and whether a Chromium and its libraries are there (2 rounds ~100 s).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rounds=${1:-1}
n=${2:-128}
mode=${3:-big}
out=${OUT:-/tmp/out}
log=$out/logs  # every log, packed into $out/web.tgz at the end (the device tool returns only a few files)
mkdir -p "$out" "$log"
trap '[ -n "${clocks_pid:-}" ] && kill "$clocks_pid" 2>/dev/null; tar -C "$out" -czf "$out/web.tgz" logs && rm -rf "$log"' EXIT
# shellcheck source=tools/device/webbin_env.sh
. tools/device/webbin_env.sh
export LD_LIBRARY_PATH=$T:${LD_LIBRARY_PATH:-}
sum() { tee -a "$out/summary.txt"; }
now_ms() { date +%s%3N; }
clocks_pid=
if [ "$mode" != smoke ]; then  # the GPU's clocks all along (step 7), stopped at the end
    line_buffered=(); command -v stdbuf >/dev/null && line_buffered=(stdbuf -oL)
    "${line_buffered[@]}" nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw \
        --format=csv,noheader,nounits -lms 50 > "$log/clocks.csv" 2> "$log/clocks.err" &
    clocks_pid=$!
fi

nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
echo "node: $("$T/node" --version) (system node: $(command -v node >/dev/null && node --version || echo none))" | sum
"$T/tern" --version 2>&1 | head -1 | sum
# The host's CPUs as this process sees them (the page's engine runs on one thread: is it throttled?)
{ echo "cpus: nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); cpuset" \
       "$(cat /sys/fs/cgroup/cpuset.cpus.effective /sys/fs/cgroup/cpuset/cpuset.effective_cpus 2>/dev/null | head -1);" \
       "quota $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null)" \
       "/ $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null)")"; \
  echo "topology: $(lscpu 2>/dev/null | grep -E '^(Thread|Core|Socket|NUMA node)\(s\)' | tr -s ' ' | tr '\n' ';')" \
       "cpu0's SMT siblings $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)"; } | sum
big=/tmp/synth-2b4t.gguf
[ "$mode" = smoke ] || "$T/tern" synth bitnet-2b4t -o "$big" --seed 1 2>&1 | tail -1
small=share/models/tern-32m-en.gguf
prompt="Once upon a time"
models=("$big")
[ "$mode" = all ] && models=("$small" "$big")
web_flags=()
if [ "$mode" = smoke ]; then
    models=("$small")
    web_flags=(--allow-cpu-adapter)
    export TERN_WEBGPU_ALLOW_CPU=1
fi

# 8 greedy steady-state runs of the 2B4T file (2 s of warm-up first) under one setting, each with
# tools/host_probe.mjs's view of the host. arm NAME [PREFIX... --] [NODE FLAGS...]; the wasm from
# $arm_wasm (default this build), with web_node_run.mjs's options $arm_args (e.g. --time-dawn).
arm() {
    local name=$1 prefix=() flags=(); shift
    if [[ " $* " == *" -- "* ]]; then
        while [ "$1" != -- ]; do prefix+=("$1"); shift; done
        shift
    fi
    flags=("$@")
    if [ ${#prefix[@]} -gt 0 ] && ! command -v "${prefix[0]}" >/dev/null; then
        echo "-- $name: skipped (no ${prefix[0]} here)" | sum; return
    fi
    local began=$(now_ms)
    timeout 60 "${prefix[@]}" "$T/node" "${flags[@]}" tools/web_node_run.mjs --model "$big" --wasm-dir "${arm_wasm:-$T/web}" \
        --dawn "$T/dawn.node" -p "$prompt" -n "$n" --temp 0 --seed 42 --repeat 8 --warm-up-s 2 ${arm_args:-} \
        --json-out "$log/causes.$name.json" > "$log/causes.$name.out" 2> "$log/causes.$name.err" &
    local tpid=$! pinner=
    [ -n "${arm_pin_main:-}" ] && { pin_main "$tpid" "$arm_pin_main" > "$log/causes.$name.pin" 2>&1 & pinner=$!; }
    wait "$tpid"
    local rc=$?
    [ -n "$pinner" ] && kill "$pinner" 2>/dev/null
    echo "-- $name (${prefix[*]} node ${flags[*]}; ${arm_wasm:-$T/web} ${arm_args:-}${arm_pin_main:+; main thread on cpu $arm_pin_main}): rc $rc, $(( $(now_ms) - began )) ms" | sum
    grep -E 'loaded in' "$log/causes.$name.err" | sed 's/^web_node_run: //; s/ on webgpu.*//' | sum
    grep -E 'run [0-9]:' "$log/causes.$name.err" | sed 's/^web_node_run: temp 0 //; s/ tokens, prompt [^,]*,/,/' \
        | sed 's/ over 127 decode steps (greedy on the device)//' | cut -c1-1400 | sum
    if [[ " ${flags[*]} " == *" --trace-deopt "* ]]; then  # deopts and GCs per run, from the marks
        awk '/^# run .* begins/ { r = $5; d = 0; g = 0; w = 1; next }
             /^# run .* ends/ { printf "run %s: %d deopt lines, %d gc lines\n", r, d, g; w = 0; next }
             w && /deoptimiz|bailout/ { d++ } w && /Scavenge|Mark-Compact|Mark-sweep/ { g++ }' \
            "$log/causes.$name.out" | sum
        gzip -9 "$log/causes.$name.out"
    fi
}
# pin_main TIMEOUT_PID CPU: the main thread of the node under `timeout` on CPU alone, its other threads
# (V8's, Dawn's, the driver's: made later, they inherit the main thread's CPU) every second on the rest.
pin_main() {
    local tpid=$1 cpu=$2 pid= i t others
    others=$(seq 0 $(( $(nproc) - 1 )) | grep -vx "$cpu" | paste -sd, -)
    for i in $(seq 1 100); do
        pid=$( { cat "/proc/$tpid/task/$tpid/children" 2>/dev/null || pgrep -P "$tpid"; } | awk 'NR == 1 {print $1}')
        [ -n "$pid" ] && break
        sleep 0.02
    done
    [ -n "$pid" ] || { echo "pin_main: no child of $tpid"; return; }
    taskset -p -c "$cpu" "$pid"
    while [ -d "/proc/$pid" ]; do
        for t in /proc/"$pid"/task/*; do
            t=${t##*/}
            [ "$t" = "$pid" ] || taskset -p -c "$others" "$t" > /dev/null 2>&1
        done
        sleep 1
    done
}

if [ "$mode" = pin ]; then
    # Issue 55's slow host mode against the VM's CPUs: per round, every CPU's speed at host_probe.mjs's
    # probes (tools/device/cpu_scan.mjs pinned to it: a register-bound loop, dependent loads over 2 MB
    # and 32 MB, steal ticks), then 8 greedy steady-state runs with the main thread on the CPU with the
    # fastest 2 MB walk, on the slowest, and unpinned. If the mode follows the CPU (a busy neighbour on
    # the VM host's core or cache), the fastest CPU's arms run ~820 tokens/s and the slowest ~600.
    # Also: whether this machine could run the real page (a Chromium, its libraries, the OS).
    echo "== pin: Chromium here? $(command -v chromium chromium-browser google-chrome google-chrome-stable 2>/dev/null | tr '\n' ' ')" \
         "(folders: $(ls -d /usr/lib/chromium /opt/google/chrome 2>/dev/null | tr '\n' ' '));" \
         "OS $(. /etc/os-release 2>/dev/null; echo "$PRETTY_NAME");" \
         "libraries Chromium needs present: $(for l in libnss3.so libnspr4.so libatk-1.0.so.0 libcups.so.2 libgbm.so.1 libxkbcommon.so.0 libasound.so.2 libX11.so.6 libxcb.so.1 libdrm.so.2 libglib-2.0.so.0 libdbus-1.so.3 libvulkan.so.1; do ldconfig -p | grep -qE "^[[:space:]]$l " && printf '%s ' "$l"; done)" | sum
    timeout 60 "$T/tern" bench --backend webgpu -m "$big" -p 0 -n 128 -r 2 2>&1 | tail -1 | sum
    for r in $(seq 1 "$rounds"); do
        for c in $(seq 0 $(( $(nproc) - 1 ))); do
            taskset -c "$c" "$T/node" tools/device/cpu_scan.mjs
        done > "$log/scan.$r.jsonl" 2>&1
        read -r fast slow table < <("$T/node" -e '
            const rows = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter((l) => l.startsWith("{")).map(JSON.parse);
            rows.sort((a, b) => a.l2_ns - b.l2_ns);
            console.log(rows[0].cpu, rows[rows.length - 1].cpu,
                        rows.map((x) => `${x.cpu}:${x.spin_ms}/${x.l2_ns}/${x.mem_ns}/${x.steal_ticks}`).join(" "));' "$log/scan.$r.jsonl")
        echo "round $r cpus by 2 MB walk (cpu:spin ms/2M ns/32M ns/steal ticks): $table" | sum
        arm_pin_main=$fast arm "fastest-cpu$fast-$r"
        arm_pin_main=$slow arm "slowest-cpu$slow-$r"
        arm "free-$r"
    done
    exit 0
fi

if [ "$mode" = causes ]; then
    # Issue 55's slow host mode (~500 vs ~800 tokens/s, the main thread recording 2 ms per step instead
    # of 1): the same 8 greedy steady-state runs under each arm, every run with tools/host_probe.mjs's
    # view (a fixed loop's ms before/after, the CPU each thread ran on and its ticks, context switches,
    # GC). Arms: V8's wasm tiers (TurboFan only, Liftoff only), the process pinned (one CPU, four CPUs),
    # V8's deopts and GCs traced (stdout, marked per run), and the default arm first and last (drift).
    echo "== causes: native tern bench tg128, then 8 greedy runs per arm after 2 s of warm-up" | sum
    timeout 60 "$T/tern" bench --backend webgpu -m "$big" -p 0 -n 128 -r 2 2>&1 | tail -1 | sum
    arm default
    arm turbofan-only --no-liftoff
    arm liftoff-only --liftoff-only
    arm pinned-1cpu taskset -c 3 --
    arm pinned-4cpus taskset -c 4-7 --
    arm traced stdbuf -oL -- --trace-deopt --trace-gc
    arm default-again
    exit 0
fi

if [ "$mode" = glue ]; then
    # Issue 55: TERN_WEBGPU_TUNE settings as arms (GLUE_ARMS="name|settings ...", default one arm
    # with the defaults; session 10 ran "base|web_replay=0 replay|web_replay=1"), alternating over ROUNDS
    # rounds, each arm 8 greedy steady-state runs in its own process, and with GLUE_TIMED=1 (default)
    # again with dawn.node's calls timed (--time-dawn: us per call and calls per step); native tern
    # bench tg128 at the start of each round (the host's slow stretches come and go: web against native
    # within a round); each arm's text against native tern run's.
    echo "== glue: per round native tern bench tg128, then 8 greedy runs per arm after 2 s of warm-up, $rounds rounds" | sum
    # STEP_COST=N: first N rounds of tools/dawn_step_cost.mjs (a 2B4T-shaped step's host ms through
    # dawn.node: a bind group per layer as today vs one per kernel with the layer's weights at a dynamic
    # offset, and dispatchWorkgroups(x, 1, 1) vs (x); ~5 s per round).
    if [ "${STEP_COST:-0}" -gt 0 ]; then
        timeout 120 "$T/node" tools/dawn_step_cost.mjs --dawn "$T/dawn.node" --rounds "$STEP_COST" 2>&1 | sum
    fi
    timeout 90 "$T/tern" run --backend webgpu -m "$big" -p "$prompt" -n "$n" --temp 0 --seed 42 --json \
        > "$log/native.greedy.json" 2> "$log/native.greedy.err"
    read -r -a glue_arms <<< "${GLUE_ARMS:-default|}"
    for r in $(seq 1 "$rounds"); do
        timeout 60 "$T/tern" bench --backend webgpu -m "$big" -p 0 -n 128 -r 2 2>&1 | tail -1 | sed "s/^/round $r native: /" | sum
        for a in "${glue_arms[@]}"; do
            arm "${a%%|*}-$r" env TERN_WEBGPU_TUNE="${a#*|}" --
            [ "${GLUE_TIMED:-1}" = 1 ] && arm_args=--time-dawn arm "${a%%|*}-timed-$r" env TERN_WEBGPU_TUNE="${a#*|}" --
        done
    done
    "$T/node" tools/device/dawn_calls_table.mjs "$log"/causes.*.json 2>&1 | sum
    "$T/node" -e '
        const fs = require("fs");
        const read = (f) => { try { return JSON.parse(fs.readFileSync(f, "utf8")); } catch (e) { return null; } };
        const native = (read(process.argv[1]) || {}).text;
        for (const f of process.argv.slice(2)) {
          const t = ((read(f) || {}).texts || {})["0"];
          const name = f.replace(/^.*causes\./, "").replace(/\.json$/, "");
          console.log(`${name}: ${native === undefined || t === undefined ? "no result" : native === String(t) ? "same text as native" : "DIFFERENT text from native"}`);
        }' "$log/native.greedy.json" "$log"/causes.*.json 2>&1 | sum
    exit 0
fi

if [ "$mode" = timedawn ]; then
    # Issue 55's slow host mode, split by dawn.node call: every arm runs web_node_run.mjs --time-dawn
    # (ms and calls per decode step of each webgpu call, the host's ms outside them: wasm and glue;
    # mapAsync's ms to settling). Arms, alternating over ROUNDS rounds: the NVIDIA driver's shader disk
    # cache as it is (warm after the first process), a fresh empty cache for this process alone (its
    # pipelines compiled in-process, as the first process's were: 2026-11-28 that process ran fast),
    # and the default arm without the timers (their own cost).
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/nvidia
    echo "== timedawn: native tern bench tg128, then 8 greedy runs per arm after 2 s of warm-up, $rounds rounds" | sum
    timeout 60 "$T/tern" bench --backend webgpu -m "$big" -p 0 -n 128 -r 2 2>&1 | tail -1 | sum
    for r in $(seq 1 "$rounds"); do
        echo "driver cache: $(du -sh "$cache" ~/.nv 2>/dev/null | tr '\t\n' ' ')" | sum
        arm_args=--time-dawn arm "timed-$r"
        fresh=$(mktemp -d /tmp/glcache.XXXX)
        arm_args=--time-dawn arm "timed-fresh-cache-$r" env __GL_SHADER_DISK_CACHE_PATH="$fresh" --
        echo "fresh cache after its process: $(du -sh "$fresh" | cut -f1) in $(find "$fresh" -type f | wc -l) files" | sum
        arm "untimed-$r"
    done
    "$T/node" tools/device/dawn_calls_table.mjs "$log"/causes.*.json 2>&1 | sum
    exit 0
fi
echo "== 1. decode tokens/s, $n tokens, native tern run vs the wasm engine under Node (dawn.node), $rounds rounds" | sum
for model in "${models[@]}"; do
    m=$(basename "$model" .gguf)
    for r in $(seq 1 "$rounds"); do
        for s in "greedy|0" "sampled|0.7"; do
            name=${s%%|*}
            timeout 90 "$T/tern" run --backend webgpu -m "$model" -p "$prompt" -n "$n" --temp "${s#*|}" --seed 42 --json \
                > "$log/native.$m.$name.$r.json" 2> "$log/native.$m.$name.$r.err"
            echo "$m native $name round $r: $(grep -o '"decode_tokens_per_second":[0-9.]*' "$log/native.$m.$name.$r.json")" | sum
        done
        timeout 150 "$T/node" tools/web_node_run.mjs --model "$model" --wasm-dir "$T/web" --dawn "$T/dawn.node" \
            -p "$prompt" -n "$n" --temp 0,0.7 --seed 42 --repeat 1 "${web_flags[@]}" --json-out "$log/web.$m.$r.json" \
            > "$log/web.$m.$r.txt" 2> "$log/web.$m.$r.err"
        echo "$m web (rc $?): $(grep -E 'loaded in|run [0-9]:' "$log/web.$m.$r.err" | sed 's/^web_node_run: //' | cut -c1-200 | tr '\n' ';')" | sum
    done
done

echo "== 2. same text, native and wasm (last round)" | sum
for model in "${models[@]}"; do
    m=$(basename "$model" .gguf)
    "$T/node" -e '
        const fs = require("fs");
        const [web, greedy, sampled, m] = process.argv.slice(1);
        const read = (f) => { try { return JSON.parse(fs.readFileSync(f, "utf8")); } catch (e) { return null; } };
        const w = (read(web) || { texts: {} }).texts;
        for (const [name, file, temp] of [["greedy", greedy, "0"], ["sampled", sampled, "0.7"]]) {
          const n = (read(file) || {}).text;
          if (n === undefined || w[temp] === undefined) { console.log(`${m} ${name}: no result (see the logs)`); continue; }
          const t = String(w[temp]);
          let i = 0;
          while (i < n.length && i < t.length && n[i] === t[i]) ++i;
          console.log(`${m} ${name}: ${n === t ? `same text (${n.length} characters)` : `DIFFERENT from character ${i} of ` +
                      `${n.length}: native ...${JSON.stringify(n.slice(Math.max(0, i - 40), i + 60))} web ...` +
                      JSON.stringify(t.slice(Math.max(0, i - 40), i + 60))}`);
        }' "$log/web.$m.$rounds.json" "$log/native.$m.greedy.$rounds.json" "$log/native.$m.sampled.$rounds.json" "$m" 2>&1 | sum
done

[ "$mode" = smoke ] && exit 0
if [ "$mode" = ab ]; then  # this build against the base build (pack_webbin.sh BASE_WEB_DIR), alternating
    echo "== 3. native tern bench tg128 (2B4T)" | sum
    timeout 60 "$T/tern" bench --backend webgpu -m "$big" -p 0 -n 128 -r 2 2>&1 | tail -1 | sum
    echo "== ab: 8 greedy steady-state runs per arm, base and this build alternating" | sum
    for r in 1 2; do
        [ -d "$T/web-base" ] && arm_wasm=$T/web-base arm "base-$r"
        arm_wasm=$T/web arm "this-$r"
        # where a run's host time goes: inside dawn.node's calls (Dawn, the driver) or outside (wasm, glue)
        arm_wasm=$T/web arm_args=--time-dawn arm "this-timed-$r"
        # the same without the NVIDIA driver's shader disk cache (2026-11-28 03:15, H200: only the first
        # process, the one that compiled its pipelines cold, ran in the fast mode): pipelines compiled
        # in this process, as the first process's were
        arm_wasm=$T/web arm_args=--time-dawn arm "this-timed-no-disk-cache-$r" env __GL_SHADER_DISK_CACHE=0 --
    done
    exit 0
fi
echo "== 3. native tern bench tg128 (2B4T)" | sum
bench_began=$(now_ms)
timeout 60 "$T/tern" bench --backend webgpu -m "$big" -p 0 -n 128 -r 2 2>&1 | tail -4 | sum
echo "native-tern-bench $bench_began $(now_ms)" > "$log/native.phases"

# Where the wasm engine's time goes (2B4T), in steady state: as `tern bench` warms up before it times,
# 2 s of untimed generation first; the main thread's CPU profile of the load and of the timed runs.
steady=(-p "$prompt" -n "$n" --temp 0,0.7 --seed 42 --repeat 3 --warm-up-s 2)
echo "== 4. wasm engine in steady state (2 s warm-up, 3 runs each), 2B4T; CPU profile of the load and the timed runs" | sum
timeout 120 "$T/node" tools/web_node_run.mjs --model "$big" --wasm-dir "$T/web" --dawn "$T/dawn.node" "${steady[@]}" \
    --profile-dir "$log/web.prof" --json-out "$log/web.steady.json" > "$log/web.steady.txt" 2> "$log/web.steady.err"
echo "steady state (rc $?): $(grep -E 'loaded in|warm-up|run [0-9]:' "$log/web.steady.err" | sed 's/^web_node_run: //' | sed 's/ on webgpu.*//' | cut -c1-160 | tr '\n' ';')" | sum
for f in "$log"/web.prof/*.cpuprofile; do
    [ -f "$f" ] || continue
    "$T/node" tools/cpuprofile_summary.mjs "$f" --symbols "$T/web/tern.js.symbols" --top 40 > "${f%.cpuprofile}.txt" 2>&1
    head -24 "${f%.cpuprofile}.txt" | sum
    gzip -9 "$f"
done
if [ -d "$T/web-base" ]; then  # pack_webbin.sh with BASE_WEB_DIR: the other build, same settings, no profile
    echo "== 4b. A/B: the base build (web-base.tar.xz) in the same steady state, no profiler" | sum
    timeout 100 "$T/node" tools/web_node_run.mjs --model "$big" --wasm-dir "$T/web-base" --dawn "$T/dawn.node" "${steady[@]}" \
        --json-out "$log/web.base.json" > "$log/web.base.txt" 2> "$log/web.base.err"
    echo "base build (rc $?): $(grep -E 'loaded in|run [0-9]:' "$log/web.base.err" | sed 's/^web_node_run: //' | sed 's/ on webgpu.*//' | cut -c1-160 | tr '\n' ';')" | sum
fi
echo "== 5. this build in the same steady state without the profiler (comparable with 4b and 6), 8 runs each" | sum
timeout 100 "$T/node" tools/web_node_run.mjs --model "$big" --wasm-dir "$T/web" --dawn "$T/dawn.node" \
    -p "$prompt" -n "$n" --temp 0,0.7 --seed 42 --repeat 8 --warm-up-s 2 --json-out "$log/web.noprof.json" \
    > "$log/web.noprof.txt" 2> "$log/web.noprof.err"
echo "no profiler (rc $?): $(grep -E 'loaded in|run [0-9]:' "$log/web.noprof.err" | sed 's/^web_node_run: //' | sed 's/ on webgpu.*//' | cut -c1-160 | tr '\n' ';')" | sum
# (2026-11-28 00:20, H100: validation, robustness and workgroup zero-init off together 726-925 greedy;
# skip_validation alone 382-787; disable_workgroup_init alone 683-791; disable_robustness alone 827-870,
# the only arm without a ~500 run: here it runs 8 times.)
echo "== 6. the same with Dawn's robustness off (a browser cannot), 8 runs each" | sum
timeout 100 "$T/node" tools/web_node_run.mjs --model "$big" --wasm-dir "$T/web" --dawn "$T/dawn.node" \
    -p "$prompt" -n "$n" --temp 0,0.7 --seed 42 --repeat 8 --warm-up-s 2 \
    --dawn-flag enable-dawn-features=disable_robustness --json-out "$log/web.disable_robustness.json" \
    > "$log/web.disable_robustness.txt" 2> "$log/web.disable_robustness.err"
echo "disable_robustness (rc $?): $(grep -E 'run [0-9]:' "$log/web.disable_robustness.err" | sed 's/^web_node_run: //' | cut -c1-120 | tr '\n' ';')" | sum
echo "== 7. the GPU's clocks during each timed run (nvidia-smi every 50 ms)" | sum
kill "$clocks_pid" 2>/dev/null
clocks_pid=
runs=("$log"/web.steady.json "$log"/web.noprof.json "$log"/web.disable_robustness.json)
[ -f "$log/web.base.json" ] && runs+=("$log/web.base.json")
"$T/node" tools/device/clocks_by_run.mjs "$log/clocks.csv" "$log/native.phases" "${runs[@]}" 2>&1 | sum
