#!/usr/bin/env bash
# Issue 55's figure in a real browser on the lent GPU: the page (web/ + the wasm build) in Debian's
# headless Chromium (tools/device/pack_chrome.sh) on the GPU, next to native tern on the same file.
# The browser travels in two parts, each in its own call (a call carries 64 MiB with the working tree):
#   call 1: carry [".chrome1"], run `tools/device/web_chrome_run.sh stash`
#   call 2: carry [".chrome2"], run `tools/device/web_chrome_run.sh stash`
#   call 3: carry [".gl", ".webbin", ".chrome3"], run `tools/device/web_chrome_run.sh [ROUNDS (2)] [TOKENS (128)]`
# back to back (the machine goes back after 30 s idle; its /tmp holds the parts in between). Call 3:
#   1. joins and checks the parts (sha256), unpacks the browser, prints its version;
#   2. the WebGPU adapter Chromium gets (web_page_run.mjs stops here, with Chromium's reason, if none);
#   3. per round: native `tern bench` tg128 and `tern run` (greedy, 128 tokens after "Once upon a time"),
#      then the page on `tern synth bitnet-2b4t --seed 1`: one untimed generation, then 3 timed ones
#      (tokens/s as `tern run` counts it), and whether the page's text equals native tern run's;
#   4. one round of seeded sampling (--temp 0.7 --seed 42) in the page against native tern run's text.
# CHROME_FLAGS adds browser flags (each as "--chromium-flag FLAG"), PAGE_ARGS web_page_run.mjs options
# (--allow-cpu-adapter: with MODEL=share/models/tern-32m-en.gguf, a check of this script here on
# SwiftShader before device time is spent). .webbin is tools/device/pack_webbin.sh's (the wasm build and native tern from one commit).
# summary.txt holds the figures; logs are in $OUT/web_chrome.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
parts=/tmp/tern-chrome-parts
if [ "${1:-}" = stash ]; then  # a part's call: keep its part in /tmp for the last call
    mkdir -p "$parts"
    for d in .chrome1 .chrome2; do
        [ -f "$d/part" ] && cp "$d/part" "$parts/${d#.}" && echo "stashed $d ($(stat -c %s "$d/part") bytes)"
        [ -f "$d/sha256" ] && cp "$d/sha256" "$parts/sha256"
    done
    ls -la "$parts"
    exit 0
fi
rounds=${1:-2}
n=${2:-128}
out=${OUT:-/tmp/out}
log=$out/logs
mkdir -p "$out" "$log"
trap 'tar -C "$out" -czf "$out/web_chrome.tgz" logs && rm -rf "$log"' EXIT
sum() { tee -a "$out/summary.txt"; }
for p in chrome1 chrome2 sha256; do
    [ -f "$parts/$p" ] || { echo "web_chrome_run: $parts/$p is missing (run the two stash calls first)" | sum; exit 2; }
done
C=/tmp/tern-chrome
rm -rf "$C" && mkdir -p "$C"
cat "$parts/chrome1" "$parts/chrome2" > /tmp/tern-chrome.tar.xz
[ "$(sha256sum /tmp/tern-chrome.tar.xz | cut -d' ' -f1)" = "$(cat "$parts/sha256")" ] ||
    { echo "web_chrome_run: the joined parts do not match their sha256" | sum; exit 2; }
tar -C "$C" -xJf /tmp/tern-chrome.tar.xz || { echo "web_chrome_run: unpacking the browser failed" | sum; exit 2; }
# A font and a fontconfig file naming it (without one Skia aborts the renderer: "Not implemented").
[ -f .chrome3/fonts.tar.xz ] || { echo "web_chrome_run: .chrome3/fonts.tar.xz is missing (carry .chrome3)" | sum; exit 2; }
tar -C "$C" -xJf .chrome3/fonts.tar.xz
printf '<?xml version="1.0"?>\n<fontconfig><dir>%s</dir><cachedir>%s</cachedir></fontconfig>\n' "$C/fonts" "$C/fontcache" \
    > "$C/fonts.conf"
