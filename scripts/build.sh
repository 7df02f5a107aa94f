#!/usr/bin/env bash
# Configures and builds tern into build/ (Release with debug info). Extra arguments go to CMake's
# configure step, e.g. scripts/build.sh -DTERN_SANITIZE=address,undefined
# Environment: BUILD_DIR (default build), JOBS (default: number of CPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [ $# -gt 0 ]; then
    cmake -S . -B "$build_dir" "$@"
fi
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}"
