#!/bin/sh
# Runs tests/dist/mpi_collectives.c, mpi_llama.c and mpi_gpt.c under mpirun (ctest entry "mpi",
# label "mpi"):
#   run_mpi.sh MPIRUN COLLECTIVES_PROGRAM LLAMA_PROGRAM [GPT_PROGRAM ZOO_DIR]
# (mpi_gpt runs the zoo's torch GPT, exported into ZOO_DIR once by bench/zoo/export.py.)
# with 2 and 4 ranks on one machine (--oversubscribe, shared-memory transport), each run under a
# timeout, then the fault cases: a rank that exits before a collective and a rank that never
# joins it must make the others end with an error within the timeout. Every rank prints "ok"
# and "FAIL" lines; a run passes when it ends in time with no FAIL line and the expected number
# of ok lines.
set -u
# MIXRT_MPI_QUICK=1 (the AddressSanitizer build sets it: every rank runs several times slower
# there): 2 ranks only, no torch GPT, and of the fault cases only the killed rank.
QUICK="${MIXRT_MPI_QUICK:-0}"
NPS="2 4"
[ "$QUICK" = 1 ] && NPS="2"
MPIRUN="$1"
PROGRAM="$2"
LLAMA="$3"
GPT="${4:-}"
ZOO="${5:-}"
# CI runs as root, which mpirun refuses unless told; only these runs are told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One thread per rank: ranks share the machine's cores.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
OUT="$(mktemp)"
# The fault runs' ranks report into a fresh directory and leave together (mpi_collectives.c).
DONE="$(mktemp -d)"
trap 'rm -rf "$OUT" "$DONE"' EXIT
fresh_done() { rm -f "$DONE"/done.*; }
failed=0

mpi() { # NP TIMEOUT MODE [DONE_DIR]
    timeout -k 5 "$2" "$MPIRUN" --oversubscribe -np "$1" --mca btl self,vader \
        --mca rmaps_base_oversubscribe 1 "$PROGRAM" "$3" ${4:+"$4"} >"$OUT" 2>&1
}

for np in $NPS; do
    start=$(date +%s)
    mpi "$np" 40 all
    rc=$?
    took=$(( $(date +%s) - start ))
    oks=$(grep -c '^ok rank' "$OUT")
    fails=$(grep -c '^FAIL' "$OUT")
    if [ "$rc" -ne 0 ] || [ "$fails" -ne 0 ] || [ "$oks" -lt $((np * 30)) ]; then
        echo "mpi: FAIL: $np ranks (exit $rc, $oks ok, $fails FAIL, ${took}s):"
        cat "$OUT"
        failed=1
    else
        echo "mpi: $np ranks: $oks checks ok in ${took}s"
    fi
done

# The sharded llama decode step: 64 greedy steps on 2 and 4 ranks equal to one process; then a
# token id past the vocabulary, refused by every rank at the embedding (two ok lines per rank).
for np in $NPS; do
    start=$(date +%s)
    timeout -k 5 60 "$MPIRUN" --oversubscribe -np "$np" --mca btl self,vader "$LLAMA" >"$OUT" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    oks=$(grep -c '^ok rank' "$OUT")
    if [ "$rc" -ne 0 ] || grep -q '^FAIL' "$OUT" || [ "$oks" -ne $((2 * np)) ]; then
        echo "mpi: FAIL: llama tp $np (exit $rc, $oks ok, ${took}s):"
        cat "$OUT"
        failed=1
    else
        echo "mpi: llama tp $np (${took}s):"
        grep -h '^ok rank 0\|^rank 0' "$OUT"
    fi
done

# Fewer kv-heads than ranks: 2 kv-heads on 4 ranks, each held by the 2 ranks whose query heads
# read it.
if [ "$QUICK" != 1 ]; then
    start=$(date +%s)
    timeout -k 5 60 "$MPIRUN" --oversubscribe -np 4 --mca btl self,vader "$LLAMA" kv=2 >"$OUT" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    oks=$(grep -c '^ok rank' "$OUT")
    if [ "$rc" -ne 0 ] || grep -q '^FAIL' "$OUT" || [ "$oks" -ne 8 ]; then
        echo "mpi: FAIL: llama with 2 kv-heads, tp 4 (exit $rc, $oks ok, ${took}s):"
        cat "$OUT"
        failed=1
    else
        echo "mpi: llama with 2 kv-heads, tp 4 (${took}s):"
        grep -h '^ok rank 0: tp 4 llama' "$OUT"
    fi
fi

