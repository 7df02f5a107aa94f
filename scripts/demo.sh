#!/usr/bin/env bash
# The README's first command: installs what is missing, builds tern, and continues a prompt with
# tern's own small trained BitNet b1.58 model (share/models/tern-32m-en.gguf).
# Usage: scripts/demo.sh ["prompt"]
set -euo pipefail
cd "$(dirname "$0")/.."
prompt=${1:-"The ship"}
scripts/setup.sh --no-npm --no-fuzz
scripts/build.sh
exec build/bin/tern run -p "$prompt" -n 64 --temp 0.7 --seed 42
