#!/usr/bin/env bash
# tern's CPU backend against bitnet.cpp and ik_llama.cpp on the lent GPU machine's CPU (issue 51), in
# one device call of ~4 minutes. Carry .peerbin (tools/device/pack_peerbin.sh packs tern and the
# peers' llama-bench and llama-quantize, built elsewhere). On the device it
#   1. makes the file every engine reads: `tern synth bitnet-2b4t --seed 1` (official I2_S layout,
#      F16 tied head), and ik_llama.cpp's llama-quantize of it into IQ2_BN (F16 embedding and output);
#   2. part t16: tools/bench_cpu_peers.py (alternating rounds) at $THREADS threads (default: every
#      logical CPU): tg64 and pp128, tern on I2_S, bitnet.cpp on I2_S, ik_llama.cpp on IQ2_BN with
#      run-time repacking (-rtr 1), and tern's read bandwidth at that thread count (the roofline);
#   3. part pin2: the same pinned to two cores (taskset -c 0,1, -t 2), CI's size;
#   optional parts (PARTS="kernels t16 pin2 q6k_head tg_scaling tiles"):
#   4. q6k_head: tg64 with a Q6_K head (tern quantize's copy; ik's IQ2_BN requantized with Q6_K);
#   5. tg_scaling: tg64 at 1, 2, 4, 8, ... $THREADS threads;
#   6. tiles: tern against .peerbin/tern-base (another commit's tern, pack_peerbin.sh BASELINE=), or
#      the BINARY:LAYOUT list in $TILES_VARIANTS (LAYOUT default, or 2bit / base3 for a tern from
#      before TERN_CPU_TILES was deleted, e.g. TILES_VARIANTS="tern:2bit tern:base3 tern-base:default"):
#      tg64 and pp128, pinned to two cores and at $THREADS, alternating, $TILES_REPS (default 1)
#      timed repetitions after tern bench's warm-up (two rounds, ~25 s per variant and round);
#   7. kernels (runs first): tern_cpu_kernels_bench on one core (ternary products of both layouts
#      and both base-3 decodes, the int8 head, the read loop), CPU time.
# A peer whose instructions the CPU lacks (.peerbin/NAME/needs.txt against /proc/cpuinfo) is left
# out with the reason, as is a peer whose run fails. Each part gets a share of $BUDGET_S (default
# 240) and starts no run after it. Results: $OUT/cpu_peers_PART.md / .json / .log, lscpu.txt.
# Usage (on the device): tools/device/cpu_peers_run.sh
# Environment: THREADS, BUDGET_S, ROUNDS (default 3 at $THREADS, 2 pinned), PARTS (default "t16 pin2"),
# RUN_TIMEOUT_S (default 90: one engine's run that takes longer counts as failed).
set -uo pipefail
cd "$(dirname "$0")/../.."
t_start=$SECONDS
out=${OUT:-/tmp/out}
mkdir -p "$out"
P=$PWD/.peerbin
[ -f "$P/tern.gz" ] || { echo "cpu_peers_run: no .peerbin/tern.gz (run tools/device/pack_peerbin.sh, carry .peerbin)" >&2; exit 1; }
find "$P" -name '*.gz' -exec gunzip -kf {} \;
chmod +x "$P"/tern* "$P"/*/llama-* 2>/dev/null
export LD_LIBRARY_PATH=$P/lib:${LD_LIBRARY_PATH:-}
budget=${BUDGET_S:-240}
rounds=${ROUNDS:-3}
parts=" ${PARTS:-t16 pin2} "
has() { [[ "$parts" == *" $1 "* ]]; }
lscpu > "$out/lscpu.txt" 2>&1
grep -m1 'model name' /proc/cpuinfo
threads=${THREADS:-$(nproc)}
echo "cpu_peers_run: $(nproc) logical CPUs; $threads threads; parts:$parts; budget $budget s"
tern=$P/tern
export TERN_LLAMA3_TOKENIZER=$P/llama3_tokenizer.json  # (tern synth's vocabulary; packed by pack_peerbin.sh)

# Which peers this CPU can run. A peer's folder holds its own libstdc++ / OpenMP: put it first.
declare -A peer_ok
for dir in "$P"/*/; do
    name=$(basename "$dir")
    [ "$name" = lib ] && continue
    missing=""
    while read -r flag; do
        [ -n "$flag" ] && ! grep -qw "$flag" /proc/cpuinfo && missing="$missing $flag"
    done < "$dir/needs.txt"
    if [ -n "$missing" ]; then
        echo "cpu_peers_run: $name left out: its build uses instructions this CPU lacks:$missing" | tee -a "$out/skipped.txt"
    else
        peer_ok[$name]=1
    fi