# The zoo's torch-exported GPT decoder, sharded: prefill and 63 greedy steps on 2 and 4 ranks
# equal to one process. Exported once into ZOO (its own directory: export.py --only rewrites the
# manifest of the directory it writes); skipped, saying why, without Debian's python3-torch.
PY=/usr/bin/python3
if [ "$QUICK" = 1 ]; then
    echo "mpi: torch GPT skipped: MIXRT_MPI_QUICK=1"
elif [ -z "$GPT" ]; then
    echo "mpi: torch GPT skipped: no mpi_gpt program given"
elif [ ! -f "$ZOO/gpt_kv.onnx" ] && ! { [ -x "$PY" ] && "$PY" -c "import torch, onnx" >/dev/null 2>&1; }; then
    echo "mpi: torch GPT skipped: $PY cannot import torch and onnx (python3-torch, python3-onnx)"
elif [ ! -f "$ZOO/gpt_kv.onnx" ] && ! { mkdir -p "$ZOO" &&
        "$PY" "$(dirname "$0")/../../bench/zoo/export.py" "$ZOO" --only gpt_kv >"$OUT" 2>&1; }; then
    echo "mpi: FAIL: exporting the torch GPT into $ZOO:"
    cat "$OUT"
    failed=1
else
    for np in 2 4; do
        start=$(date +%s)
        timeout -k 5 60 "$MPIRUN" --oversubscribe -np "$np" --mca btl self,vader "$GPT" "$ZOO/gpt_kv.onnx" \
            >"$OUT" 2>&1
        rc=$?
        took=$(( $(date +%s) - start ))
        oks=$(grep -c '^ok rank' "$OUT")
        if [ "$rc" -ne 0 ] || grep -q '^FAIL' "$OUT" || [ "$oks" -ne "$np" ]; then
            echo "mpi: FAIL: torch GPT tp $np (exit $rc, $oks ok, ${took}s):"
            cat "$OUT"
            failed=1
        else
            echo "mpi: torch GPT tp $np (${took}s):"
            grep -h '^ok rank 0' "$OUT"
        fi
    done
fi

# A rank exits with status 1 before the collective: the job must end (with an error) well
# within the others' 3 s timeout plus start-up, never hang.
start=$(date +%s)
mpi 2 30 killed
rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$took" -gt 20 ]; then
    echo "mpi: FAIL: killed rank: exit $rc after ${took}s"
    cat "$OUT"
    failed=1
else
    echo "mpi: killed rank: the job ended with exit $rc after ${took}s"
    grep -h 'rank' "$OUT" | head -5
fi

[ "$QUICK" = 1 ] && exit $failed

# The same with a launcher that lets the job go on (orte_abort_on_non_zero_status 0): the others
# must fail by themselves after their 3 s timeout, naming the node and the rank that left.
fresh_done
start=$(date +%s)
timeout -k 5 40 "$MPIRUN" --oversubscribe -np 4 --mca btl self,vader --mca orte_abort_on_non_zero_status 0 \
    "$PROGRAM" killed "$DONE" >"$OUT" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
named=$(grep -c '^ok rank.*no answer from peer rank(s) 3' "$OUT")
if [ "$rc" -eq 124 ] || grep -q '^FAIL' "$OUT" || [ "$named" -ne 3 ]; then
    echo "mpi: FAIL: killed rank without abort: exit $rc, $named of 3 ranks named it, ${took}s:"
    cat "$OUT"
    failed=1
else
    echo "mpi: killed rank without abort: the 3 others failed naming it (${took}s):"
    grep -h 'the run fails' "$OUT" | head -1
fi

# A rank never joins the collective: each other rank fails after its 3 s timeout, naming the
# node and the missing rank (found by the roll call).
for np in 2 4; do
    start=$(date +%s)
    fresh_done
    mpi "$np" 40 stalled "$DONE"
    rc=$?
    took=$(( $(date +%s) - start ))
    oks=$(grep -c '^ok rank' "$OUT")
    fails=$(grep -c '^FAIL' "$OUT")
    if [ "$rc" -eq 124 ] || [ "$fails" -ne 0 ] || [ "$oks" -lt $((np - 1)) ]; then
        echo "mpi: FAIL: stalled rank, $np ranks (exit $rc, $oks ok, $fails FAIL, ${took}s):"
        cat "$OUT"
        failed=1
    else
        echo "mpi: stalled rank, $np ranks: the others failed in time (${took}s):"
        grep -h 'the run fails' "$OUT" | head -1
    fi
done
exit $failed
