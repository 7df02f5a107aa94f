#!/usr/bin/env bash
# Packs a headless Chromium for the lent GPU machine, where issue 55 wants the page measured in a real
# browser: Debian's chromium-headless-shell (apt-get download of this machine's Chromium version, with
# the data files it reads from chromium-common), the shared libraries it links that the GPU machine's
# Ubuntu image may lack (everything ldd lists here except glibc, libstdc++ and libgcc_s, plus NSS's
# dlopened modules) and puppeteer-core's node_modules (from .deps/npm-server, scripts/setup.sh).
# Nothing of it is committed: the packages come from Debian's archive at run time.
# The bundle (~78 MB xz) is larger than what one device call may carry beside the working tree
# (64 MiB in all, the tree ~26 MB), so it is split into .chrome1/ and .chrome2/ (ignored by git): carry
# one per call, back to back (the machine stays warm for 30 s after a call and keeps /tmp), each call
# running `tools/device/web_chrome_run.sh stash`; the last call carries .gl, .webbin and .chrome3 (a
# font: the GPU machine has none) and runs `tools/device/web_chrome_run.sh`, which joins the parts and
# unpacks them (see that script).
# Usage: tools/device/pack_chrome.sh   (about 3 minutes on 2 cores: xz -9)
set -euo pipefail
cd "$(dirname "$0")/../.."
nm=.deps/npm-server/node_modules
[ -f "$nm/puppeteer-core/package.json" ] || { echo "pack_chrome: $nm/puppeteer-core is missing; run scripts/setup.sh" >&2; exit 1; }
work=$(mktemp -d /tmp/tern-chrome-XXXXXX)
trap 'rm -rf "$work"' EXIT
version=$(dpkg-query -W -f='${Version}' chromium 2>/dev/null || apt-cache policy chromium-headless-shell | awk '/Candidate/ {print $2}')
(cd "$work" && apt-get download "chromium-headless-shell=$version" "chromium-common=$version" >/dev/null 2>&1) ||
    { echo "pack_chrome: apt-get download chromium-headless-shell=$version failed (apt-get update first?)" >&2; exit 1; }
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/x"; done
src=$work/x/usr/lib/chromium
b=$work/bundle
mkdir -p "$b/chrome/locales" "$b/libs"
# The browser and the files it opens next to itself (ICU data, V8 snapshots, resources, the Vulkan loader
# its GPU process dlopens for WebGPU).
cp "$src"/chromium-headless-shell "$src"/headless_*.pak "$src"/icudtl.dat "$src"/snapshot_blob.bin \
   "$src"/v8_context_snapshot.bin "$src"/libvulkan.so.1 "$src"/libEGL.so "$src"/libGLESv2.so "$b/chrome/"
cp "$src"/locales/en-US.pak "$b/chrome/locales/"
ldd "$src/chromium-headless-shell" | awk '$3 ~ /^\// {print $3}' |
    grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' | while read -r lib; do cp -L "$lib" "$b/libs/"; done
for lib in libfreebl3 libfreeblpriv3 libnssckbi libnssdbm3 libsoftokn3; do
    for f in /usr/lib/x86_64-linux-gnu/$lib.so /usr/lib/x86_64-linux-gnu/$lib.chk; do [ -f "$f" ] && cp -L "$f" "$b/libs/"; done
done
mkdir -p "$b/npm"
cp -r "$nm" "$b/npm/node_modules"
echo "$version" > "$b/VERSION"
tar -C "$b" -cf - . | xz -9 -T0 > "$work/chrome.tar.xz"
size=$(stat -c %s "$work/chrome.tar.xz")
half=$(( (size + 1) / 2 ))
rm -rf .chrome1 .chrome2 .chrome3
mkdir -p .chrome1 .chrome2 .chrome3
split -b "$half" -d -a 1 "$work/chrome.tar.xz" "$work/part"
mv "$work/part0" .chrome1/part
mv "$work/part1" .chrome2/part
sha256sum "$work/chrome.tar.xz" | cut -d' ' -f1 > .chrome2/sha256
# Part 3, small, goes with the last call: a font (Skia aborts the renderer when fontconfig finds none).
font=$(fc-match -f '%{file}' 'DejaVu Sans' 2>/dev/null || true)
[ -f "$font" ] || font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
[ -f "$font" ] || { echo "pack_chrome: no DejaVu Sans here (apt-get install fonts-dejavu-core)" >&2; exit 1; }
mkdir -p "$work/fonts"
cp -L "$font" "$work/fonts/"
tar -C "$work" -cJf .chrome3/fonts.tar.xz fonts
echo "pack_chrome: Chromium $version, $((size / 1000000)) MB xz in .chrome1/ and .chrome2/ (carry each in its own call)"