done
peer() {  # NAME: a wrapper that runs the peer's llama-bench with its libraries
    local w=/tmp/cpu-peers/run-$1
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$P/$1" "$P/$1/llama-bench" > "$w"
    chmod +x "$w"
    echo "$w"
}

if has kernels && [ -x "$P/tern_cpu_kernels_bench" ]; then
    echo "== kernels: tern_cpu_kernels_bench on one core (CPU time)" | tee "$out/cpu_kernels.txt"
    pin1=()
    command -v taskset >/dev/null && pin1=(taskset -c 1)
    timeout 180 "${pin1[@]}" "$P/tern_cpu_kernels_bench" --benchmark_filter='TernaryGemm|Int8Head|Q6kHead|ReadBytes' \
        --benchmark_min_time=0.1 2>&1 | tee -a "$out/cpu_kernels.txt" | grep -E '^BM_' || true
fi

m=/tmp/cpu-peers
mkdir -p $m
t0=$SECONDS
[ -f $m/2b4t.gguf ] || "$tern" synth bitnet-2b4t --seed 1 -o $m/2b4t.gguf 2>&1 | tail -1
has q6k_head && "$tern" quantize $m/2b4t.gguf $m/2b4t-q6k.gguf COPY --token-embedding-type q6_k 2>&1 | tail -1
peers=() peers_q6k=()
if [ -n "${peer_ok[bitnet.cpp]:-}" ]; then
    bn=$(peer bitnet.cpp)
    peers+=(--peer "bitnet.cpp I2_S=$bn")
    peers_q6k+=(--peer "bitnet.cpp I2_S=$bn:$m/2b4t-q6k.gguf")
fi
peer_parts=0  # (the parts kernels and tiles run tern alone: no IQ2_BN file to make)
for p_ in t16 pin2 q6k_head tg_scaling; do has $p_ && peer_parts=1; done
if [ -n "${peer_ok[ik_llama.cpp]:-}" ] && [ $peer_parts = 1 ]; then
    ik=$(peer ik_llama.cpp)
    q() {  # EMBEDDING-TYPE OUTPUT
        [ -f "$2" ] && return
        LD_LIBRARY_PATH=$P/ik_llama.cpp "$P/ik_llama.cpp/llama-quantize" --allow-requantize --token-embedding-type "$1" \
            --output-tensor-type "$1" $m/2b4t.gguf "$2" IQ2_BN "$(nproc)" > "$2.log" 2>&1 ||
            { echo "ik_llama.cpp llama-quantize failed:"; tail -5 "$2.log"; rm -f "$2"; }
    }
    q f16 $m/2b4t-iq2bn.gguf
    [ -f $m/2b4t-iq2bn.gguf ] && peers+=(--peer "ik_llama.cpp IQ2_BN -rtr=$ik:$m/2b4t-iq2bn.gguf:-rtr 1")
    if has q6k_head; then
        q q6_k $m/2b4t-iq2bn-q6k.gguf
        [ -f $m/2b4t-iq2bn-q6k.gguf ] && peers_q6k+=(--peer "ik_llama.cpp IQ2_BN -rtr=$ik:$m/2b4t-iq2bn-q6k.gguf:-rtr 1")
    fi
fi
echo "cpu_peers_run: files made in $((SECONDS - t0)) s"
ls -la $m

