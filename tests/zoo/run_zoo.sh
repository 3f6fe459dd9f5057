#!/bin/sh
# ctest entry zoo_models: runs tests/zoo/run_zoo.py with /usr/bin/python3 (Debian's python3-torch,
# python3-torchvision, python3-onnx and python3-numpy live there, not in other interpreters on PATH).
# Without them the test reports itself skipped (exit 77) with a loud message.
PY=/usr/bin/python3
if [ ! -x "$PY" ] || ! "$PY" -c "import torch, torchvision, onnx, numpy" >/dev/null 2>&1; then
    echo "*****************************************************************************************" >&2
    echo "zoo_models SKIPPED: $PY cannot import torch, torchvision, onnx and numpy." >&2
    echo "Install python3-torch python3-torchvision python3-onnx python3-numpy (scripts/deps.sh does)." >&2
    echo "*****************************************************************************************" >&2
    exit 77
fi
exec "$PY" "$(dirname "$0")/run_zoo.py" "$@"
