#!/usr/bin/env bash
# Issue 52's prompt attention in the block order (cpu::attention_row's past 512 positions) on the lent GPU, about
# 2 minutes: on a synthetic BitNet b1.58 2B4T (tern synth bitnet-2b4t --seed 1),
#   1. the prompt-attention tests (tern_webgpu_tests 'WebGpuPromptBlockOrder*', 'WebGpuPromptAttention*',
#      'WebGpuAttentionSuperblocks*': every prompt path against the CPU oracle, bit for bit, both orders);
#   2. prompt speed in alternating rounds (webgpu_ab.sh): pp512 at a depth of 1024 (every row past
#      512 positions) and pp2048 (rows 513 .. 2048 of the prompt itself); the arms are the tunes in
#      PREFILL_ORDER_TUNES (default "-": the defaults; '+' for a comma within one);
#   3. per-kernel GPU times (TERN_WEBGPU_PROFILE=gpu) of one pp2048 for each of those tunes, the
#      attention kernels' lines.
# Carries .gl and .devicebin (TERN_PACK_OLD_DAWN=0 tools/device/pack_devicebin.sh). Prints the figures;
# $OUT/prefill_order.txt holds them, $OUT/profile_*.txt the whole profiles. PREFILL_ORDER_SECTIONS
# (default "1 2 3") picks the sections.
# Usage (on the device): tools/device/prefill_order.sh [ROUNDS (2)]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rounds=${1:-2}
final=${OUT:-/tmp/out}
mkdir -p "$final"
exec > >(tee "$final/prefill_order.txt") 2>&1
sections=" ${PREFILL_ORDER_SECTIONS:-1 2 3} "
tunes=${PREFILL_ORDER_TUNES:--}
if [[ $sections == *" 1 "* ]]; then
    (
        # shellcheck source=tools/device/device_env.sh
        . tools/device/device_env.sh
        echo "== 1. prompt-attention tests"
        timeout 240 "$B/tern_webgpu_tests" --gtest_brief=1 \
            --gtest_filter='WebGpuPromptBlockOrder*:*WebGpuPromptAttention*:WebGpuAttentionSuperblocks*' 2>&1 | tail -25
    )
fi
if [[ $sections == *" 2 "* ]]; then
    arms=()
    for t in $tunes; do
        if [ "$t" = - ]; then arms+=(tern); else arms+=("tern:TERN_WEBGPU_TUNE=$t"); fi
    done
    for args in "-p 512 -n 0 -d 1024 -r 5" "-p 2048 -n 0 -r 3"; do
        echo "== 2. $args: $tunes, $rounds rounds"
        AB_BENCH="$args" tools/device/webgpu_ab.sh "$rounds" "${arms[@]}"
    done
fi
if [[ $sections == *" 3 "* ]]; then
    (
        # shellcheck source=tools/device/device_env.sh
        . tools/device/device_env.sh
        model=/tmp/synth-2b4t.gguf
        [ -f "$model" ] || "$B/tern" synth bitnet-2b4t -o "$model" --seed 1 2>&1 | tail -1
        for t in $tunes; do
            echo "== 3. GPU profile of pp2048, $t (each dispatch alone)"
            tune=${t//+/,}
            [ "$t" = - ] && tune=""
            TERN_WEBGPU_TUNE="$tune" TERN_WEBGPU_PROFILE=gpu timeout 120 "$B/tern" bench --backend webgpu -m "$model" \
                -p 2048 -n 0 -r 1 > /dev/null 2> "$final/profile_${t//[=+]/_}.txt"
            grep -E "attention|kernels ran" "$final/profile_${t//[=+]/_}.txt"
        done
    )
fi
