#!/usr/bin/env bash
# Cross-compiles the CPU backend's kernel and model tests for ARM64 (Debian's g++-aarch64-linux-gnu,
# cmake/aarch64-linux-gnu.cmake; libraries and tests only: -DTERN_BUILD_APPS=OFF) and runs the NEON
# ones under qemu-user, so the NEON + sdot kernels are tested against the scalar reference on every
# change (scripts/test.sh calls this on x86-64). Bounded for CI's 2 cores: the sweeps take fewer
# points under emulation (TERN_TEST_EMULATED=1: the kernels' token counts, the head's table sizes, one
# whole model with the shipped layout), and each run is cut off after TERN_ARM64_TIMEOUT seconds
# (default 300: ~1 minute of CPU is expected; a hang fails instead of stalling CI). The scalar
# reference's own tests run natively in the main suite.
# Usage: scripts/test_arm64.sh [extra gtest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
    if ! command -v "$tool" >/dev/null; then
        echo "test_arm64: '$tool' is missing" >&2
        echo "hint: scripts/setup.sh installs g++-aarch64-linux-gnu, qemu-user and the arm64 libraries" >&2
        exit 1
    fi
done
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$SECONDS
if [ ! -f build-arm64/CMakeCache.txt ] || ! grep -q '^TERN_BUILD_APPS:BOOL=OFF' build-arm64/CMakeCache.txt; then
    cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
          -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_WEBGPU=OFF -DTERN_BUILD_APPS=OFF "${launcher[@]}" >/dev/null
fi
cmake --build build-arm64 -j "$(nproc)" --target tern_backend_tests tern_model_tests
built=$SECONDS
export TERN_TEST_EMULATED=1
limit=${TERN_ARM64_TIMEOUT:-300}
# One emulated process keeps one core busy: the kernel suite (~50 s of the ~55 under qemu) is split
# into two gtest shards, and the pieces run as many at once as there are cores.
extra=("$@")
run_piece() {  # <suite>/<shard>/<shards>
    local suite shard shards filter='Isa/CpuKernels.*neon:Isa/CpuHead.*neon:Isa/CpuQBlock.*neon:Cpu/BackendOps.*neon*'
    IFS=/ read -r suite shard shards <<< "$1"
    [ "$suite" = tern_model_tests ] && filter='Isa/CpuFastModel.*neon:Isa/CpuFastFamily.*neon'
    # -L /: the arm64 multiarch run-time libraries (cmake/aarch64-linux-gnu.cmake).
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard \
        run_gtest_logged "test_arm64: $suite (shard $((shard + 1)) of $shards)" "build-arm64/$suite.$shard.log" \
        timeout --signal=KILL "$limit" qemu-aarch64 -L / "build-arm64/bin/$suite" --gtest_brief=1 \
        --gtest_filter="$filter" "${extra[@]+"${extra[@]}"}"
}
source scripts/pool.sh
pool_run "$(nproc)" run_piece tern_backend_tests/0/2 tern_backend_tests/1/2 tern_model_tests/0/1
echo "test_arm64: passed (build $((built - start)) s, tests under qemu $((SECONDS - built)) s)"
