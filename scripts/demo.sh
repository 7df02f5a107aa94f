#!/usr/bin/env bash
# The README's first command: installs what is missing, builds tern, and generates text.
# Until tern ships its trained model, this makes a small random-weight model with `tern synth`
# (the output says so: its text is meaningless) and continues a prompt with it.
# Usage: scripts/demo.sh ["prompt"]
set -euo pipefail
cd "$(dirname "$0")/.."
prompt=${1:-"The ship"}
scripts/setup.sh --no-npm
scripts/build.sh
mkdir -p models
[ -f models/tiny-random.gguf ] || build/bin/tern synth tiny -o models/tiny-random.gguf --seed 1
exec build/bin/tern run -m models/tiny-random.gguf -p "$prompt" -n 48 --seed 42
