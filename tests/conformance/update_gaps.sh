#!/bin/sh
# Rewrites tests/conformance/KNOWN_GAPS.md from a run of `mixrt conformance` over the ONNX node
# tests: every test that does not pass is listed with the reason the run gave. The same run then
# rewrites the operator table and the gap list of docs/onnx.md (ops_table.py --run). Run it after
# an operator lands, read the diff (a test that used to pass must never appear), and commit it.
# usage: tests/conformance/update_gaps.sh [BUILD_DIR] [DATA_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
data=${2:-${MIXRT_ONNX_NODE_DIR:-$root/tests/data/onnx-node}}
out=$here/KNOWN_GAPS.md
run=$(mktemp)
trap 'rm -f "$run"' EXIT
"$build/tools/mixrt" conformance "$data" --quiet --by-op > "$run" 2>&1 || true
{
    cat <<'HEAD'
# Known gaps in ONNX conformance

`mixrt conformance` skips the tests listed here (lines of the form "- `test_name`: reason"), and
so do the test suites that run the ONNX node tests through the executors; every other test in
the ONNX node-test folder must pass, and `make test` fails on any FAIL. A test is listed only
with the concrete reason it cannot pass: the message of the run that wrote this file
(`tests/conformance/update_gaps.sh`). docs/onnx.md groups them by cause.

HEAD
    grep '^FAIL ' "$run" | sed -e 's/^FAIL \([^:]*\): /- `\1`: /' -e "s|$data/||g" | sort
} > "$out"
grep ' passed, ' "$run" | tail -1
echo "$(grep -c '^- `' "$out") known gaps written to $out"
python3 "$here/ops_table.py" "$build" --run "$run"
echo "docs/onnx.md: operator table and gap list rewritten from the same run"
