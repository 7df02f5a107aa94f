#!/usr/bin/env bash
# tern's CPU backend against bitnet.cpp and ik_llama.cpp on the lent GPU machine's CPU (issue 51), in
# one device call. Carry .peerbin (tools/device/pack_peerbin.sh packs tern and the peers' llama-bench
# and llama-quantize, built elsewhere). On the device it
#   1. makes the same files every engine reads: `tern synth bitnet-2b4t --seed 1` (official I2_S
#      layout, F16 tied head), tern quantize's copy with a Q6_K head, and ik_llama.cpp's
#      llama-quantize of the I2_S file into IQ2_BN (F16, then Q6_K, token embedding / output);
#   2. runs tools/bench_cpu_peers.py (alternating rounds) at $THREADS (default: the CPU's physical
#      cores): tg128, pp128, pp512 with the F16 head, tern on I2_S, bitnet.cpp on I2_S, ik_llama.cpp
#      on IQ2_BN with run-time repacking (-rtr 1);
#   3. tg128 with the Q6_K head, each engine on its Q6_K-head file;
#   4. how tg scales with threads (tg64 at 1, 2, 4, 8, 16 ... up to $THREADS), the same engines.
# A peer whose instructions the CPU lacks (.peerbin/NAME/needs.txt against /proc/cpuinfo) is left
# out with the reason. Each part gets a share of $BUDGET_S (default 540 s: the device tool's calls
# stop at 600) and starts no run after it. Results: $OUT/cpu_peers_*.md and .json, lscpu.txt, logs.
# Usage (on the device): tools/device/cpu_peers_run.sh     Environment: THREADS, BUDGET_S, ROUNDS (3).
set -uo pipefail
cd "$(dirname "$0")/../.."
t_start=$SECONDS
out=${OUT:-/tmp/out}
mkdir -p "$out"
P=$PWD/.peerbin
[ -f "$P/tern.gz" ] || { echo "cpu_peers_run: no .peerbin/tern.gz (run tools/device/pack_peerbin.sh and carry .peerbin)" >&2; exit 1; }
find "$P" -name '*.gz' -exec gunzip -kf {} \;
chmod +x "$P/tern" "$P"/*/llama-* 2>/dev/null
export LD_LIBRARY_PATH=$P/lib:${LD_LIBRARY_PATH:-}
budget=${BUDGET_S:-540}
rounds=${ROUNDS:-3}
lscpu > "$out/lscpu.txt" 2>&1
grep -m1 'model name' /proc/cpuinfo
cores=$(lscpu -p=CORE,SOCKET 2>/dev/null | grep -v '^#' | sort -u | wc -l)
[ "$cores" -ge 1 ] 2>/dev/null || cores=$(nproc)
threads=${THREADS:-$cores}
echo "cpu_peers_run: $(nproc) logical CPUs, $cores cores; $threads threads"
tern=$P/tern
"$tern" --version 2>&1 | head -1

# Which peers this CPU can run.
declare -A peer_ok
for dir in "$P"/*/; do
    name=$(basename "$dir")
    [ "$name" = lib ] && continue
    missing=""
    while read -r flag; do
        [ -n "$flag" ] && ! grep -qw "$flag" /proc/cpuinfo && missing="$missing $flag"
    done < "$dir/needs.txt"
    if [ -n "$missing" ]; then
        echo "cpu_peers_run: $name left out: its build uses instructions this CPU lacks:$missing" | tee -a "$out/cpu_peers_skipped.txt"
    else
        peer_ok[$name]=1
    fi
done

m=/tmp/cpu-peers
mkdir -p $m
t0=$SECONDS
"$tern" synth bitnet-2b4t --seed 1 -o $m/2b4t.gguf 2>&1 | tail -1
"$tern" quantize $m/2b4t.gguf $m/2b4t-q6k.gguf COPY --token-embedding-type q6_k 2>&1 | tail -1
peers=() peers_q6k=() ik=$P/ik_llama.cpp bn=$P/bitnet.cpp
if [ -n "${peer_ok[bitnet.cpp]:-}" ]; then
    peers+=(--peer "bitnet.cpp I2_S=$bn/llama-bench")
    peers_q6k+=(--peer "bitnet.cpp I2_S=$bn/llama-bench:$m/2b4t-q6k.gguf")
fi
if [ -n "${peer_ok[ik_llama.cpp]:-}" ]; then
    q() { "$ik/llama-quantize" --allow-requantize --token-embedding-type "$1" --output-tensor-type "$1" \
              $m/2b4t.gguf "$2" IQ2_BN "$threads" > "$2.log" 2>&1 || { echo "ik llama-quantize failed:"; tail -5 "$2.log"; }; }
    q f16 $m/2b4t-iq2bn.gguf
    q q6_k $m/2b4t-iq2bn-q6k.gguf
    [ -f $m/2b4t-iq2bn.gguf ] && peers+=(--peer "ik_llama.cpp IQ2_BN -rtr=$ik/llama-bench:$m/2b4t-iq2bn.gguf:-rtr 1")
    [ -f $m/2b4t-iq2bn-q6k.gguf ] && peers_q6k+=(--peer "ik_llama.cpp IQ2_BN -rtr=$ik/llama-bench:$m/2b4t-iq2bn-q6k.gguf:-rtr 1")
fi
echo "cpu_peers_run: files made in $((SECONDS - t0)) s"
ls -la $m

left() { echo $((budget - (SECONDS - t_start))); }
bench() {  # PART SHARE-OF-WHAT-IS-LEFT(%) ARGS...
    local part=$1 share=$2
    shift 2
    local d=$(($(left) * share / 100))
    [ "$d" -gt 10 ] || { echo "cpu_peers_run: no time left for $part"; return; }
    echo "== $part ($d s)"
    PYTHONUNBUFFERED=1 python3 tools/bench_cpu_peers.py --tern "$tern" --deadline-s "$d" --out "$out/cpu_peers_$part" \
        "$@" 2> "$out/cpu_peers_$part.log"
}
bench f16_head 55 -m $m/2b4t.gguf "${peers[@]}" --threads "$threads" --tests tg128,pp128,pp512 \
    --rounds "$rounds" --reps 2 --roofline
bench q6k_head 35 -m $m/2b4t-q6k.gguf "${peers_q6k[@]}" --threads "$threads" --tests tg128 --rounds "$rounds" --reps 2
scaling=1
for t in 2 4 8 16 32 64; do [ "$t" -lt "$threads" ] && scaling="$scaling,$t"; done
scaling="$scaling,$threads"
bench tg_scaling 95 -m $m/2b4t.gguf "${peers[@]}" --threads "$scaling" --tests tg64 --rounds 1 --reps 2 --roofline
echo "cpu_peers_run: done in $((SECONDS - t_start)) s"
