#!/usr/bin/env bash
# Builds `tern` from an older commit into .devicebin/NAME (stripped, static libstdc++ like
# pack_devicebin.sh), for A/B rounds on the lent GPU against the working tree's build:
#   tools/device/pack_base.sh COMMIT NAME     e.g. tools/device/pack_base.sh 2b3b771 tern_base
#   then, on the device: tools/device/webgpu_ab.sh 3 tern tern_base
# The commit is checked out in a git worktree under $TMPDIR (kept between calls, so a second
# build of the same commit is incremental) that shares this checkout's .deps.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -ne 2 ]; then
    echo "usage: $0 COMMIT NAME   (writes .devicebin/NAME)" >&2
    exit 2
fi
commit=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "$0: '$1' is not a commit here" >&2; exit 2; }
name=$2
case "$name" in
    tern | tern_webgpu_tests | */* | "") echo "$0: pick a NAME other than '$name'" >&2; exit 2 ;;
esac
root=$PWD
tree=${TMPDIR:-/tmp}/tern-base-${commit:0:12}
if [ ! -d "$tree" ]; then
    git worktree prune
    git worktree add --detach "$tree" "$commit" >/dev/null
fi
[ -e "$tree/.deps" ] || ln -s "$root/.deps" "$tree/.deps"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
[ -f "$tree/build-dev/CMakeCache.txt" ] || cmake -S "$tree" -B "$tree/build-dev" -G Ninja "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build "$tree/build-dev" -j "$(nproc)" --target tern
mkdir -p .devicebin
cp "$tree/build-dev/bin/tern" ".devicebin/$name"
strip ".devicebin/$name"
echo "$0: .devicebin/$name is tern at $(git log -1 --format='%h %s' "$commit" | cut -c1-72)"
