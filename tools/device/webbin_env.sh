# shellcheck shell=bash
# Sourced by tools/device/web_run.sh and web_chrome_run.sh on the lent GPU machine (repository root):
# the carried GL/Vulkan loaders (.gl) unpacked into /, and tools/device/pack_webbin.sh's .webbin unpacked
# into T=/tmp/webbin (web/: the wasm build; web-base/: a base build if packed; node, native tern, dawn.node,
# their libraries, the Llama-3 tokenizer). Exports TERN_WEBGPU_LIB, TERN_LLAMA3_TOKENIZER and, where the
# NVIDIA driver's Vulkan ICD is found, VK_DRIVER_FILES (icd). LD_LIBRARY_PATH is left to the caller (the
# browser must not see $T's libraries).
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
W=$PWD/.webbin
T=/tmp/webbin
mkdir -p "$T/web"
for z in "$W"/*.xz; do
    name=$(basename "$z" .xz)
    [ "$name" = web.tar ] && { tar -C "$T/web" -xJf "$z"; continue; }
    [ "$name" = web-base.tar ] && { mkdir -p "$T/web-base"; tar -C "$T/web-base" -xJf "$z"; continue; }
    xz -dc "$z" > "$T/$name"
done
chmod +x "$T/node" "$T/tern"
export TERN_WEBGPU_LIB=$T/dawn.node TERN_LLAMA3_TOKENIZER=$T/llama3_tokenizer.json
icd=$(ls /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json 2>/dev/null | head -1)
[ -n "$icd" ] && export VK_DRIVER_FILES=$icd
