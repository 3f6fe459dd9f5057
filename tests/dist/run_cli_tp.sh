#!/bin/sh
# `mixrt demo --tp 2` and `mixrt run --tp 2` under mpirun (ctest entry "mpi_cli", label "mpi"):
#   run_cli_tp.sh MPIRUN MIXRT
# - the demo at tp 2 prints the same tokens (the summary line and the progress lines of 32
#   greedy steps) as one process, its check against the unsharded model passes, and rank 0
#   prints a time split line for both ranks;
# - `mixrt run --tp 2` runs the generated tiny llama with --steps (the caches through a binding)
#   and prints the per-rank split;
# - --tp that differs from the MPI world size is refused naming both (exit 2).
# Each run under a timeout; a run as root is allowed for these runs only.
set -u
MPIRUN="$1"
MIXRT="$2"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
failed=0
fail() {
    echo "mpi_cli: FAIL: $1"
    [ -n "${2:-}" ] && cat "$2"
    failed=1
}
mpi2() { timeout -k 5 60 "$MPIRUN" --oversubscribe -np 2 --mca btl self,vader "$@"; }
tokens() { grep -E '^tokens:|^step +[0-9]+/' "$1" | sed 's/  step .*//'; }

start=$(date +%s)
timeout -k 5 60 "$MIXRT" demo --steps 32 >"$DIR/one.txt" 2>&1 || fail "mixrt demo (exit $?)" "$DIR/one.txt"
mpi2 "$MIXRT" demo --steps 32 --tp 2 >"$DIR/tp2.txt" 2>&1 || fail "mixrt demo --tp 2 (exit $?)" "$DIR/tp2.txt"
tokens "$DIR/one.txt" >"$DIR/one.tok"
tokens "$DIR/tp2.txt" >"$DIR/tp2.tok"
if [ ! -s "$DIR/one.tok" ] || ! cmp -s "$DIR/one.tok" "$DIR/tp2.tok"; then
    fail "mixrt demo --tp 2 decodes other tokens than mixrt demo:"
    diff "$DIR/one.tok" "$DIR/tp2.tok"
elif ! grep -q '^check: .*: PASS' "$DIR/tp2.txt"; then
    fail "mixrt demo --tp 2: the check did not pass" "$DIR/tp2.txt"
elif [ "$(grep -c '^  rank [01]: step .* compute .* communication .* waiting' "$DIR/tp2.txt")" -ne 2 ]; then
    fail "mixrt demo --tp 2: no time split line for each rank" "$DIR/tp2.txt"
else
    echo "mpi_cli: demo --tp 2 decodes the tokens of one process ($(( $(date +%s) - start ))s):"
    grep -h '^tokens:\|^check:\|^  rank' "$DIR/tp2.txt"
fi

"$MIXRT" gen llama -o "$DIR/llama.onnx" >/dev/null 2>&1 || fail "mixrt gen llama (exit $?)"
mpi2 "$MIXRT" run "$DIR/llama.onnx" --tp 2 --random --shape past_len=8 --steps 3 >"$DIR/run.txt" 2>&1 ||
    fail "mixrt run --tp 2 (exit $?)" "$DIR/run.txt"
if ! grep -q '^  logits  *float32  *\[1, 1, 128\]' "$DIR/run.txt" ||
   ! grep -q '^  present_key_0  *float32  *\[1, 1, 9, 16\]' "$DIR/run.txt" ||
   ! grep -q '^state: 4 input/output pairs' "$DIR/run.txt" ||
   [ "$(grep -c '^  rank [01]: step ' "$DIR/run.txt")" -ne 2 ]; then
    fail "mixrt run --tp 2: want the whole logits, rank 0's half of the cache, the binding and a split per rank" "$DIR/run.txt"
else
    echo "mpi_cli: run --tp 2 of the tiny llama with --steps 3:"
    grep -h '^  logits\|^  present_key_0\|^  rank' "$DIR/run.txt"
fi

"$MIXRT" demo --tp 2 >"$DIR/bad.txt" 2>&1
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q -- '--tp 2 but the MPI world has 1 rank' "$DIR/bad.txt"; then
    fail "mixrt demo --tp 2 without mpirun: want exit 2 naming both sizes, got exit $rc" "$DIR/bad.txt"
else
    echo "mpi_cli: refused: $(head -1 "$DIR/bad.txt")"
fi
exit $failed
