#!/usr/bin/env bash
# Issue 52's long-context target on the lent GPU, about 2 minutes: decode deep into a context on a synthetic
# BitNet b1.58 2B4T (tern synth bitnet-2b4t --seed 1):
#   1. tg64 at DEPTHS (0,1024,2048,4096) for each of DEPTH_CURVE_TUNES (default "-": the defaults; e.g.
#      attn_long_positions=1 runs the split kernels at every depth, whose curve's intercept and slope
#      separate a fixed cost per step from a cost per position);
#   2. tg64 at depth DEPTH_D (4096), alternating rounds, for each setting of DEPTH_TUNES (TERN_WEBGPU_TUNE values,
#      space-separated; default: attn_split_tiles 1 = attention_split_pvt + _combine, with 1024 / G instead of 64
#      positions per softmax workgroup (attn_split_chunk 0), 0 = attention_split_pv);
#   3. per-kernel GPU times (TERN_WEBGPU_PROFILE=gpu) of tg16 at each of DEPTH_PROFILE_D's depths (4096) for
#      each of DEPTH_PROFILE's tunes (default: the defaults; the matvecs' times at depth 0 against 4096 show
#      whether the KV stream defeats their L2 prefetch);
#   4. the long-context attention tests on the GPU (tern_webgpu_tests 'WebGpuLongOneQuery*', 'WebGpuAttentionSuperblocks*' and
#      'WebGpuModel.SplitAttention*': the P·V forms
#      against the CPU's algorithm, bit for bit, at lengths that cross every split boundary; and issue 52's
#      block-order paths, 'WebGpuBlockOrder*' and 'PagedBlockOrder*', against cpu::attention_row).
# Carries .gl and .devicebin (TERN_PACK_OLD_DAWN=0 tools/device/pack_devicebin.sh). Logs in $OUT/depth.tgz;
# $OUT/summary.txt holds the figures. DEPTH_SECTIONS (default "1 2 3 4") picks the sections to run.
# Usage (on the device): tools/device/depth_run.sh [ROUNDS (2)]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rounds=${1:-2}
final=${OUT:-/tmp/out}
out=/tmp/depth_out
rm -rf "$out" && mkdir -p "$out" "$final"
trap 'cp "$out/summary.txt" "$final/" 2>/dev/null; tar czf "$final/depth.tgz" -C "$out" .' EXIT
# shellcheck source=tools/device/device_env.sh
. tools/device/device_env.sh
for bin in tern tern_webgpu_tests; do
    [ -x "$B/$bin" ] || { echo "depth_run: .devicebin/$bin is missing" | tee -a "$out/summary.txt"; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
model=/tmp/synth-2b4t.gguf
"$B/tern" synth bitnet-2b4t -o "$model" --seed 1 2>&1 | tail -1
bench() {  # tune, then tern bench's arguments; prints its result rows
    local tune=$1; shift
    TERN_WEBGPU_TUNE="$tune" timeout 120 "$B/tern" bench --backend webgpu -m "$model" -p 0 "$@" 2>&1 | grep -E "^\| .*tg"
}

sections=" ${DEPTH_SECTIONS:-1 2 3 4} "
depths=${DEPTHS:-0,1024,2048,4096}
if [[ $sections == *" 1 "* ]]; then
    for tune in ${DEPTH_CURVE_TUNES:--}; do
        [ "$tune" = - ] && tune=""
        echo "== 1. tg64 at depths $depths (${tune:-defaults})" | tee -a "$out/summary.txt"
        bench "$tune" -n 64 -d "$depths" -r 3 | tee -a "$out/summary.txt"
    done
fi

depth=${DEPTH_D:-4096}
tunes=${DEPTH_TUNES:-attn_split_tiles=1 attn_split_chunk=0 attn_split_tiles=0}
if [[ $sections == *" 2 "* ]]; then
    echo "== 2. tg64 at depth $depth, $rounds alternating rounds" | tee -a "$out/summary.txt"
    for r in $(seq "$rounds"); do
        for tune in $tunes; do
            echo -n "round $r $tune " | tee -a "$out/summary.txt"
            bench "$tune" -n 64 -d "$depth" -r 3 | tee -a "$out/summary.txt"
        done
    done
fi

if [[ $sections == *" 3 "* ]]; then
    echo "== 3. GPU profiles of tg16 (each dispatch alone, so slower than above)" | tee -a "$out/summary.txt"
    for d in ${DEPTH_PROFILE_D:-4096}; do
        for tune in ${DEPTH_PROFILE:--}; do  # ("-": the defaults)
            [ "$tune" = - ] && tune=""
            TERN_WEBGPU_TUNE="$tune" TERN_WEBGPU_PROFILE=gpu timeout 120 "$B/tern" bench --backend webgpu -m "$model" \
                -p 0 -n 16 -d "$d" -r 1 > /dev/null 2> "$out/profile_d${d}_${tune:-defaults}.txt"
            echo "-- depth $d ${tune:-defaults} (rc $?)" | tee -a "$out/summary.txt"
            grep -E "_decode|attention|rope_kv|kernels ran" "$out/profile_d${d}_${tune:-defaults}.txt" | grep -v prefill |
                tee -a "$out/summary.txt"
        done
    done
fi

[[ $sections == *" 4 "* ]] || exit 0
echo "== 4. long-context attention tests on the GPU" | tee -a "$out/summary.txt"
timeout 120 "$B/tern_webgpu_tests" --gtest_brief=1 --gtest_filter='WebGpuLongOneQuery*:WebGpuAttentionSuperblocks*:WebGpuModel.SplitAttention*:WebGpuBlockOrder*:WebGpuLongOneQueryBlockOrder*:PagedBlockOrder*' > "$out/gpu_tests.txt" 2>&1
echo "exit $?" | tee -a "$out/summary.txt"
grep -E "FAILED|PASSED|Failure|differ" "$out/gpu_tests.txt" | head -20 | tee -a "$out/summary.txt"
