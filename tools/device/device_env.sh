# Sourced by the device scripts (webgpu_gpu_run.sh, webgpu_ab.sh) from the repository root on the lent
# GPU machine: unpacks the Vulkan loader carried in .gl, unpacks .devicebin's compressed files, and
# exports B (the .devicebin folder) and what tern needs to find Dawn, the tokenizer and the driver.
# TERN_WEBGPU_LIB is dawn.node (npm webgpu, tern's default), OLD_DAWN bun-webgpu's library (for builds
# from before it: an arm `tern_base:TERN_WEBGPU_LIB=$OLD_DAWN` in webgpu_ab.sh).
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
B=$PWD/.devicebin
gunzip -kf "$B/dawn.node.gz" "$B/llama3_tokenizer.json.gz"
[ -f "$B/qwen3/tokenizer.json.gz" ] && gunzip -kf "$B/qwen3/tokenizer.json.gz"  # (families_quick.sh: synth qwen3-1.7b --vocab)
[ -f "$B/libwebgpu_wrapper.so.gz" ] && gunzip -kf "$B/libwebgpu_wrapper.so.gz"  # (packed unless TERN_PACK_OLD_DAWN=0)
for z in "$B"/lib*.so.*.gz; do [ -f "$z" ] && gunzip -kf "$z"; done  # tern serve's cpp-httplib and what it needs
export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
export TERN_WEBGPU_LIB=$B/dawn.node OLD_DAWN=$B/libwebgpu_wrapper.so TERN_LLAMA3_TOKENIZER=$B/llama3_tokenizer.json
icd=$(ls /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json 2>/dev/null | head -1)
[ -n "$icd" ] && export VK_DRIVER_FILES=$icd
