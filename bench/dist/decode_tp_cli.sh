#!/bin/sh
# The llama decode step at tp 1, 2, ... through the CLI: `mpirun -np N mixrt demo --tp N` (each
# rank shards the model in memory, keeps its KV cache as session state and decodes 64 greedy
# steps; nothing else runs between the steps, unlike tests/dist/mpi_llama.c, whose rank 0 also
# runs the unsharded model). For two models: the demo's small llama (4 layers, hidden 256,
# 4 heads / 4 kv-heads of 64, ffn 688, vocab 1000: 15.2 MB of weights) and one 4x larger (hidden 512,
# 8 heads / 8 kv-heads of 64, ffn 1376, vocab 2000: 59.3 MB). One rank per core
# (--bind-to core, OPENBLAS_NUM_THREADS=1). Prints one JSON object: per model and tp, rank 0's
# median step, its mean step split into compute / communication / waiting (tools/cmd_tp.h says
# how), the exchanges and bytes rank 0 sends per step, and whether the tokens and the check
# against the unsharded model agree with one process.
#   usage: bench/dist/decode_tp_cli.sh [BUILD_DIR] [TP_LIST] [STEPS]   (defaults: build, "1 2", 64)
# Wall-clock figures on a shared host are noisy: the ranks share 2 cores with other work.
set -eu
build=${1:-build}
tps=${2:-"1 2"}
steps=${3:-64}
mixrt="$build/tools/mixrt"
[ -x "$mixrt" ] || { echo "decode_tp_cli.sh: $mixrt not built (cmake --build $build --target mixrt_cli)" >&2; exit 1; }
mpirun=$(command -v mpirun || true)
[ -n "$mpirun" ] || { echo "decode_tp_cli.sh: mpirun not found (Open MPI)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name|demo options
models="small|--size small
small_x4|--size small --hidden 512 --heads 8 --kv-heads 8 --head-dim 64 --ffn 1376 --vocab 2000"

printf '{"bench": "llama decode step, mixrt demo --tp N under mpirun (--bind-to core, 1 thread per rank)", "steps": %s, "load_average": "%s", "runs": [' \
  "$steps" "$(cut -d' ' -f1-3 /proc/loadavg)"
sep=""
echo "$models" | while IFS='|' read -r name opts; do
  # shellcheck disable=SC2086
  "$mixrt" demo $opts --steps "$steps" </dev/null >"$tmp/one.txt" 2>&1 || { echo "decode_tp_cli.sh: $name one process failed" >&2; cat "$tmp/one.txt" >&2; exit 1; }
  one_tokens=$(grep '^tokens:' "$tmp/one.txt")
  one_med=$(awk '/^step latency: median/ { print $4 }' "$tmp/one.txt")
  for tp in $tps; do
    # shellcheck disable=SC2086
    timeout 600 "$mpirun" --oversubscribe --bind-to core -np "$tp" --mca btl self,vader \
      "$mixrt" demo $opts --steps "$steps" --tp "$tp" </dev/null >"$tmp/tp.txt" 2>&1 ||
      { echo "decode_tp_cli.sh: $name tp $tp failed:" >&2; cat "$tmp/tp.txt" >&2; exit 1; }
    same=false
    [ "$(grep '^tokens:' "$tmp/tp.txt")" = "$one_tokens" ] && grep -q '^check: .*: PASS' "$tmp/tp.txt" && same=true
    # "  rank 0: step S us = compute C us (P%) + communication M us (Q%) + waiting W us (R%); E exchanges, B bytes sent per step"
    awk -v name="$name" -v tp="$tp" -v sep="$sep" -v same="$same" -v one="$one_med" '
      /^step latency: median/ { med = $4 }
      /^  rank 0: step / { step = $4; comp = $8; comm = $13; wait = $18; ex = $21; bytes = $23 }
      END {
        if (step == "") { print "decode_tp_cli.sh: no split for " name " tp " tp > "/dev/stderr"; exit 1 }
        printf "%s\n  {\"model\": \"%s\", \"tp\": %d, \"same_tokens_as_one_process\": %s, " \
               "\"one_process_median_step_us\": %s, \"median_step_us\": %s, \"mean_step_us\": %s, " \
               "\"compute_us\": %s, \"communication_us\": %s, \"waiting_us\": %s, " \
               "\"communication_share_percent\": %.1f, \"exchanges_per_step\": %s, \"bytes_sent_per_step\": %s}",
               sep, name, tp, same, one, med, step, comp, comm, wait,
               (step > 0 ? 100 * (comm + wait) / step : 0), ex, bytes
      }' "$tmp/tp.txt"
    sep=","
  done
done
printf '\n]}\n'
