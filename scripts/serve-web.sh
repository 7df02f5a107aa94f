#!/usr/bin/env bash
# Serves the browser build's site (scripts/build-web.sh -> build-web/site) on http://127.0.0.1:PORT/
# with Node's built-in HTTP server (no packages): the right MIME types (application/wasm), no caching
# of the page's own files. Usage: scripts/serve-web.sh [PORT]   (default 8088)
set -euo pipefail
cd "$(dirname "$0")/.."
site=${BUILD_DIR:-build-web}/site
[ -f "$site/index.html" ] || { echo "error: $site/index.html is missing; run scripts/build-web.sh" >&2; exit 1; }
exec node tests/web/js/static_server.mjs "$site" "${1:-8088}"
