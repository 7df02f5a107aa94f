#!/usr/bin/env bash
# Issue 54 side by side on the lent GPU: tern's WebGPU decode against llama.cpp's CUDA build on the same
# GGUF files and the same card, in one device call of under 3 minutes (BUDGET_S, default 170: a run
# that would start after it is skipped, with a line saying so).
#   1. makes the files both engines read, in parallel: `tern synth` llama-3.2-1b Q4_0, phi-3-mini Q4_0
#      and qwen3-1.7b Q1_0 (Bonsai's type; upstream llama.cpp reads it as GGML_TYPE_Q1_0, id 41);
#   2. $ROUNDS (default 2) alternating rounds, the order flipped each round, of
#        tern bench --backend webgpu -m FILE -p 0 -n 128 --json
#        llama-bench -m FILE -p 0 -n 128 -ngl 99 -fa 0|1 -o json
#      (both: a warm-up, then 5 timed repetitions, greedy/argmax decode of 128 tokens from an empty
#      cache; -fa 1 if the build has its flash-attention kernels (GGML_CUDA_FA:BOOL=ON in BUILD.txt), else 0);
#      a llama-bench run counts only if it reports a GPU (gpu_info), a tern run only on backend webgpu;
#   3. PARTS=bitnet (with families, or alone): BitNet b1.58 2B4T's shape. Upstream llama.cpp has no I2_S
#      type (gguf-py: "36 is not a valid GGMLQuantizationType") and no "bitnet-b1.58" arch, so the file
#      is `tern synth bitnet-2b4t --type tq2_0` relabelled "bitnet" (tools/device/gguf_relabel_arch.py,
#      tensors untouched): mainline's BitNet arch, which both engines compute with a SiLU FFN (2B4T's is
#      ReLU^2; the same work per token). ggml-cuda has no TQ1_0/TQ2_0 kernels, so llama.cpp runs these
#      projections on the CPU: what its CUDA build gives a TQ2_0 BitNet file. $BITNET_REPS (default 2)
#      timed repetitions for both engines, to stay inside the budget.
# Prints a Markdown table: tok/s of each engine (mean of the rounds, each round's in brackets) and tern /
# llama.cpp (issue 54's target: >= 1.0).
# Carry .gl, .devicebin (tools/device/pack_devicebin.sh) and .cudapeer (tools/device/pack_cudapeer.sh:
# llama-bench, libcudart, the Qwen3 tokenizer if .devicebin lacks it). libcuda and cuBLAS come from the
# lent machine.
# LLAMA_BENCH=PATH runs that llama-bench instead of .cudapeer's (e.g. one built on the device; its
# BUILD.txt beside it, if any, says whether it has flash attention); .cudapeer still gives the tokenizer.
# Results: $OUT/cuda_peers.tgz (cuda_peers.md, every run's JSON and stderr, the synth logs, nvidia-smi,
# ldd). Environment: BUDGET_S, ROUNDS, N_GEN (default 128), PARTS (default "families"),
# RUN_TIMEOUT_S (default 60: a run that takes longer counts as failed).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
final=${OUT:-/tmp/out}
out=/tmp/cuda_peers_out  # (packed into $OUT/cuda_peers.tgz at the end: the device tool brings back few files)
rm -rf "$out" && mkdir -p "$out" "$final"
trap 'tar czf "$final/cuda_peers.tgz" -C "$out" .' EXIT
budget=${BUDGET_S:-170}
rounds=${ROUNDS:-2}
n_gen=${N_GEN:-128}
run_timeout=${RUN_TIMEOUT_S:-60}
parts=" ${PARTS:-families} "
has() { [[ "$parts" == *" $1 "* ]]; }
C=$PWD/.cudapeer
[ -n "${LLAMA_BENCH:-}" ] || [ -f "$C/llama-bench.xz" ] ||
    { echo "cuda_peers_run: no .cudapeer/llama-bench.xz (run tools/device/pack_cudapeer.sh, carry .cudapeer)" >&2; exit 1; }
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
export TERN_PHI3_VOCAB=$PWD/tests/data/llama-vocab/ggml-vocab-phi-3.gguf