export FONTCONFIG_FILE=$C/fonts.conf
# shellcheck source=tools/device/webbin_env.sh
. tools/device/webbin_env.sh
[ -n "$icd" ] && export VK_ICD_FILENAMES=$icd
# The browser's libraries only for the browser (native tern keeps the machine's own).
chrome_env=(env "LD_LIBRARY_PATH=$C/libs:$C/chrome${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | sum
echo "chromium: $("${chrome_env[@]}" "$C/chrome/chromium-headless-shell" --version 2>&1 | head -1) (Debian $(cat "$C/VERSION"))" | sum
echo "tern: $(LD_LIBRARY_PATH=$T "$T/tern" --version 2>&1 | head -1); vulkan icd: ${icd:-none}" | sum
big=${MODEL:-/tmp/synth-2b4t.gguf}  # (MODEL=share/models/tern-32m-en.gguf for the check here)
[ -n "${MODEL:-}" ] || LD_LIBRARY_PATH=$T "$T/tern" synth bitnet-2b4t -o "$big" --seed 1 2>&1 | tail -1
prompt="Once upon a time"
# native NAME TEMP: native tern run's text and tokens/s into $log/NAME.json (seed 42).
native() {
    LD_LIBRARY_PATH=$T timeout 90 "$T/tern" run --backend webgpu -m "$big" -p "$prompt" -n "$n" --temp "$2" --seed 42 --json \
        > "$log/$1.json" 2> "$log/$1.err"
    "$T/node" -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
        console.log(`${process.argv[2]}: ${j.timings.decode_tokens_per_second.toFixed(1)} tokens/s (${j.n_generated_tokens} tokens)`)' \
        "$log/$1.json" "native tern run --temp $2" 2>&1 | sum
}
# page NAME FLAG_SET [web_page_run.mjs options]: the page in the browser with FLAG_SET (+ CHROME_FLAGS),
# 3 timed runs into $log/NAME.json; returns web_page_run.mjs's status.
page() {
    local name=$1 page_flags=() f
    for f in $2 ${CHROME_FLAGS:-}; do page_flags+=(--chromium-flag "$f"); done
    shift 2
    "${chrome_env[@]}" timeout 240 "$T/node" tools/device/web_page_run.mjs --chromium "$C/chrome/chromium-headless-shell" \
        --web-bin "$T/web" --puppeteer "$C/npm" --model "$big" -p "$prompt" -n "$n" --repeat 3 "$@" \
        "${page_flags[@]}" --dumpio ${PAGE_ARGS:-} --json-out "$log/$name.json" > "$log/$name.out" 2> "$log/$name.err"
}
native native 0
# Browser flag sets, tried in order in round 1 until one gives the page a GPU adapter (web_page_run.mjs
# exits at once, with Chromium's reason, when there is none); later rounds keep the one that worked.
# (/dev/shm in a container is small: the renderer dies with it, "Navigating frame was detached".)
# On the H200 (2026-11-28) the first set gave an NVIDIA adapter; --use-angle=vulkan alone gave none.
flag_sets=("--use-vulkan=native --enable-features=Vulkan,VulkanFromANGLE,DefaultANGLEVulkan --disable-vulkan-surface --enable-gpu --disable-dev-shm-usage --no-zygote --disable-gpu-sandbox"
           "--use-angle=vulkan --use-vulkan=native --disable-dev-shm-usage --no-zygote --disable-gpu-sandbox"
           "--disable-dev-shm-usage --no-zygote")
chosen=  # the flag set that gave an adapter (every set is non-empty)
try=0
for r in $(seq 1 "$rounds"); do
    LD_LIBRARY_PATH=$T timeout 60 "$T/tern" bench --backend webgpu -m "$big" -p 0 -n "$n" -r 2 2>&1 | tail -1 |
        sed "s/^/round $r native bench: /" | sum
    sets=("${flag_sets[@]}")
    [ -n "$chosen" ] && sets=("$chosen")
    for fs in "${sets[@]}"; do
        page "page.$r" "$fs"
        rc=$?
        echo "round $r page (flags: ${fs:-none}): rc $rc" | sum
        grep -h -E "adapter|run [0-9]|warm-up|rror|tokens/s" "$log/page.$r.err" "$log/page.$r.out" | cut -c1-400 | head -12 | sum
        [ $rc = 0 ] && { chosen=$fs; break; }
        try=$((try + 1))
        cp "$log/page.$r.err" "$log/page.$r.try$try.err"
    done
done
# Seeded sampling (--temp 0.7 --seed 42, the default chain, sampled on the device): one round, text against
# native tern run's with the same settings.
if [ -n "$chosen" ]; then
    native native.sampled 0.7
    page sampled "$chosen" --temp 0.7
    echo "sampled page (--temp 0.7 --seed 42): rc $?" | sum
    grep -h -E "run [0-9]|warm-up" "$log/sampled.err" | cut -c1-300 | sum
fi
# compare NATIVE PAGE...: each page JSON's tokens/s and whether all its runs' texts equal NATIVE's.
compare() {
    "$T/node" -e '
        const fs = require("fs");
        const read = (f) => { try { return JSON.parse(fs.readFileSync(f, "utf8")); } catch (e) { return null; } };
        const native = (read(process.argv[1]) || {}).text;
        for (const f of process.argv.slice(2)) {
          const runs = (read(f) || {}).runs || [];
          console.log(`${f.replace(/^.*\//, "")}: ${runs.map((x) => x.decode_tokens_per_second).join(" / ")} tokens/s; ` +
                      (native === undefined || !runs.length ? "no text to compare" :
                       runs.every((x) => x.text === native) ? "same text as native tern run" : "DIFFERENT text from native tern run"));
        }' "$@" 2>&1 | sum
}
compare "$log/native.json" "$log"/page.*.json
[ -f "$log/sampled.json" ] && compare "$log/native.sampled.json" "$log/sampled.json"
exit 0