left() { echo $((budget - (SECONDS - t_start))); }
bench() {  # PART SHARE-OF-WHAT-IS-LEFT(%) [PREFIX COMMAND...] -- ARGS...
    local part=$1 share=$2
    shift 2
    local -a pre=()
    while [ "$1" != -- ]; do pre+=("$1"); shift; done
    shift
    has "$part" || return 0
    local d=$(($(left) * share / 100))
    [ "$d" -gt 10 ] || { echo "cpu_peers_run: no time left for $part"; return; }
    echo "== $part (${pre[*]:-} up to $d s)"
    PYTHONUNBUFFERED=1 "${pre[@]}" python3 tools/bench_cpu_peers.py --tern "$tern" --deadline-s "$d" \
        --run-timeout-s "${RUN_TIMEOUT_S:-90}" --out "$out/cpu_peers_$part" "$@" 2> "$out/cpu_peers_$part.log"
}
# Shares: t16 gets half of what is left, pin2 most of the rest (the optional parts split what remains).
bench t16 50 -- -m $m/2b4t.gguf "${peers[@]}" --threads "$threads" --tests tg64,pp128 --rounds "$rounds" --reps 2 --roofline
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0,1) || echo "cpu_peers_run: no taskset; pin2 runs unpinned at -t 2"
pin2_share=90
{ has q6k_head || has tg_scaling; } && pin2_share=55  # (leaves the later parts their time)
bench pin2 $pin2_share "${pin[@]}" -- -m $m/2b4t.gguf "${peers[@]}" --threads 2 --tests tg64,pp128 --rounds "${ROUNDS:-2}" \
    --reps 2 --roofline
q6k_share=50
has tg_scaling || q6k_share=90  # (the last part run: it may take what is left)
bench q6k_head $q6k_share -- -m $m/2b4t-q6k.gguf "${peers_q6k[@]}" --threads "$threads" --tests tg64 --rounds 2 --reps 2
scaling=1
for t in 2 4 8 16 32 64; do [ "$t" -lt "$threads" ] && scaling="$scaling,$t"; done
[ "$threads" -gt 1 ] && scaling="$scaling,$threads"
bench tg_scaling 90 -- -m $m/2b4t.gguf "${peers[@]}" --threads "$scaling" --tests tg64 --rounds 1 --reps 2 --roofline

if has tiles; then
    echo "== tiles: tern against tern-base, alternating (t/s)" | tee "$out/cpu_tiles.md"
    variants=("tern default")
    [ -x "$P/tern-base" ] && variants+=("tern-base default")
    if [ -n "${TILES_VARIANTS:-}" ]; then
        variants=()
        for v in $TILES_VARIANTS; do variants+=("${v%%:*} ${v#*:}"); done
    fi
    pin=()
    command -v taskset >/dev/null && pin=(taskset -c 0,1)
    for round in 1 2; do
        for cfg in "2 -p 0 -n 64" "$threads -p 0 -n 64" "2 -p 128 -n 0" "$threads -p 128 -n 0"; do  # ~25 s per variant
            t=${cfg%% *} test=${cfg#* }
            n=${#variants[@]}
            for ((i = 0; i < n; ++i)); do
                v=${variants[$(((i + round - 1) % n))]}  # each round starts with the next variant
                bin=${v% *} l=${v#* }
                [ "$(left)" -gt 15 ] || break 3
                pre=()
                [ "$t" = 2 ] && pre=("${pin[@]}")
                env=()
                [ "$l" != default ] && env=("TERN_CPU_TILES=$l")
                # shellcheck disable=SC2086
                ts=$(env "${env[@]}" "${pre[@]}" "$P/$bin" bench --backend cpu -m $m/2b4t.gguf -t "$t" -r "${TILES_REPS:-1}" --json $test \
                     2>/dev/null | python3 -c 'import json, sys; print("%.2f" % json.load(sys.stdin)[0]["avg_ts"])')
                echo "round $round t=$t${pre:+ (taskset -c 0,1)} ${test// /} $bin $l: $ts" | tee -a "$out/cpu_tiles.md"
            done
        done
    done
fi
cat "$out"/cpu_peers_*.md 2>/dev/null
echo "cpu_peers_run: done in $((SECONDS - t_start)) s"