# Unpack llama-bench and its libraries; find the lent machine's cuBLAS (CUDA 13.0).
unxz() {  # FILE.xz: to stdout (Python's lzma where the image has no xz)
    if command -v xz > /dev/null; then xz -dc "$1"; else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; fi
}
L=/tmp/cudapeer
rm -rf "$L" && mkdir -p "$L/lib" "$L/qwen3"
qwen_vocab=$B/qwen3/tokenizer.json  # (pack_devicebin.sh's copy, else .cudapeer's)
if [ ! -f "$qwen_vocab" ]; then
    qwen_vocab=$L/qwen3/tokenizer.json
    for f in tokenizer.json tokenizer_config.json; do unxz "$C/qwen3_tokenizer/$f.xz" > "$L/qwen3/$f"; done
fi
if [ -n "${LLAMA_BENCH:-}" ]; then
    lb=$LLAMA_BENCH
    cp "$(dirname "$lb")/BUILD.txt" "$out/" 2>/dev/null
else
    lb=$L/llama-bench
    unxz "$C/llama-bench.xz" > "$lb" && chmod +x "$lb"
    for z in "$C"/lib/*.xz; do [ -f "$z" ] && unxz "$z" > "$L/lib/$(basename "${z%.xz}")"; done
    cp "$C/BUILD.txt" "$out/" 2>/dev/null
fi
fa=0
grep -q 'GGML_CUDA_FA:BOOL=ON' "$out/BUILD.txt" 2>/dev/null && fa=1
cuda_lib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
    [ -e "$d/libcublas.so.13" ] && { cuda_lib=$d; break; }
done
[ -n "$cuda_lib" ] || cuda_lib=$(ldconfig -p | awk '/libcublas\.so\.13 /{print $NF; exit}' | xargs -r dirname)
peer_ld=$L/lib${cuda_lib:+:$cuda_lib}
[ -d /usr/local/nvidia/lib64 ] && peer_ld=$peer_ld:/usr/local/nvidia/lib64
LD_LIBRARY_PATH=$peer_ld ldd "$lb" > "$out/ldd_llama-bench.txt" 2>&1
peer_ok=1
if grep -q 'not found' "$out/ldd_llama-bench.txt"; then
    echo "cuda_peers_run: llama-bench cannot run here, missing: $(grep 'not found' "$out/ldd_llama-bench.txt" | awk '{print $1}' | tr '\n' ' ')"
    peer_ok=0
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
nvidia-smi >> "$out/device.txt" 2>&1
echo "cuda_peers_run: $lb (-fa $fa); cuBLAS from ${cuda_lib:-(not found)}; $rounds rounds of tg$n_gen; budget $budget s"

# 1. The files, made in parallel (CPU work, before any timing). An existing file is complete (synth
# writes a temp file and renames it), so a warm machine reuses it.
m=/tmp/cuda-peers
mkdir -p $m
models=()
has families && models+=("llama-3.2-1b q4_0" "phi-3-mini q4_0" "qwen3-1.7b q1_0")
has bitnet && models+=("bitnet-2b4t tq2_0")
t0=$SECONDS
for spec in "${models[@]}"; do
    read -r shape type <<< "$spec"
    vocab=()
    [ "$shape" = qwen3-1.7b ] && vocab=(--vocab "$qwen_vocab")
    f=$m/$shape-$type.gguf
    [ -f "$f" ] && continue
    if [ "$shape" = bitnet-2b4t ]; then
        { "$B/tern" synth "$shape" --type "$type" -o "$f.tmp" && python3 tools/device/gguf_relabel_arch.py "$f.tmp" bitnet &&
            mv "$f.tmp" "$f"; } > "$out/synth_$shape-$type.log" 2>&1 &
    else
        "$B/tern" synth "$shape" --type "$type" "${vocab[@]}" -o "$f" > "$out/synth_$shape-$type.log" 2>&1 &
    fi
done
wait
echo "cuda_peers_run: files made in $((SECONDS - t0)) s"
ls -la $m | tee "$out/files.txt"

# 2. The runs. Each prints its t/s (a run that failed, timed out or ran off the GPU prints nothing) and
# appends "label engine round t/s" to results.tsv.
: > "$out/results.tsv"
tps() {  # ENGINE JSON: avg_ts if the run is what it claims to be
    python3 - "$@" << 'EOF'
import json, sys
engine, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))[0]
except Exception:
    sys.exit(0)
if engine == "tern" and r.get("backend") != "webgpu":
    sys.exit(0)
if engine == "llama.cpp" and not r.get("gpu_info"):
    sys.exit(0)
print("%.2f" % r["avg_ts"])
EOF
}
bench() {  # ENGINE LABEL FILE ROUND [REPETITIONS]
    local engine=$1 label=$2 file=$3 round=$4 reps=${5:-5} base="$out/$2.$1.r$4" rc
    if [ $((budget - SECONDS)) -lt 10 ]; then
        echo "  (skipped: ${SECONDS}s of the ${budget}s budget spent) $label $engine round $round"
        return
    fi
    if [ "$engine" = tern ]; then
        timeout "$run_timeout" "$B/tern" bench --backend webgpu -m "$file" -p 0 -n "$n_gen" -r "$reps" --json > "$base.json" 2> "$base.err"
    else
        [ $peer_ok = 1 ] || return
        LD_LIBRARY_PATH=$peer_ld timeout "$run_timeout" "$lb" -m "$file" -p 0 -n "$n_gen" -r "$reps" -ngl 99 -fa $fa \
            -o json > "$base.json" 2> "$base.err"
    fi
    rc=$?
    local ts
    ts=$(tps "$engine" "$base.json")
    if [ -n "$ts" ]; then
        printf '%s\t%s\t%s\t%s\n' "$label" "$engine" "$round" "$ts" >> "$out/results.tsv"
        echo "  $label $engine round $round: $ts t/s [${SECONDS}s]"
    else
        local why="rc $rc"
        [ $rc = 124 ] && why="timed out after ${run_timeout}s"
        [ $rc = 0 ] && why="no result on the GPU"
        echo "  $label $engine round $round: failed ($why): $(tail -n 2 "$base.err" | tr '\n' ' ')"
    fi
}
for ((round = 1; round <= rounds; ++round)); do
    echo "== round $round"
    for spec in "${models[@]}"; do
        read -r shape type <<< "$spec"
        f=$m/$shape-$type.gguf
        [ -f "$f" ] || { echo "  $shape $type: synth failed: $(tail -n 1 "$out/synth_$shape-$type.log")"; continue; }
        reps=5
        [ "$shape" = bitnet-2b4t ] && reps=${BITNET_REPS:-2}
        if [ $((round % 2)) = 1 ]; then
            bench tern "$shape-$type" "$f" $round $reps
            bench llama.cpp "$shape-$type" "$f" $round $reps
        else
            bench llama.cpp "$shape-$type" "$f" $round $reps
            bench tern "$shape-$type" "$f" $round $reps
        fi
    done
done

nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$out/device.txt" 2>&1
labels=()
for spec in "${models[@]}"; do labels+=("${spec/ /-}"); done
python3 - "$out/results.tsv" "$n_gen" "${labels[@]}" << 'EOF' | tee "$out/cuda_peers.md"
import collections, sys
runs = collections.defaultdict(list)
labels = sys.argv[3:]  # (every model, so that one with no result shows as a row of dashes)
for line in open(sys.argv[1]):
    label, engine, _, ts = line.rstrip("\n").split("\t")
    runs[label, engine].append(float(ts))
def cell(xs):
    return "%.1f (%s)" % (sum(xs) / len(xs), ", ".join("%.1f" % x for x in xs)) if xs else "–"
print("| model, tg%s | tern webgpu t/s | llama.cpp CUDA t/s | tern / llama.cpp |" % sys.argv[2])
print("|---|---:|---:|---:|")
for label in labels:
    t, l = runs[label, "tern"], runs[label, "llama.cpp"]
    ratio = "%.2f" % ((sum(t) / len(t)) / (sum(l) / len(l))) if t and l else "–"
    print("| %s | %s | %s | %s |" % (label, cell(t), cell(l), ratio))
if "bitnet-2b4t-tq2_0" in labels:
    print("\nbitnet-2b4t-tq2_0: tern synth's 2B4T file as TQ2_0, relabelled arch 'bitnet' (mainline's: SiLU FFN in"
          " both engines); llama.cpp runs its TQ2_0 projections on the CPU (ggml-cuda has no TQ kernels).")
EOF
echo "cuda_peers_run: done in ${SECONDS}s"
