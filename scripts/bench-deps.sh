#!/bin/sh
# Installs what the peer-comparison benchmarks need, and only what is missing: Node.js and npm
# (Debian's nodejs / npm packages, when `node` or `npm` is not on PATH), gnuplot (gnuplot-nox,
# for bench/plot), and ONNX Runtime's Node binding pinned in bench/peers/package-lock.json,
# installed with `npm ci --ignore-scripts` (the package's install script would download extras
# that are not needed: its CPU library ships in the package). `make test` needs none of this.
# Needs root (or sudo) only when a Debian package must be installed.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS="$ROOT/bench/peers"

missing=""
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
command -v gnuplot >/dev/null 2>&1 || missing="$missing gnuplot-nox"

if [ -n "$missing" ]; then
    echo "bench-deps: installing:$missing"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            SUDO="sudo"
        else
            echo "bench-deps: missing:$missing; run this script as root to install them" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

cd "$PEERS"
pinned=$(node -p "require('./package.json').dependencies['onnxruntime-node']")
installed=$(node -p "require('onnxruntime-node/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$pinned" ]; then
    echo "bench-deps: npm ci --ignore-scripts in bench/peers (onnxruntime-node $pinned)"
    npm ci --ignore-scripts --no-audit --no-fund
fi
node -e "require('onnxruntime-node')" || {
    echo "bench-deps: onnxruntime-node does not load with node $(node --version)" >&2
    exit 1
}
echo "bench-deps: ready: node $(node --version), onnxruntime-node $pinned, $(gnuplot --version)"
