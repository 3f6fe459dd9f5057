#!/bin/sh
# Installs the Debian packages mixrt builds and tests with, and only those that are missing.
# `apt-get update` runs only when something must be installed, so on a ready machine this is a
# quick no-op. Needs root (or sudo) only when it has something to install.
set -eu

PACKAGES="cmake make pkg-config gcc clang libclang-rt-14-dev \
libuv1-dev libck-dev libprotobuf-c-dev protobuf-c-compiler libcriterion-dev \
libhwloc-dev libopenblas-dev libonnx-dev qemu-user libopenmpi-dev openmpi-bin \
libjpeg62-turbo-dev libpng-dev libtiff-dev libwebp-dev libopenjp2-7-dev \
python3-torch python3-torchvision python3-onnx python3-numpy python3-pytest python3-dev"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    exit 0
fi

echo "deps: installing:$missing"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "deps: missing packages:$missing; run this script as root to install them" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
