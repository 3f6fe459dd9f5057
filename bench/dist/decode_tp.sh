#!/bin/sh
# The sharded llama decode step over MPI at tp 1, 2, ...: runs the MPI llama program of the
# test suite (tests/dist/mpi_llama.c, built as BUILD/tests/mpi_llama: it shards the tiny llama
# with mixrt's sharding pass, decodes 64 greedy steps on every rank and checks rank 0 against one
# process) under mpirun with one thread per rank, and prints one JSON object: per tp, rank 0's
# step time, the one-process step time of the same run, and the exchanges, bytes sent and time in
# exchanges (waiting included) per step.
#   usage: bench/dist/decode_tp.sh [BUILD_DIR] [TP_LIST]     (defaults: build, "1 2")
# Wall-clock figures: on a shared host they are noisy (the program says so itself).
set -eu
build=${1:-build}
tps=${2:-"1 2"}
prog="$build/tests/mpi_llama"
[ -x "$prog" ] || { echo "decode_tp.sh: $prog not built (cmake --build $build --target mpi_llama)" >&2; exit 1; }
mpirun=$(command -v mpirun || true)
[ -n "$mpirun" ] || { echo "decode_tp.sh: mpirun not found (Open MPI)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
printf '{"model": "llama tiny (mixrt gen llama defaults), 64 greedy decode steps", "runs": ['
sep=""
for tp in $tps; do
  out=$(timeout 300 "$mpirun" --oversubscribe -np "$tp" --mca btl self,vader "$prog" 2>&1) || {
    echo "decode_tp.sh: tp $tp failed:" >&2; echo "$out" >&2; exit 1; }
  # rank 0: per sharded step E exchanges, B bytes sent, X ms in exchanges incl. waiting (P % of the step)
  # rank 0: S ms per sharded step (one process: O ms), ...
  echo "$out" | awk -v tp="$tp" -v sep="$sep" '
    /^ok rank 0:/ { ok = 1 }
    /^rank 0: per sharded step/ { ex = $6; bytes = $8; xms = $11; share = $17; sub(/\(/, "", share) }
    /^rank 0: .* ms per sharded step/ { step = $3; one = $10 }
    END {
      if (!ok || step == "") { print "decode_tp.sh: no result for tp " tp > "/dev/stderr"; exit 1 }
      printf "%s\n  {\"tp\": %d, \"equal_to_one_process\": true, \"step_ms\": %s, \"one_process_step_ms\": %s, " \
             "\"exchanges_per_step\": %s, \"bytes_sent_per_step\": %s, \"exchange_ms_per_step\": %s, " \
             "\"exchange_share_percent\": %s}", sep, tp, step, one, ex, bytes, xms, share
    }'
  sep=","
done
printf '\n]}\n'
